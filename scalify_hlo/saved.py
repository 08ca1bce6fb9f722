"""Saving a ``ScaledStep`` and loading it back without exporting or rewriting again.

A saved step is a zip archive:

* ``meta.json``: the format and its version, the pipeline, the leaf specs of the arguments
  and results (path, shape, dtype, PRNG key implementation), the bank layout (where each
  argument's and result's scale sits in the vector of scales), the report with its records,
  and the names of the stages;
* ``exported.bin``: the rewritten program, ``jax.export``'s serialization of the ``Exported``
  that the step calls (``Exported.serialize`` / ``jax.export.deserialize``);
* ``trees.bin``: the pytree structures of the arguments and results, carried by the
  serialization of an ``Exported`` of an empty function of them: ``jax.export`` stores a
  tree by the registered names of its node types, never by pickling, so loading a file runs
  no code from it. Trees holding custom node types (optax states, flax structs) need them
  registered with ``jax.export.register_namedtuple_serialization`` or
  ``register_pytree_node_serialization``, in the process that saves and the one that loads;
* ``stages.json``: the module text after each pass (``step.stage``).

The file is written to a temporary file beside it and renamed, so a failed save never
leaves a partial file. Loading reads nothing else: a file from another format version, a
missing or corrupt one, is one ``ScalifyError`` line.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import export as jax_export

from scalify_hlo import __version__
from scalify_hlo.compile import LeafSpec, Report, ScaledStep
from scalify_hlo.errors import ScalifyError
from scalify_hlo.flat_pairs import flat_size
from scalify_hlo.rewrites import Record

FORMAT = "scalify-hlo saved step"
# Bump when what the wrapper reads changes meaning (the bank layout, the leaf specs...).
FORMAT_VERSION = 2
# Formats this version reads: 1 had no encodings (every leaf data * scale).
_READABLE_VERSIONS = (1, 2)
_MEMBERS = ("meta.json", "exported.bin", "trees.bin", "stages.json")
_DELAYED = "delayed.bin"  # only a step with delayed statistics has it


# ----- saving ---------------------------------------------------------------------------
def save_step(step: ScaledStep, path: str | os.PathLike[str]) -> None:
    """Write ``step`` to ``path``, atomically (temporary file in the same folder, renamed)."""
    members = {
        "meta.json": json.dumps(_meta(step), indent=1).encode(),
        "exported.bin": bytes(step.exported.serialize()),
        "trees.bin": _serialized_trees(step),
        "stages.json": json.dumps(step.stages).encode(),
    }
    if step._delayed_exported is not None:  # the program that applies delayed statistics
        members[_DELAYED] = bytes(step._delayed_exported.serialize())
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as exc:
        raise ScalifyError(f"cannot write '{path}': {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as stream, zipfile.ZipFile(
                stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)
        os.replace(temp_name, target)
    except OSError as exc:
        Path(temp_name).unlink(missing_ok=True)
        raise ScalifyError(f"cannot write '{path}': {exc.strerror or exc}") from None
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _meta(step: ScaledStep) -> dict[str, Any]:
    report = step.report()
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "scalify_hlo_version": __version__,
        "jax_version": jax.__version__,
        "pipeline": step.pipeline,
        "return_scaled": step.return_scaled,
        "check_scales": step.check_scales,
        "in_specs": [_spec_json(spec) for spec in step._in_specs],
        "out_specs": [_spec_json(spec) for spec in step._out_specs],
        "first_same_scale": list(step._first_same_scale),
        "arg_slots": list(step._arg_slots),
        "bank_size": step._bank_size,
        "delayed": step._delayed,
        "report": {
            "ops_before": report.ops_before, "ops_after": report.ops_after,
            "stats": report.stats, "warnings": report.warnings,
            "records": [list(record) for record in report.records],
            "pipeline": report.pipeline,
        },
    }


def _spec_json(spec: LeafSpec) -> dict[str, Any]:
    return {"path": spec.path, "shape": list(spec.shape), "dtype": np.dtype(spec.dtype).name,
            "key_impl": spec.key_impl, "encoding": spec.encoding}


def _serialized_trees(step: ScaledStep) -> bytes:
    """The argument and result trees as the input tree of an exported empty function."""
    def examples(tree: Any, specs: list[LeafSpec]) -> Any:
        return jax.tree.unflatten(tree, [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs])

    try:
        carrier = jax_export.export(jax.jit(lambda inputs, outputs: ()))(
            examples(step._in_tree, step._in_specs), examples(step._out_tree, step._out_specs))
        return bytes(carrier.serialize())
    except ValueError as exc:  # a node type without a registered serialization
        raise ScalifyError(f"cannot save the step's pytree structure: {_one_line(exc)}") from None


# ----- loading --------------------------------------------------------------------------
def load_scaled(path: str | os.PathLike[str]) -> ScaledStep:
    """The step saved at ``path`` by ``ScaledStep.save``, callable as the original one (the
    same program: bit-identical outputs on the same inputs and device), without exporting
    or rewriting."""
    members = _read_members(path)
    meta = _parse_meta(path, members["meta.json"])
    try:
        exported = jax_export.deserialize(bytearray(members["exported.bin"]))
        carrier = jax_export.deserialize(bytearray(members["trees.bin"]))
        stages = json.loads(members["stages.json"])
        delayed = (jax_export.deserialize(bytearray(members[_DELAYED]))
                   if _DELAYED in members else None)
    except Exception as exc:  # flatbuffers, an unregistered node type, JSON: all corrupt
        raise ScalifyError(f"cannot load the step saved in '{path}': {_one_line(exc)}") from None
    try:
        step = _rebuild(meta, exported, carrier, stages, delayed)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ScalifyError(f"'{path}' is not a valid saved step: {_one_line(exc)}") from None
    return step


def _read_members(path: str | os.PathLike[str]) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            missing = [name for name in _MEMBERS if name not in names]
            if missing:
                raise ScalifyError(f"'{path}' is not a saved scalify-hlo step (no {missing[0]})")
            return {name: archive.read(name) for name in (*_MEMBERS, _DELAYED)
                    if name in names}
    except OSError as exc:
        raise ScalifyError(f"cannot read '{path}': {exc.strerror or exc}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError) as exc:
        raise ScalifyError(f"'{path}' is not a saved scalify-hlo step ({_one_line(exc)})"
                           ) from None


def _parse_meta(path: str | os.PathLike[str], raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ScalifyError(f"'{path}' is not a saved scalify-hlo step (bad meta.json)")
    version = meta.get("format_version")
    if version not in _READABLE_VERSIONS:
        raise ScalifyError(
            f"'{path}' was saved by scalify-hlo {meta.get('scalify_hlo_version', '?')} in "
            f"saved-step format {version}; scalify-hlo {__version__} reads format "
            f"{FORMAT_VERSION}: compile and save the step again")
    return meta


def _rebuild(meta: dict[str, Any], exported: jax_export.Exported,
             carrier: jax_export.Exported, stages: dict[str, str],
             delayed: jax_export.Exported | None = None) -> ScaledStep:
    """A ScaledStep from what ``save_step`` wrote, through the same
    ``_set_calling_convention`` that ``ScaledStep.__init__`` ends with."""
    in_tree, out_tree = carrier.in_tree.children()[0].children()
    in_specs = [_spec(entry) for entry in meta["in_specs"]]
    out_specs = [_spec(entry) for entry in meta["out_specs"]]
    if in_tree.num_leaves != len(in_specs) or out_tree.num_leaves != len(out_specs):
        raise ValueError("its trees and leaf specs disagree")
    flat_in = flat_size(spec.scaled for spec in in_specs)
    if len(exported.in_avals) != flat_in:
        raise ValueError("its program and leaf specs disagree")
    report = meta["report"]
    step = ScaledStep.__new__(ScaledStep)
    step.pipeline = step._passes = meta["pipeline"]
    step.return_scaled = bool(meta["return_scaled"])
    step.check_scales = bool(meta["check_scales"])
    step._in_specs, step._in_tree = in_specs, in_tree
    step._out_specs, step._out_tree = out_specs, out_tree
    step._out_key_impls = [spec.key_impl for spec in out_specs]
    step.stages = {str(name): str(text) for name, text in stages.items()}
    step.text = next(reversed(step.stages.values()), "")
    step._first_same_scale = [int(i) for i in meta["first_same_scale"]]
    step._report = Report(dict(report["ops_before"]), dict(report["ops_after"]),
                          dict(report["stats"]), list(report["warnings"]),
                          [Record(*map(str, entry)) for entry in report["records"]],
                          str(report["pipeline"]))
    step.exported = exported
    step._delayed = int(meta.get("delayed", 0))
    if step._delayed and delayed is None:
        raise ValueError(f"its program has delayed statistics and no {_DELAYED}")
    step._delayed_exported = delayed if step._delayed else None
    step.delayed_text = ""  # not saved: the program is (stages hold the first rewrite's)
    step._set_calling_convention(
        [None if slot is None else int(slot) for slot in meta["arg_slots"]],
        int(meta["bank_size"]))
    return step


def _spec(entry: dict[str, Any]) -> LeafSpec:
    return LeafSpec(str(entry["path"]), tuple(int(d) for d in entry["shape"]),
                    np.dtype(jax.numpy.dtype(entry["dtype"])), entry["key_impl"],
                    _encoding(entry.get("encoding", "")))


def _encoding(raw: Any) -> str:
    if raw not in ("", "sqrt"):
        raise ValueError(f"unknown encoding {raw!r}")
    return str(raw)


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
