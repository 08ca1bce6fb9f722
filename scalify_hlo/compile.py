"""``compile_scaled``: export a JAX function, rewrite it, and call the result like the function.

The rewritten module is wrapped in a ``jax.export.Exported`` (a public route that composes
with ``jax.jit``, ``lax.scan`` and ``fori_loop``): its flat signature is the scaled calling
convention, and ``ScaledStep`` converts pytrees of arrays and ``ScaledArray``s to it and back.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export
from jax.extend import mlir as jax_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.dtypes import DATA_NUMPY_DTYPES
from scalify_hlo.errors import ScalifyError
from scalify_hlo.explain import FORMATS as EXPLAIN_FORMATS
from scalify_hlo.explain import Explanation
from scalify_hlo.ir import OPS_COUNTED
from scalify_hlo.policy import Policy
from scalify_hlo.rewrites import Record
from scalify_hlo.scaled_array import (
    ScaleBank,
    ScaledArray,
    as_scaled,
    check_scale,
    is_known_pow2,
    is_pow2,
    is_scaled_leaf,
    scale_type_error,
    split_pow2,
)
from scalify_hlo.scaled_array import banked as _banked
from scalify_hlo.signature import ELEMENT_DTYPES, EntrySignature, signature_of
from scalify_hlo.symbols import entry_function

# Where an argument's scale comes from (ScaledStep._flatten).
PLAIN, OWN, SPLIT, BANK_STRIDE = -1, -2, -3, 1 << 20
# Scales per kernel when a step builds its bank (ScaledStep._bank_vector).
BANK_GROUP = 8


def _is_scaled_dtype(dtype: Any) -> bool:
    return jnp.dtype(dtype) in DATA_NUMPY_DTYPES


def _is_key(value: Any) -> bool:
    """A typed PRNG key array (``jax.random.key``): it crosses the exported module as its
    uint32 key data and is wrapped again on the other side."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """One flat argument or result of the original function."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    key_impl: str | None = None  # a PRNG key array's implementation; dtype is its data's
    # How the step stores it: "" (data * scale) or "sqrt" (a square, by its signed square
    # root: Adam's second moment under the default policy; docs/scaled-signature.md).
    encoding: str = ""

    @property
    def scaled(self) -> bool:
        return _is_scaled_dtype(self.dtype)


@dataclasses.dataclass
class Report:
    """What the rewrite did: op counts, FP8 dots, fallbacks and rescale points; and per op,
    how it is scaled (``records``, the tables of ``table()``, as ``scalify-hlo explain``)."""

    ops_before: dict[str, int]
    ops_after: dict[str, int]
    stats: dict[str, int]
    warnings: list[str]
    records: list[Record] = dataclasses.field(default_factory=list)
    pipeline: str = ""

    def explanation(self) -> Explanation:
        """The records as tables: ``families()`` and ``lines()`` as data."""
        return Explanation(self.records, self.pipeline, self.warnings)

    def table(self, fmt: str = "text") -> str:
        """Per op family, counts by kind; per source line, the ops and how they are scaled
        (``fmt``: ``text`` or ``json``, as ``scalify-hlo explain --format``)."""
        if fmt not in EXPLAIN_FORMATS:
            raise ScalifyError(f"unknown table format '{fmt}' (use one of "
                               f"{', '.join(EXPLAIN_FORMATS)})")
        return self.explanation().render(fmt)

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
            f"{OPS_COUNTED}: {before} -> {after} ({after / max(before, 1):.2f}x)",
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
        elif _is_key(leaf):
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf)),
                                  np.dtype(np.uint32), str(jax.random.key_impl(leaf))))
        else:  # the dtype jax.jit gives the leaf (a numpy float64 is float32 without x64)
            dtype = _array_dtype(leaf, f"args{jax.tree_util.keystr(path)}")
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf)),
                                  np.dtype(jax.dtypes.canonicalize_dtype(dtype))))
    return specs, treedef


