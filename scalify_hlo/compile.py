"""``compile_scaled``: export a JAX function, rewrite it, and call the result like the function.

The rewritten module is wrapped in a ``jax.export.Exported`` (a public route that composes
with ``jax.jit``, ``lax.scan`` and ``fori_loop``): its flat signature is the scaled calling
convention, and ``ScaledStep`` converts pytrees of arrays and ``ScaledArray``s to it and back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export
from jax.extend import mlir as jax_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from scalify_hlo import ir as hlo_ir
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import Policy
from scalify_hlo.scaled_array import ScaledArray, as_scaled, is_scaled_leaf
from scalify_hlo.signature import ELEMENT_DTYPES, entry_signature
from scalify_hlo.symbols import entry_function

_SCALED_DTYPES = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32))


def _is_scaled_dtype(dtype: Any) -> bool:
    return jnp.dtype(dtype) in _SCALED_DTYPES


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """One flat argument or result of the original function."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def scaled(self) -> bool:
        return _is_scaled_dtype(self.dtype)


@dataclasses.dataclass
class Report:
    """What the rewrite did: op counts, FP8 dots, fallbacks and rescale points."""

    ops_before: dict[str, int]
    ops_after: dict[str, int]
    stats: dict[str, int]
    warnings: list[str]

    @property
    def fp8_dots(self) -> tuple[int, int]:
        return self.stats.get("fp8-dots.fp8", 0), self.stats.get("fp8-dots.dots", 0)

    @property
    def fallbacks(self) -> list[str]:
        return [w for w in self.warnings if "running it unscaled" in w]

    def __str__(self) -> str:
        before, after = sum(self.ops_before.values()), sum(self.ops_after.values())
        fp8, dots = self.fp8_dots
        lines = [
            f"ops: {before} -> {after} ({after / max(before, 1):.2f}x)",
            f"fp8 dots: {fp8} / {dots}",
            f"fallbacks (ops run unscaled): {len(self.fallbacks)}",
            f"rescale points: {self.stats.get('rescale.points', 0)}",
        ]
        lines += [f"  {w}" for w in self.warnings]
        return "\n".join(lines)


def export(fn: Callable[..., Any], *args: Any) -> str:
    """The StableHLO text of ``jax.jit(fn)`` at ``args``, with locations (JAX's name stack)."""
    return jax.jit(fn).lower(*args).as_text(debug_info=True)


def _leaf_specs(tree: Any) -> tuple[list[LeafSpec], Any]:
    with_path, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_scaled_leaf)
    specs = []
    for path, leaf in with_path:
        if isinstance(leaf, ScaledArray):
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf.data)),
                                  np.dtype(np.float32)))
        else:
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf)),
                                  np.dtype(jnp.asarray(leaf).dtype if not hasattr(leaf, "dtype")
                                           else leaf.dtype)))
    return specs, treedef


def _example(leaf: Any, spec: LeafSpec) -> jax.ShapeDtypeStruct:
    source = leaf.data if isinstance(leaf, ScaledArray) else leaf
    sharding = getattr(source, "sharding", None) if isinstance(source, jax.Array) else None
    return jax.ShapeDtypeStruct(spec.shape, spec.dtype, sharding=sharding)


