"""The walk: rewrite a block op by op through the rule table, in each op's data type, and
record how each op's results are scaled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter, dtype_name, element_type
from scalify_hlo.rewrites.gradient_join import GRADIENT_ATTR
from scalify_hlo.rewrites.narrow_rounding import only_widened, rounded_as
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.scalify_state import RESCALE_ATTR, Scaled
from scalify_hlo.rewrites.sliced_stacks import SlicedStack, read_slice, write_slice, written_dim
from scalify_hlo.scale import ONE, Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scalify_state import ScalifyState
    from scalify_hlo.rewrites.scope import Scope


_STACK_OPS = ("stablehlo.dynamic_update_slice", "stablehlo.dynamic_slice")
_ROUNDING_OPS = ops_with(Trait.ROUNDS)


class Walker:
    """Rewrites ops through the rule table (a mixin of ``Scope``)."""

    state: ScalifyState
    emit: Emitter
    parent: Scope | None

    def rewrite_block(self, old_block: ir.Block) -> ir.Operation | None:
        """Rewrite every op of ``old_block``; returns its terminator (not rewritten)."""
        for op in old_block.operations:
            op = op.operation
            if op.name in ("func.return", "stablehlo.return"):
                return op
            self.rewrite_op(op)
        return None

    def rewrite_op(self, op: ir.Operation) -> None:
        state = self.state
        saved = state.current_dtype
        results = list(op.results)  # read once: each access makes new binding objects
        wide = state.widest_own_dtype is not None
        state.current_dtype = state.op_dtype(op)
        try:
            self._rewrite_op(op, results)
            if wide and op not in state.tail:  # tail values stay in their original types
                self._retype_results(op, results)
        finally:
            state.current_dtype = saved

    def _retype_results(self, op: ir.Operation, results: Sequence[ir.Value]) -> None:
        """Results go on in their own data type (a narrow sqrt of a wide square). Narrowing
        rescales first (amax): the wide value's static scale says nothing about where its
        data sits in f16's range (sqrt of a zero-initialized second moment at scale 1)."""
        state = self.state
        for result in results:
            found = self.values.get(result)
            if isinstance(found, Scaled):
                target = state.dtype_of(result)
                if found.data_element() != target:
                    if target != self.state.data_dtype:
                        self.set(result, Scaled(self.emit.convert(found.data, target),
                                                found.scale, found.any_scale))
                        continue
                    bound = state.normalized.get(op)
                    if bound is not None and bound < 2.0 ** self.max_exponent(target):
                        self.set(result, self._narrowed_normalized(found, target))
                        continue
                    if not found.any_scale:
                        state.context.record(
                            op.name, op.location, "rescale",
                            f"amax:nearest, {dtype_name(found.data_element())} to "
                            f"{dtype_name(target)} (square-dtype)")
                    self.set(result, self.narrowed(found, target, delayable=True))

    def _narrowed_normalized(self, found: Scaled, target: ir.Type) -> Scaled:
        """A norm's output (``normalized_values``) in ``target`` at scale 1: its magnitude
        is bounded and its RMS over a row at most 1, so it needs no statistic."""
        return Scaled(self.emit.convert(self.apply_exactly(found.data, found.scale), target),
                      ONE, found.any_scale)

    def results_of(self, op: ir.Operation) -> tuple[list[ir.Value], list[ir.Type]]:
        """``op``'s results and their types; for the op being rewritten, as ``_rewrite_op``
        read them (each read makes new binding objects, and rules ask more than once)."""
        if op is self._op:
            return self._results, self._result_types
        results = list(op.results)
        return results, [r.type for r in results]

    def _rewrite_op(self, op: ir.Operation, results: list[ir.Value]) -> None:
        self.emit = self.emit.at(op.location)
        touches_floats = False
        types = [result.type for result in results]
        is_scalable = self.state.types.is_scalable
        for t in types:
            if type(t) is ir.RankedTensorType and not t.has_static_shape:
                self.check_static(t)  # raises
            touches_floats = touches_floats or is_scalable(t)
        self._op, self._results, self._result_types = op, results, types
        if not touches_floats:
            touches_floats = any(isinstance(self._raw(v), (Scaled, SlicedStack))
                                 for v in op.operands)
        if not touches_floats:  # integers, booleans, tokens, complex, f64: cloned as they are
            self.state.clone(self, op)
            return
        if op in self.state.tail:
            self.in_original(op)
            return
        if op.name in _STACK_OPS and self._on_stack(op):
            return
        rule = self.state.rules.get(op.name)
        if rule is None:
            rule = self.state.fallback
        rule(self, op)
        if self.state.rounds_as_original and (op.name in _ROUNDING_OPS
                                              or rule is self.state.fallback):
            self._round_as_original(results)
        if op in self.state.gradients:
            self._mark_gradient(op)
        if RESCALE_ATTR in op.attributes:
            self.rescale_results(op, ir.StringAttr(op.attributes[RESCALE_ATTR]).value)
        if self.state.context.records is not None:
            self._record(op, results)

    def _round_as_original(self, results: Sequence[ir.Value]) -> None:
        """Results whose own type has fewer significand bits than their data (a bf16 sum in
        f32 data) rounded to it, as the original rounds them (``narrow_rounding``), except
        results only widened to f32. Regions round inside (``emit_like``); a narrowing
        convert rounds in its rule."""
        if all(only_widened(result) for result in results):
            return
        for result in results:
            found = self.values.get(result)
            if isinstance(found, Scaled):
                rounded = rounded_as(self.emit, found.data, element_type(result))
                self.set(result, Scaled(rounded, found.scale, found.any_scale))

    def _mark_gradient(self, op: ir.Operation) -> None:
        """Mark the op that makes a replicated gradient's data, before any rescale reads it,
        for join-gradients (gradient_join.py)."""
        for result in op.results:
            found = self.values.get(result)
            if isinstance(found, Scaled) and not isinstance(found.data.owner, ir.Block):
                found.data.owner.attributes[GRADIENT_ATTR] = ir.UnitAttr.get()
                self.state.context.bump("scalify.gradients-marked")

    def _on_stack(self, op: ir.Operation) -> bool:
        """A slice written into or read from a sliced stack (``sliced_stacks``), if ``op``
        is one."""
        stack = self.stack_of(op.operands[0])
        if stack is None:
            return False
        if op.name == "stablehlo.dynamic_update_slice":
            if written_dim(op) != stack.dim:
                return False
            write_slice(self, op, stack)
            return True
        return read_slice(self, op, stack)

    def in_original(self, op: ir.Operation) -> None:
        """A tail op (``update_tail``): cloned on its operands in their original types, its
        float results kept so (in f32, at scale 1) until the return encodes them."""
        self.state.current_dtype = None  # operands as they are (tail values are f32)
        operands = [self.in_original_type(old) for old in op.operands]  # before the clone
        clone = op.clone(ip=self.emit.ip)
        for index, operand in enumerate(operands):
            clone.operands[index] = operand
        for old, new in zip(op.results, clone.results, strict=True):
            self.set(old, Scaled(new, ONE) if self.state.types.is_scalable(old.type) else new)
        if self.state.context.records is not None:
            self.state.context.record(op.name, op.location, "update",
                                      "in the original type, unscaled (update tail)")

    def _record(self, op: ir.Operation, results: Sequence[ir.Value]) -> None:
        """Record how ``op``'s float results are scaled (static or runtime), and whether it
        computes in the wide type; a fallback op was recorded as one when reported."""
        state = self.state
        if state.fallback_op is op:
            return
        found = [self.values.get(result) for result in results]
        scaled = [value for value in found if isinstance(value, Scaled)]
        if not scaled:  # compare, float -> int convert: no float result to scale
            return
        context, location = state.context, op.location
        if state.current_dtype is not None and state.current_dtype != state.data_dtype:
            reason = state.own_dtype_reasons.get(op, "square-dtype")
            context.record(op.name, location, "wide",
                           f"{dtype_name(state.current_dtype)} data ({reason})")
        dynamic = [value.scale for value in scaled if not value.scale.is_static]
        if dynamic:
            context.record(op.name, location, "runtime", describe_runtime(dynamic[0]))
        elif all(value.any_scale for value in scaled):
            context.record(op.name, location, "static", "any (0/inf/NaN)")
        else:
            exponents = sorted({value.scale.exp for value in scaled if not value.any_scale})
            context.record(op.name, location, "static",
                           ", ".join(f"2^{exp}" for exp in exponents))


def describe_runtime(scale: Scale) -> str:
    """A runtime scale for a reader: its static part and how many runtime factors."""
    count = len(scale.factors)
    factors = f"{count} runtime factor{'s' if count != 1 else ''}"
    return f"2^{scale.exp} x {factors}" if scale.exp else factors