def _array_dtype(leaf: Any, name: str) -> np.dtype:
    """The dtype of an argument leaf, or a one-line error naming its path where jax cannot
    make an array of it (a string, an arbitrary object: JAX's own error is a long TypeError
    that names neither the argument nor what to do)."""
    try:
        dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else jnp.asarray(leaf).dtype)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind in "OSUV":
        raise ScalifyError(f"{name}: a {type(leaf).__name__} is not an array; compile_scaled "
                           "takes arrays, ScaledArrays and numbers as arguments (make other "
                           "values static: close over them or use functools.partial)")
    return dtype


def _example(leaf: Any, spec: LeafSpec) -> jax.ShapeDtypeStruct:
    if spec.key_impl is not None:
        data = jax.random.key_data(leaf)
        return jax.ShapeDtypeStruct(data.shape, data.dtype)
    source = leaf.data if isinstance(leaf, ScaledArray) else leaf
    sharding = getattr(source, "sharding", None) if isinstance(source, jax.Array) else None
    return jax.ShapeDtypeStruct(spec.shape, spec.dtype, sharding=sharding)


class ScaledStep:
    """A compiled scaled step; call it with the same pytrees as the original function."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], pipeline: str,
                 return_scaled: bool = True, check_scales: bool = False) -> None:
        self.pipeline = pipeline
        self.return_scaled = return_scaled
        # Read every scale a call gets on the device and refuse bad ones (one wait per call),
        # and split traced ones (see _own_scale).
        self.check_scales = check_scales
        self._in_specs, self._in_tree = _leaf_specs(args)
        leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)

        def flat_fn(*flat: Any) -> list[Any]:
            flat = [x if spec.key_impl is None else jax.random.wrap_key_data(
                x, impl=spec.key_impl) for x, spec in zip(flat, self._in_specs, strict=True)]
            outputs = fn(*jax.tree.unflatten(self._in_tree, flat))
            out_leaves, self._out_tree = jax.tree.flatten(outputs)
            self._out_key_impls = [str(jax.random.key_impl(x)) if _is_key(x) else None
                                   for x in out_leaves]
            return [x if impl is None else jax.random.key_data(x)
                    for x, impl in zip(out_leaves, self._out_key_impls, strict=True)]

        examples = [_example(leaf, spec) for leaf, spec in zip(leaves, self._in_specs,
                                                                strict=True)]
        # keep_unused: the scaled signature has a (data, scale) pair for every leaf.
        jitted = jax.jit(flat_fn, keep_unused=True)
        original = jax_export.export(jitted)(*examples)
        self._out_specs = [LeafSpec(f"output[{i}]", tuple(a.shape), np.dtype(a.dtype), impl)
                           for i, (a, impl) in enumerate(zip(original.out_avals,
                                                              self._out_key_impls, strict=True))]
        # Rewrite the lowered module, not ``original.mlir_module()``: serialization decomposes
        # CHLO (erf, ...) into polynomials whose symbolic scales underflow, while the CHLO op
        # itself runs unscaled; the rewritten module is serialized (and decomposed) afterwards.
        self._exported_text = jitted.lower(*examples).as_text(debug_info=True)
        self._stages: dict[str, str] | None = None  # printed on demand: see ``stages``
        signature: list[EntrySignature] = []
        # Per scaled output, the first scaled output that returns the same scale value.
        self._first_same_scale: list[int] = []

        expected = sum(2 if spec.scaled else 1 for spec in self._in_specs)

        def inspect(module: ir.Module) -> None:
            signature.append(signature_of(module))
            if len(signature[0].inputs) == expected:  # else refused below
                self._first_same_scale = _first_same_scale(module, self._out_specs)

        result = rewrite_module_source(self._exported_text, pipeline, debug_info=True,
                                       inspect=inspect, records=True, count_ops=True)
        if result.error is not None or result.output is None:
            raise ScalifyError(f"cannot rewrite the step: {result.error}")
        self.text = result.output.decode()
        if len(signature[0].inputs) != expected:
            raise ScalifyError(
                f"the pipeline '{pipeline}' does not give the scaled calling convention (a "
                f"(data, scale) pair per floating argument: {expected} arguments, got "
                f"{len(signature[0].inputs)}); compile_scaled needs one with scalify")
        self._in_specs = _with_encodings(self._in_specs, signature[0].sqrt_inputs)
        self._out_specs = _with_encodings(self._out_specs, signature[0].sqrt_results)
        self._report = Report(result.ops_before, result.ops_after, dict(result.context.stats),
                              list(result.context.warnings),
                              list(result.context.records or []), pipeline)
        self.exported = _scaled_exported(original, self.text, signature[0], self._in_specs,
                                         self._out_specs)
        self._set_calling_convention()

    def _set_calling_convention(self, arg_slots: list[int | None] | None = None,
                                bank_size: int | None = None) -> None:
        """What a call needs beyond the exported module, from ``exported``, the leaf specs
        and trees and ``_first_same_scale``: run by ``__init__`` and by ``load_scaled``
        (which passes the bank layout it saved)."""
        self._data_dtypes = _data_dtypes(self.exported.in_avals, self._in_specs)
        self._in_encodings = [spec.encoding for spec in self._in_specs]
        self._out_scaled = [spec.scaled for spec in self._out_specs]
        # (output index, its index in the bank, its encoding) of every scaled output.
        self._out_slots = [(index, position, self._out_specs[index].encoding)
                           for position, index in
                           enumerate(i for i, scaled in enumerate(self._out_scaled) if scaled)]
        # Where scale_args puts each argument's scale in its bank: at the index of the output
        # with the same path and shape (the state a training step returns), so that the
        # first call and the steady state of a loop take their scales from the same places
        # and run one compiled program; after the outputs' scales otherwise.
        self._arg_slots = (_arg_slots(self._in_specs, self._out_specs, self._out_tree)
                           if arg_slots is None else arg_slots)
        if bank_size is None:
            bank_size = max([sum(self._out_scaled), *(s + 1 for s in self._arg_slots if
                                                      s is not None)], default=1)
        self._bank_size = bank_size
        # One jitted program per layout (where each argument's scale comes from; see
        # _flatten), looked up here: as a static argument of one jax.jit the layout cost
        # about 9 us per call to hash and compare, more than a small step's scale arithmetic.
        self._programs: dict[tuple[int, ...], Callable[..., Any]] = {}

    # ----- calling ------------------------------------------------------------------------
    # Scales travel as one f32 vector (a bank) per call in each direction: with one buffer
    # per scale, a small step spends more time handing buffers to XLA and back than XLA spends
    # running the scale arithmetic. The vector is built and read inside the program, where
    # XLA fuses that into the kernels around it.
    def __call__(self, *args: Any) -> Any:
        flat, banks, layout = self._flatten(args)
        program = self._programs.get(layout) or self._program(layout)
        outputs, vector = program(flat, banks)
        if vector is not None:  # the program's own list: filled in place
            self._in_bank(outputs, vector)
        return self._out_tree.unflatten(outputs)

    def lower(self, *args: Any) -> Any:
        """The ``jax.stages.Lowered`` program that a call with ``args`` runs."""
        flat, banks, layout = self._flatten(args)
        return self._program(layout).lower(flat, banks)

    def _program(self, layout: tuple[int, ...]) -> Callable[..., Any]:
        program = self._programs.get(layout)
        if program is None:
            program = self._programs[layout] = jax.jit(functools.partial(self._run,
                                                                          layout=layout))
        return program

    def _in_bank(self, values: list[Any], vector: jax.Array) -> list[Any]:
        """``values``, changed in place: each scaled output a ScaledArray whose scale is its
        element of ``vector``."""
        bank, make = ScaleBank(vector), _banked
        for index, position, encoding in self._out_slots:
            values[index] = make(values[index], bank, position, encoding)
        return values

    def _flatten(self, args: tuple[Any, ...]) -> tuple[list[Any], list[Any], tuple[int, ...]]:
        """Leaves of ``args``, the vectors of the distinct banks among them, and the layout:
        per leaf ``PLAIN`` (an array), ``OWN`` (a ScaledArray with a scale of its own, a
        power of two, passed as a (data, scale) pair), ``SPLIT`` (the same with any other
        scale, split in the program, see ``_own_scale``) or ``bank * BANK_STRIDE + index``
        (its scale is element ``index`` of a bank). The indices are static: XLA fuses a
        static slice into every kernel that uses the scale, where a dynamic one is a kernel
        of its own. (Run on every call: written for speed.)"""
        try:
            flat = self._in_tree.flatten_up_to(args)
        except (ValueError, TypeError):
            self._check(args)
            raise ScalifyError("arguments do not have the structure the step was compiled "
                               f"for: expected {self._in_tree}") from None
        banks: list[Any] = []
        layout = [PLAIN] * len(flat)
        encodings = self._in_encodings
        for position, leaf in enumerate(flat):
            if type(leaf) is not ScaledArray:
                continue
            if leaf.encoding != encodings[position]:  # rare: state made by the caller
                leaf = as_scaled(leaf, leaf.dtype, encodings[position])
            bank = leaf._bank
            if bank is None:
                scale = leaf._scale
                flat[position] = (leaf.data, scale)
                layout[position] = OWN if is_known_pow2(scale) else self._own_scale(
                    scale, position)
                continue
            number = 0 if banks and banks[0] is bank else _bank_number(banks, bank)
            flat[position] = leaf.data
            layout[position] = number * BANK_STRIDE + leaf._index
        return flat, [bank.vector for bank in banks], tuple(layout)

    def _own_scale(self, scale: Any, position: int) -> int:
        """``OWN`` or ``SPLIT`` for a scale that a ScaledArray argument holds, not made by
        this library: a scale on the host is checked here (it costs nothing), a power of two
        passed as it is and any other split in the program into a power of two and a factor
        multiplied into the data; a device scale is split, or under ``check_scales`` read
        (a wait for its value) and checked. A traced scale (the step called inside the
        caller's jax.jit, scan or fori_loop) is taken as a power of two: most are the step's
        own outputs carried from one iteration to the next, where a split would cost a
        multiply of every carried tensor per iteration; under ``check_scales`` it is split."""
        if isinstance(scale, _HOST_TYPES):
            value = check_scale(scale, f"args{self._in_specs[position].path}")
            return OWN if is_pow2(value) else SPLIT
        if isinstance(scale, jax.core.Tracer):
            return SPLIT if self.check_scales else OWN
        if self.check_scales:
            value = check_scale(np.asarray(scale), f"args{self._in_specs[position].path}")
            return OWN if is_pow2(value) else SPLIT
        return SPLIT

    def _run(self, flat: list[Any], banks: list[Any], layout: tuple[int, ...]) -> Any:
        """The jitted program: (data, scale) pairs in, the rewritten module, data and one
        vector of scales out (plain values if not ``return_scaled``)."""
        self._check_leaves(flat, layout)
        inputs: list[Any] = []
        for leaf, code, spec, dtype in zip(flat, layout, self._in_specs, self._data_dtypes,
                                           strict=True):
            if not spec.scaled:
                inputs.append(leaf if spec.key_impl is None else jax.random.key_data(leaf))
                continue
            if code == PLAIN:
                value = as_scaled(leaf, dtype, spec.encoding)
            elif code == OWN:
                value = as_scaled(ScaledArray(*leaf), dtype)
            elif code == SPLIT:
                value = split_pow2(*leaf, dtype)
            else:
                bank, index = divmod(code, BANK_STRIDE)
                value = ScaledArray(jnp.asarray(leaf).astype(dtype), banks[bank][index])
            inputs += [value.data, value.scale]
        raw = self.exported.call(*inputs)
        outputs: list[Any] = []
        scales: list[Any] = []
        position = 0
        for spec in self._out_specs:
            if not spec.scaled:
                outputs.append(raw[position] if spec.key_impl is None else
                               jax.random.wrap_key_data(raw[position], impl=spec.key_impl))
                position += 1
                continue
            data, scale = raw[position], raw[position + 1]
            position += 2
            if self.return_scaled:
                outputs.append(data)
                scales.append(scale)
            else:
                outputs.append(ScaledArray(data, scale, spec.encoding).unscale(spec.dtype))
        return outputs, (self._bank_vector(scales) if scales else None)

    def _bank_vector(self, scales: list[Any]) -> jax.Array:
        """The scales (and padding to the bank's length) as one vector, built so that XLA:CPU
        computes them in a few kernels: it fuses a concatenate of up to ``BANK_GROUP``
        distinct scalars into one kernel, but runs each operand of a longer one, or of one
        that takes a value twice, as a kernel of its own (and merges nested concatenates,
        hence the optimization barrier around each group)."""
        firsts = self._first_same_scale
        distinct = [i for i, first in enumerate(firsts) if first == i]
        position = {i: n for n, i in enumerate(distinct)}  # in the vector of distinct ones
        values = [jnp.asarray(scales[i], jnp.float32) for i in distinct]
        groups = [jnp.stack(values[i:i + BANK_GROUP]) for i in range(0, len(values), BANK_GROUP)]
        if len(groups) > 1:
            groups = list(jax.lax.optimization_barrier(tuple(groups)))
        vector = jnp.concatenate(groups)
        if len(distinct) < len(scales):  # repeat the shared ones: one gather
            vector = vector[np.array([position[first] for first in firsts], np.int32)]
        padding = self._bank_size - len(scales)
        return jnp.concatenate([vector, jnp.ones((padding,), jnp.float32)]) if padding else vector

    def _check(self, args: tuple[Any, ...]) -> None:
        """The structure of ``args`` against the compiled step's, with the path of the first
        difference (run only when a call's structure does not match)."""
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

    def _check_leaves(self, flat: list[Any], layout: tuple[int, ...]) -> None:
        """Shapes and dtypes against the compiled step's: run when ``jax.jit`` traces
        ``_run``, i.e. once per layout, shapes and dtypes (the check costs more than a small
        step's dispatch)."""
        for leaf, code, spec in zip(flat, layout, self._in_specs, strict=True):
            name = f"args{spec.path}"
            source = leaf[0] if code in (OWN, SPLIT) else leaf
            if spec.key_impl is not None or _is_key(source):
                _check_key(name, source, spec)
                continue
            if isinstance(source, (dict, list, tuple)) or not hasattr(source, "shape"):
                raise ScalifyError(f"{name}: a {type(source).__name__} where the step takes "
                                   "an array")
            shape = tuple(np.shape(source))
            if shape != spec.shape:
                raise ScalifyError(f"{name}: shape {shape} does not match the compiled step's "
                                   f"{spec.shape}")
            dtype = np.dtype(source.dtype)
            if code != PLAIN:
                if not spec.scaled:
                    raise ScalifyError(f"{name}: a ScaledArray where the step takes "
                                       f"{spec.dtype}")
                if code in (OWN, SPLIT):
                    _check_scale_type(name, leaf[1])
            elif spec.scaled != _is_scaled_dtype(dtype) or (not spec.scaled and
                                                             dtype != spec.dtype):
                raise ScalifyError(f"{name}: dtype {dtype} does not match the compiled step's "
                                   f"{spec.dtype}")

    def scale_args(self, *args: Any) -> tuple[Any, ...]:
        """``args`` as the compiled step takes them: every floating leaf a ``ScaledArray`` in
        the data type of its argument (f16, or f32 where the rewrite keeps squares wide, such
        as Adam's second moment), their scales in one bank laid out like the step's outputs
        (an argument at the index of the output with its path and shape). Start training
        state this way and a loop that feeds the step's outputs back runs one compiled
        program from the first call on."""
        self._flatten(args)  # the structure, with the path of a difference
        given = self._in_tree.flatten_up_to(args)
        leaves = [_as_jax_value(leaf) for leaf in given]
        flat, _, layout = self._flatten(tuple(self._in_tree.unflatten(leaves)))
        self._check_leaves(flat, layout)
        # A host value becomes an array of the step's dtype, not weakly typed: the dtype
        # the step returns it in, so that feeding outputs back runs the same program.
        converted = [_scaled_arg(leaf, dtype, f"args{spec.path}", spec.encoding)
                     if spec.scaled else
                     jnp.asarray(leaf, spec.dtype) if _is_host_value(value) else leaf
                     for value, leaf, spec, dtype in zip(given, leaves, self._in_specs,
                                                         self._data_dtypes, strict=True)]
        converted = [ScaledArray(_committed(v.data), _committed(v.scale), v.encoding)
                     if isinstance(v, ScaledArray) else _committed(v) for v in converted]
        if all(slot is None for slot in self._arg_slots):
            return tuple(jax.tree.unflatten(self._in_tree, converted))
        scales = [jnp.float32(1.0)] * self._bank_size
        for value, slot in zip(converted, self._arg_slots, strict=True):
            if slot is not None:
                scales[slot] = jnp.asarray(value.scale, jnp.float32)
        bank = ScaleBank(_committed(jnp.stack(scales)))
        leaves = [value if slot is None else _banked(value.data, bank, slot, value.encoding)
                  for value, slot in zip(converted, self._arg_slots, strict=True)]
        return tuple(jax.tree.unflatten(self._in_tree, leaves))

    # ----- inspection ---------------------------------------------------------------------
    def report(self) -> Report:
        return self._report

    @property
    def stages(self) -> dict[str, str]:
        """The module's text before any pass (``exported``) and after each pass, by pass.

        Printed on first use, by running the (deterministic) pipeline again on the exported
        module: printing the module after every pass while compiling cost as much as the
        rewrite itself (0.47 s -> 0.87 s on the sample transformer step), for text that
        only ``stage()``, ``save()`` and debugging read."""
        if self._stages is None:
            stages = {"exported": self._exported_text}

            def keep(name: str, text: str) -> None:
                stages[name] = text

            result = rewrite_module_source(self._exported_text, self.pipeline,
                                           debug_info=True, dump_after_pass=keep)
            if result.error is not None:
                raise ScalifyError(f"cannot rewrite the step again: {result.error}")
            self._stages = stages
        return self._stages

    @stages.setter
    def stages(self, stages: dict[str, str]) -> None:
        self._stages = dict(stages)
        self._exported_text = self._stages.get("exported", "")

    def stage(self, name: str) -> str:
        """The module after pass ``name`` (``exported`` is the module before any pass); a
        pass's options may be left out (``scalify`` for ``scalify{data-dtype=f32}``)."""
        if name in self.stages:
            return self.stages[name]
        for key in reversed(self.stages):
            if key.split("{", 1)[0] == name:
                return self.stages[key]
        raise KeyError(f"no stage '{name}'; stages: {', '.join(self.stages)}")

    # ----- saving -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the step to ``path`` (atomically): its exported program, calling
        convention, report and stages; ``scalify_hlo.load_scaled(path)`` rebuilds it without
        exporting or rewriting (see ``scalify_hlo/saved.py``)."""
        from scalify_hlo.saved import save_step

        save_step(self, path)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> ScaledStep:
        """``scalify_hlo.load_scaled``."""
        from scalify_hlo.saved import load_scaled

        return load_scaled(path)


# Host values that jax.jit takes where the step takes an array, converting them itself.
_HOST_TYPES = (bool, int, float, complex, np.generic, np.ndarray)


def _is_host_value(value: Any) -> bool:
    return isinstance(value, _HOST_TYPES)


def _as_jax_value(leaf: Any) -> Any:
    """A Python or numpy scalar or array (Flax's ``TrainState.create`` sets ``step=0``), also
    as a ScaledArray's data, as ``jax.jit`` takes it: ``jnp.asarray``, whose dtype is the
    one the step was compiled for from such a value (int32, float32 without x64)."""
    if isinstance(leaf, ScaledArray):
        return ScaledArray(_as_jax_value(leaf.data), leaf.scale) if _is_host_value(
            leaf.data) else leaf
    return jnp.asarray(leaf) if _is_host_value(leaf) else leaf


def _scaled_arg(leaf: Any, dtype: Any, name: str, encoding: str = "") -> ScaledArray:
    """``leaf`` as ``scale_args`` hands it out: data of ``dtype`` and a power-of-two scale,
    in the argument's ``encoding``. A ScaledArray's scale is read and checked (once:
    scale_args starts a loop), and one that is not a power of two is split (``split_pow2``,
    as a call would split it)."""
    if isinstance(leaf, ScaledArray) and not is_known_pow2(scale := leaf.scale):
        if isinstance(scale, jax.core.Tracer):  # scale_args inside jax.jit
            _check_scale_type(name, scale)
            leaf = _with_encoding(split_pow2(leaf.data, scale, dtype), leaf.encoding)
        else:
            value = check_scale(np.asarray(scale), name)
            if not is_pow2(value):
                leaf = _with_encoding(split_pow2(leaf.data, value, dtype), leaf.encoding)
    return as_scaled(leaf, dtype, encoding)


def _with_encoding(value: ScaledArray, encoding: str) -> ScaledArray:
    return ScaledArray(value.data, value.scale, encoding)


def _with_encodings(specs: list[LeafSpec], sqrt_indices: tuple[int, ...]) -> list[LeafSpec]:
    """``specs`` with the encoding of each one whose data (at its flat position in the
    scaled signature) is listed in ``sqrt_indices``."""
    encoded = set(sqrt_indices)
    marked: list[LeafSpec] = []
    position = 0
    for spec in specs:
        marked.append(dataclasses.replace(spec, encoding="sqrt") if position in encoded
                      else spec)
        position += 2 if spec.scaled else 1
    return marked


def _check_scale_type(name: str, scale: Any) -> None:
    """A ScaledArray argument's scale is a real scalar (checked when the step is traced)."""
    error = scale_type_error(tuple(np.shape(scale)), getattr(scale, "dtype", np.float32))
    if error is not None:
        raise ScalifyError(f"{name}: {error}")


def _check_key(name: str, value: Any, spec: LeafSpec) -> None:
    """A PRNG key argument against the compiled step's: a key array of the same
    implementation and shape where the step took one, and nowhere else."""
    if spec.key_impl is None:
        raise ScalifyError(f"{name}: a PRNG key array where the step takes {spec.dtype}")
    if not _is_key(value):
        raise ScalifyError(f"{name}: the step takes a PRNG key array ({spec.key_impl}), got "
                           f"{getattr(value, 'dtype', type(value).__name__)}")
    impl, shape = str(jax.random.key_impl(value)), tuple(np.shape(value))
    if impl != spec.key_impl or shape != spec.shape:
        raise ScalifyError(f"{name}: a {impl} key array of shape {shape} where the step takes "
                           f"{spec.key_impl} keys of shape {spec.shape}")


def _committed(value: Any) -> Any:
    """``value`` committed to the device it is on. A step's outputs are committed arrays, and
    ``jax.jit`` compiles again when an argument's commitment changes: ``scale_args`` hands
    out committed arrays so that the first call and a loop feeding outputs back run one
    program (it compiled twice)."""
    if isinstance(value, jax.Array) and not value.committed:
        return jax.device_put(value, value.sharding)
    return value


def _first_same_scale(module: ir.Module, out_specs: list[LeafSpec]) -> list[int]:
    """Per scaled output of the rewritten module, the index (among scaled outputs) of the
    first one that returns the same SSA value as its scale."""
    firsts: list[int] = []
    block = entry_function(module).regions[0].blocks[0]
    returned = list(block.operations[len(block.operations) - 1].operands)
    first_of: dict[ir.Value, int] = {}  # values hash and compare by identity
    position = 0
    for spec in out_specs:
        if spec.scaled:
            firsts.append(first_of.setdefault(returned[position + 1], len(firsts)))
        position += 2 if spec.scaled else 1
    return firsts


def _bank_number(banks: list[Any], bank: Any) -> int:
    """``bank``'s position in ``banks`` (by identity), appended if new."""
    for number, known in enumerate(banks):
        if known is bank:
            return number
    banks.append(bank)
    return len(banks) - 1


def _arg_slots(in_specs: list[LeafSpec], out_specs: list[LeafSpec],
               out_tree: Any) -> list[int | None]:
    """Per argument, the index of its scale in a bank made by ``scale_args`` (None where it
    has no scale): the index of the output at the same path with the same shape, if any, so
    that a step's state sits where the step's outputs put it; else after all outputs."""
    out_paths = [jax.tree_util.keystr(path) for path, _ in
                 jax.tree_util.tree_flatten_with_path(
                     jax.tree.unflatten(out_tree, range(len(out_specs))))[0]]
    out_index: dict[tuple[str, tuple[int, ...]], int] = {}
    position = 0
    for path, spec in zip(out_paths, out_specs, strict=True):
        if spec.scaled:
            out_index[(path, spec.shape)] = position
            position += 1
    slots: list[int | None] = []
    taken: set[int] = set()
    for spec in in_specs:
        slot = out_index.get((spec.path, spec.shape)) if spec.scaled else None
        if spec.scaled and (slot is None or slot in taken):
            slot = position
            position += 1
        if slot is not None:
            taken.add(slot)
        slots.append(slot)
    return slots


def _data_dtypes(avals: tuple[Any, ...], specs: list[LeafSpec]) -> list[Any]:
    dtypes: list[Any] = []
    position = 0
    for spec in specs:
        dtypes.append(avals[position].dtype if spec.scaled else None)
        position += 2 if spec.scaled else 1
    return dtypes


def _flat_tree(count: int) -> Any:
    return jax.tree.structure((tuple(range(count)), {}))


def _scaled_exported(original: jax_export.Exported, text: str, signature: EntrySignature,
                     in_specs: list[LeafSpec], out_specs: list[LeafSpec]) -> jax_export.Exported:
    """An ``Exported`` for the rewritten module (``text``, whose entry signature is
    ``signature``): flat (data, scale) avals and shardings."""
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
                   pipeline: str | None = None, return_scaled: bool = True,
                   check_scales: bool = False, target: str | None = None) -> ScaledStep:
    """Export ``fn`` at ``args``, rewrite it with ``policy`` (or an explicit ``pipeline``; or
    ``Policy.for_target(target)``; without any of them, the policy of jax's default backend
    and device: f16 data and FP8 dots on CPU and FP8 GPUs, bf16 data on TPUs) and
    return a step that takes the same pytrees (floating leaves as arrays or ``ScaledArray``s)
    and returns ``ScaledArray``s for floating outputs (plain arrays if not ``return_scaled``).

    A ScaledArray argument's scale may be any finite positive number (docs/scaled-signature.md);
    a bad one (0, negative, inf, NaN) is refused with its path when it is on the host, and
    when it is on the device with ``check_scales`` (which waits for its value on every call).
    Inside the caller's ``jax.jit`` a traced scale is taken as a power of two unless
    ``check_scales`` (then it is split, a multiply of its data per call).
    """
    if target is not None and (policy is not None or pipeline is not None):
        raise ScalifyError("compile_scaled takes a target or a policy/pipeline, not both "
                           "(Policy.for_target(target, ...) combines them)")
    chosen = pipeline if pipeline is not None else (
        policy or Policy.for_target(target)).pipeline()
    return ScaledStep(fn, args, chosen, return_scaled, check_scales)