class ScaledStep:
    """A compiled scaled step; call it with the same pytrees as the original function."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], pipeline: str,
                 return_scaled: bool = True) -> None:
        self.pipeline = pipeline
        self.return_scaled = return_scaled
        self._in_specs, self._in_tree = _leaf_specs(args)
        leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)

        def flat_fn(*flat: Any) -> list[Any]:
            outputs = fn(*jax.tree.unflatten(self._in_tree, flat))
            out_leaves, self._out_tree = jax.tree.flatten(outputs)
            return out_leaves

        examples = [_example(leaf, spec) for leaf, spec in zip(leaves, self._in_specs,
                                                                strict=True)]
        # keep_unused: the scaled signature has a (data, scale) pair for every leaf.
        jitted = jax.jit(flat_fn, keep_unused=True)
        original = jax_export.export(jitted)(*examples)
        self._out_specs = [LeafSpec(f"output[{i}]", tuple(a.shape), np.dtype(a.dtype))
                           for i, a in enumerate(original.out_avals)]
        # Rewrite the lowered module, not ``original.mlir_module()``: serialization decomposes
        # CHLO (erf, ...) into polynomials whose symbolic scales underflow, while the CHLO op
        # itself runs unscaled; the rewritten module is serialized (and decomposed) afterwards.
        self.stages: dict[str, str] = {
            "exported": jitted.lower(*examples).as_text(debug_info=True)}

        def keep(name: str, text: str) -> None:
            self.stages[name] = text

        result = rewrite_module_source(self.stages["exported"], pipeline, debug_info=True,
                                       dump_after_pass=keep)
        if result.error is not None or result.output is None:
            raise ScalifyError(f"cannot rewrite the step: {result.error}")
        self.text = result.output.decode()
        self._report = Report(result.ops_before, result.ops_after, dict(result.context.stats),
                              list(result.context.warnings))
        self.exported = _scaled_exported(original, self.text, self._in_specs, self._out_specs)
        self._data_dtypes = _data_dtypes(self.exported.in_avals, self._in_specs)
        self._scale_sources = _forwarded_scales(self.text, self._in_specs, self._out_specs)
        self._jitted = jax.jit(self._call_flat)

    # ----- calling ------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        outputs = self._jitted(*args)
        if self._scale_sources and self.return_scaled:
            # Scales the module returns unchanged come back as None (see _call_flat): the
            # argument's own array, where jax.jit would have XLA copy it.
            leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)
            out_leaves = jax.tree.leaves(outputs, is_leaf=is_scaled_leaf)
            for out_index, in_index in self._scale_sources.items():
                if out_leaves[out_index].scale is None:
                    out_leaves[out_index].scale = leaves[in_index].scale
        return outputs

    def _check(self, args: tuple[Any, ...]) -> None:
        """Arguments against the compiled step's: run when ``jax.jit`` traces ``_call_flat``,
        i.e. once per argument structure, shapes and dtypes (the check costs more than a
        small step's dispatch)."""
        with_path, treedef = jax.tree_util.tree_flatten_with_path(args, is_leaf=is_scaled_leaf)
        if treedef != self._in_tree:
            expected = [f"args{spec.path}" for spec in self._in_specs]
            got = [f"args{jax.tree_util.keystr(path)}" for path, _ in with_path]
            got_set, expected_set = set(got), set(expected)
            missing = [name for name in expected if name not in got_set]
            extra = [name for name in got if name not in expected_set]
            detail = (f"{missing[0]} is missing" if missing else
                      f"{extra[0]} is not an argument of the compiled step" if extra else
                      f"expected {self._in_tree}, got {treedef}")
            raise ScalifyError(f"arguments do not have the structure the step was compiled "
                               f"for: {detail}")
        for (path, leaf), spec in zip(with_path, self._in_specs, strict=True):
            name = f"args{jax.tree_util.keystr(path)}"
            source = leaf.data if isinstance(leaf, ScaledArray) else leaf
            shape = tuple(np.shape(source))
            if shape != spec.shape:
                raise ScalifyError(f"{name}: shape {shape} does not match the compiled step's "
                                   f"{spec.shape}")
            dtype = np.dtype(source.dtype) if hasattr(source, "dtype") else np.asarray(
                source).dtype
            if isinstance(leaf, ScaledArray):
                if not spec.scaled:
                    raise ScalifyError(f"{name}: a ScaledArray where the step takes "
                                       f"{spec.dtype}")
            elif spec.scaled != _is_scaled_dtype(dtype) or (not spec.scaled and
                                                             dtype != spec.dtype):
                raise ScalifyError(f"{name}: dtype {dtype} does not match the compiled step's "
                                   f"{spec.dtype}")

    def _call_flat(self, *args: Any) -> Any:
        self._check(args)
        leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)
        flat: list[Any] = []
        for leaf, spec, dtype in zip(leaves, self._in_specs, self._data_dtypes, strict=True):
            if spec.scaled:
                scaled = as_scaled(leaf, dtype)
                flat += [scaled.data, scaled.scale]
            else:
                flat.append(leaf)
        raw = self.exported.call(*flat)
        outputs: list[Any] = []
        position = 0
        for index, spec in enumerate(self._out_specs):
            if spec.scaled:
                source = self._scale_sources.get(index)
                forward = (self.return_scaled and source is not None
                           and _is_f32_scale(leaves[source]))
                value = ScaledArray(raw[position], None if forward else raw[position + 1])
                outputs.append(value if self.return_scaled else value.unscale(spec.dtype))
                position += 2
            else:
                outputs.append(raw[position])
                position += 1
        return jax.tree.unflatten(self._out_tree, outputs)

    def scale_args(self, *args: Any) -> tuple[Any, ...]:
        """``args`` as the compiled step takes them: every floating leaf a ``ScaledArray`` in
        the data type of its argument (f16, or f32 where the rewrite keeps squares wide, such
        as Adam's second moment). Start training state this way and the step's outputs have
        the same types as its inputs, so ``jax.jit`` does not compile a second time."""
        self._check(args)
        leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)
        converted = [as_scaled(leaf, dtype) if spec.scaled else leaf
                     for leaf, spec, dtype in zip(leaves, self._in_specs, self._data_dtypes,
                                                  strict=True)]
        return tuple(jax.tree.unflatten(self._in_tree, converted))

    # ----- inspection ---------------------------------------------------------------------
    def report(self) -> Report:
        return self._report

    def stage(self, name: str) -> str:
        """The module after pass ``name`` (``exported`` is the module before any pass); a
        pass's options may be left out (``scalify`` for ``scalify{data-dtype=f32}``)."""
        if name in self.stages:
            return self.stages[name]
        for key in reversed(self.stages):
            if key.split("{", 1)[0] == name:
                return self.stages[key]
        raise KeyError(f"no stage '{name}'; stages: {', '.join(self.stages)}")


