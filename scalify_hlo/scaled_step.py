"""``ScaledStep``: the compiled scaled step, called with the original function's pytrees.

It converts arrays and ``ScaledArray``s to the flat scaled calling convention (scales in one
bank vector per call) and back, and keeps the report and the per-pass stages.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export
from jax.extend.mlir import ir

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.delayed_program import delayed_program
from scalify_hlo.errors import ScalifyError
from scalify_hlo.flat_pairs import flat_size
from scalify_hlo.leaf_specs import (
    LeafSpec,
    arg_bank_slots,
    example_of,
    first_same_scale,
    is_key,
    leaf_data_dtypes,
    spec_positions,
    specs_of_tree,
    with_encodings,
)
from scalify_hlo.rewrites.delayed_statistics import delayed_count
from scalify_hlo.rewrites.registry import ModulePass, print_pipeline
from scalify_hlo.scaled_array import (
    ScaleBank,
    ScaledArray,
    as_scaled,
    check_scale,
    is_known_pow2,
    is_pow2,
    is_scaled_leaf,
    split_pow2,
)
from scalify_hlo.scaled_array import banked as _banked
from scalify_hlo.scaled_exported import export_step, scaled_exported
from scalify_hlo.signature import EntrySignature, signature_of
from scalify_hlo.step_args import (
    BANK_STRIDE,
    HOST_TYPES,
    OWN,
    PLAIN,
    SPLIT,
    as_jax_value,
    bank_number,
    check_leaves,
    committed_value,
    is_host_value,
    scaled_arg,
)
from scalify_hlo.step_report import Report

# Scales per kernel when a step builds its bank (ScaledStep._bank_vector).
BANK_GROUP = 8


class ScaledStep:
    """A compiled scaled step; call it with the same pytrees as the original function."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 pipeline: str | Sequence[ModulePass], return_scaled: bool = True,
                 check_scales: bool = False) -> None:
        # The passes as given (a Policy's pass objects run as they are, not printed and parsed
        # back), and their text for reports, saved steps and messages.
        self._passes = pipeline
        self.pipeline = pipeline if isinstance(pipeline, str) else print_pipeline(pipeline)
        self.return_scaled = return_scaled
        # Read every scale a call gets on the device and refuse bad ones (one wait per call),
        # and split traced ones (see _own_scale).
        self.check_scales = check_scales
        self._in_specs, self._in_tree = specs_of_tree(args)
        leaves = jax.tree.leaves(args, is_leaf=is_scaled_leaf)

        def flat_fn(*flat: Any) -> list[Any]:
            flat = [x if spec.key_impl is None else jax.random.wrap_key_data(
                x, impl=spec.key_impl) for x, spec in zip(flat, self._in_specs, strict=True)]
            outputs = fn(*jax.tree.unflatten(self._in_tree, flat))
            out_leaves, self._out_tree = jax.tree.flatten(outputs)
            self._out_key_impls = [str(jax.random.key_impl(x)) if is_key(x) else None
                                   for x in out_leaves]
            return [x if impl is None else jax.random.key_data(x)
                    for x, impl in zip(out_leaves, self._out_key_impls, strict=True)]

        examples = [example_of(leaf, spec) for leaf, spec in zip(leaves, self._in_specs,
                                                                strict=True)]
        # keep_unused: the scaled signature has a (data, scale) pair for every leaf.
        jitted = jax.jit(flat_fn, keep_unused=True)
        original = export_step(jitted, examples)
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
        # Rescale points whose statistics are delayed (rewrites/delayed_statistics.py): the
        # rewrite returns the exponents it measured, and a second program applies the ones a
        # call before measured; both travel in the bank, after the scales.
        self._delayed = 0

        expected = flat_size(spec.scaled for spec in self._in_specs)

        def inspect(module: ir.Module) -> None:
            signature.append(signature_of(module))
            self._delayed = delayed_count(module)
            if len(signature[0].inputs) == expected:  # else refused below
                self._first_same_scale = first_same_scale(module, self._out_specs)

        try:
            result = rewrite_module_source(self._exported_text, self._passes, debug_info=True,
                                           inspect=inspect, records=True, count_ops=True)
        except ScalifyError:
            raise
        except Exception as exc:  # a bug of ours: a ScalifyError that says so, as the CLI does
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise ScalifyError(f"cannot rewrite the step: internal error "
                               f"({type(exc).__name__}): {message}") from exc
        if result.error is not None or result.output is None:
            raise ScalifyError(f"cannot rewrite the step: {result.error}")
        self.text = result.output.decode()
        if len(signature[0].inputs) != expected:
            raise ScalifyError(
                f"the pipeline '{self.pipeline}' does not give the scaled calling convention (a "
                f"(data, scale) pair per floating argument: {expected} arguments, got "
                f"{len(signature[0].inputs)}); compile_scaled needs one with scalify")
        self._in_specs = with_encodings(self._in_specs, signature[0].sqrt_inputs)
        self._out_specs = with_encodings(self._out_specs, signature[0].sqrt_results)
        self._report = Report(result.ops_before, result.ops_after, dict(result.context.stats),
                              list(result.context.warnings),
                              list(result.context.records or []), self.pipeline)
        self.exported = scaled_exported(original, self.text, signature[0], self._in_specs,
                                         self._out_specs, delayed_result=self._delayed > 0)
        self._delayed_exported: jax_export.Exported | None = None
        self.delayed_text = ""  # the second program's module (delayed statistics only)
        if self._delayed:
            self.delayed_text, self._delayed_exported = delayed_program(
                self._exported_text, self._passes, self._delayed, original, self._in_specs,
                self._out_specs)
        self._set_calling_convention()

    def _set_calling_convention(self, arg_slots: list[int | None] | None = None,
                                bank_size: int | None = None) -> None:
        """What a call needs beyond the exported module, from ``exported``, the leaf specs
        and trees and ``_first_same_scale``: run by ``__init__`` and by ``load_scaled``
        (which passes the bank layout it saved)."""
        self._data_dtypes = leaf_data_dtypes(self.exported.in_avals, self._in_specs)
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
        self._arg_slots = (arg_bank_slots(self._in_specs, self._out_specs, self._out_tree)
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
        bank.delayed = self._delayed > 0
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
        delayed_in = -1  # the bank that holds a call's measured exponents, if any
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
            number = 0 if banks and banks[0] is bank else bank_number(banks, bank)
            flat[position] = leaf.data
            layout[position] = number * BANK_STRIDE + leaf._index
            if delayed_in < 0 and bank.delayed:
                delayed_in = number
        if self._delayed:  # which program runs: the one that applies them, given them
            layout.append(delayed_in)
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
        if isinstance(scale, HOST_TYPES):
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
        delayed_in = layout[-1] if self._delayed else -1
        layout = layout[:len(flat)]
        check_leaves(flat, layout, self._in_specs)
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
                value = as_scaled(ScaledArray(jnp.asarray(leaf), banks[bank][index]), dtype)
            inputs += [value.data, value.scale]
        measured = None
        if delayed_in >= 0:
            given = banks[delayed_in][self._bank_size:self._bank_size + self._delayed]
            raw = self._delayed_exported.call(*inputs, given.astype(jnp.int32))
        else:
            raw = self.exported.call(*inputs)
        if self._delayed:
            raw, measured = raw[:-1], raw[-1]
        outputs: list[Any] = []
        scales: list[Any] = []
        for spec, position in zip(self._out_specs, spec_positions(self._out_specs),
                                  strict=True):
            if not spec.scaled:
                outputs.append(raw[position] if spec.key_impl is None else
                               jax.random.wrap_key_data(raw[position], impl=spec.key_impl))
                continue
            data, scale = raw[position], raw[position + 1]
            if self.return_scaled:
                outputs.append(data)
                scales.append(scale)
            else:
                outputs.append(ScaledArray(data, scale, spec.encoding).unscale(spec.dtype))
        return outputs, (self._bank_vector(scales, measured) if scales else None)

    def _bank_vector(self, scales: list[Any], measured: Any = None) -> jax.Array:
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
        parts = [vector] + ([jnp.ones((padding,), jnp.float32)] if padding else [])
        if measured is not None:  # the delayed exponents, after the scales (exact in f32)
            parts.append(measured.astype(jnp.float32))
        return jnp.concatenate(parts) if len(parts) > 1 else vector

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

    def scale_args(self, *args: Any) -> tuple[Any, ...]:
        """``args`` as the compiled step takes them: every floating leaf a ``ScaledArray`` in
        the data type of its argument (f16, or f32 where the rewrite keeps squares wide, such
        as Adam's second moment), their scales in one bank laid out like the step's outputs
        (an argument at the index of the output with its path and shape). Start training
        state this way and a loop that feeds the step's outputs back runs one compiled
        program from the first call on."""
        self._flatten(args)  # the structure, with the path of a difference
        given = self._in_tree.flatten_up_to(args)
        leaves = [as_jax_value(leaf) for leaf in given]
        flat, _, layout = self._flatten(tuple(self._in_tree.unflatten(leaves)))
        check_leaves(flat, layout, self._in_specs)
        # A host value becomes an array of the step's dtype, not weakly typed: the dtype
        # the step returns it in, so that feeding outputs back runs the same program.
        converted = [scaled_arg(leaf, dtype, f"args{spec.path}", spec.encoding)
                     if spec.scaled else
                     jnp.asarray(leaf, spec.dtype) if is_host_value(value) else leaf
                     for value, leaf, spec, dtype in zip(given, leaves, self._in_specs,
                                                         self._data_dtypes, strict=True)]
        converted = [ScaledArray(committed_value(v.data), committed_value(v.scale), v.encoding)
                     if isinstance(v, ScaledArray) else committed_value(v) for v in converted]
        if all(slot is None for slot in self._arg_slots):
            return tuple(jax.tree.unflatten(self._in_tree, converted))
        scales = [jnp.float32(1.0)] * self._bank_size
        for value, slot in zip(converted, self._arg_slots, strict=True):
            if slot is not None:
                scales[slot] = jnp.asarray(value.scale, jnp.float32)
        bank = ScaleBank(committed_value(jnp.stack(scales)))
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

            result = rewrite_module_source(self._exported_text, self._passes,
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