def _is_f32_scale(leaf: Any) -> bool:
    """A ScaledArray whose scale ``as_scaled`` passes on as is: a rank-0 f32 array."""
    if not isinstance(leaf, ScaledArray):
        return False
    aval = getattr(leaf.scale, "aval", None)
    return (aval is not None and aval.shape == () and aval.dtype == jnp.float32
            and not aval.weak_type)


def _forwarded_scales(text: str, in_specs: list[LeafSpec],
                      out_specs: list[LeafSpec]) -> dict[int, int]:
    """Output leaf -> input leaf, for output scales that the rewritten module returns
    unchanged from an argument (e.g. SGD keeps a weight's scale)."""
    with hlo_ir.ir_context():
        module = hlo_ir.parse_module(text)
        block = entry_function(module).regions[0].blocks[0]
        returned = block.operations[len(block.operations) - 1].operands
        forwarded = {index: value.arg_number for index, value in enumerate(returned)
                     if isinstance(value, ir.BlockArgument)}
    scale_arguments: dict[int, int] = {}  # flat argument index of a scale -> input leaf
    position = 0
    for leaf, spec in enumerate(in_specs):
        if spec.scaled:
            scale_arguments[position + 1] = leaf
        position += 2 if spec.scaled else 1
    sources: dict[int, int] = {}
    position = 0
    for leaf, spec in enumerate(out_specs):
        if spec.scaled and forwarded.get(position + 1) in scale_arguments:
            sources[leaf] = scale_arguments[forwarded[position + 1]]
        position += 2 if spec.scaled else 1
    return sources


def _data_dtypes(avals: tuple[Any, ...], specs: list[LeafSpec]) -> list[Any]:
    dtypes: list[Any] = []
    position = 0
    for spec in specs:
        dtypes.append(avals[position].dtype if spec.scaled else None)
        position += 2 if spec.scaled else 1
    return dtypes


def _flat_tree(count: int) -> Any:
    return jax.tree.structure((tuple(range(count)), {}))


def _scaled_exported(original: jax_export.Exported, text: str, in_specs: list[LeafSpec],
                     out_specs: list[LeafSpec]) -> jax_export.Exported:
    """An ``Exported`` for the rewritten module: flat (data, scale) avals and shardings."""
    signature = entry_signature(text)
    in_avals = tuple(jax.core.ShapedArray(s.shape, ELEMENT_DTYPES[s.element])
                     for s in signature.inputs)
    out_avals = tuple(jax.core.ShapedArray(s.shape, ELEMENT_DTYPES[s.element])
                      for s in signature.results)

    def split(shardings: tuple[Any, ...], specs: list[LeafSpec]) -> tuple[Any, ...]:
        flat: list[Any] = []
        for sharding, spec in zip(shardings, specs, strict=True):
            flat.append(sharding)
            if spec.scaled:
                flat.append(_replicated_like(sharding))
        return tuple(flat)

    serialized = jax_mlir.serialize_portable_artifact(text, stablehlo.get_current_version())
    changes: dict[str, Any] = {
        "in_tree": _flat_tree(len(in_avals)),
        "in_avals": in_avals,
        "out_tree": jax.tree.structure(tuple(range(len(out_avals)))),
        "out_avals": out_avals,
        "in_shardings_hlo": split(original.in_shardings_hlo, in_specs),
        "out_shardings_hlo": split(original.out_shardings_hlo, out_specs),
        "module_kept_var_idx": tuple(range(len(in_avals))),
        "mlir_module_serialized": serialized,
        "_get_vjp": None,
    }
    if getattr(original, "_has_named_shardings", False):
        changes["_in_named_shardings"] = split(original._in_named_shardings, in_specs)
        changes["_out_named_shardings"] = split(original._out_named_shardings, out_specs)
    return dataclasses.replace(original, **changes)


def _replicated_like(sharding: Any) -> Any:
    """The sharding of a scale: replicated wherever its data is sharded."""
    if sharding is None:
        return None
    if hasattr(sharding, "mesh") and hasattr(sharding, "spec"):  # a NamedSharding
        return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
    if hasattr(sharding, "is_replicated"):  # an HloSharding
        return type(sharding).replicate()
    return None


def compile_scaled(fn: Callable[..., Any], *args: Any, policy: Policy | None = None,
                   pipeline: str | None = None, return_scaled: bool = True) -> ScaledStep:
    """Export ``fn`` at ``args``, rewrite it with ``policy`` (or an explicit ``pipeline``) and
    return a step that takes the same pytrees (floating leaves as arrays or ``ScaledArray``s)
    and returns ``ScaledArray``s for floating outputs (plain arrays if not ``return_scaled``).
    """
    chosen = pipeline if pipeline is not None else (policy or Policy()).pipeline()
    return ScaledStep(fn, args, chosen, return_scaled)
