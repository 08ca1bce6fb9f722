"""The common-scale policy: the scale that operands of a same-scale op are brought to (max,
first or midpoint, constants following runtime scales), and the rescales to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter, dtype_name
from scalify_hlo.rewrites.scalify_state import Scaled
from scalify_hlo.scale import LARGEST_FINITE, ONE, UNSET_BELOW, Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scalify_state import ScalifyState
    from scalify_hlo.rewrites.scope import Scope

# Data types with f32's exponent range, where data may sit far from unit scale.
_WIDE_RANGE_CLASSES = (ir.F32Type, ir.BF16Type)
# How many binades a midpoint moves the largest-scale operand's data up at most (see midpoint):
# f32 then holds its data up to 2^27.
MIDPOINT_REACH = 100
# A sentinel that saturates (a mask's -1e9 beside scores far below it) stays at least 2^7 in
# magnitude: exp(-128) is 0 in f32, so a masked score stays out of a softmax whatever the
# scores' scale. Saturated at the scores' scale 2^-38 it was -2^-22, exp of which is 1.
SENTINEL_EXP = 7
# A static scale this far from 1 (1e30 is 2^100) beside a runtime one can put their ratio
# past f32's normal range at runtime scales that data reaches (2^-27 against 1e30).
FAR_EXP = 64


def sentinel_floor(level: float) -> int:
    """The lowest exponent at which a sentinel saturated to ``level`` times the scale is
    still ``2^SENTINEL_EXP`` or more (data below it is 2^-22 or less in f16: rounding
    beside a softmax's 1)."""
    return SENTINEL_EXP - math.floor(math.log2(level))


class CommonScale:
    """Chooses common scales and rescales data to them (a mixin of ``Scope``)."""

    state: ScalifyState
    emit: Emitter
    parent: Scope | None

    def rescale_data(self, value: Scaled, target: Scale, far: bool = False) -> ir.Value:
        """``value``'s data re-expressed at scale ``target`` (an exact power-of-two factor).

        ``far``: the runtime ratio may pass f32's normal range (data beside a constant such
        as 1e30 or finfo.max), so it is applied as two normal factors (``factor``'s high and
        low): the one flushing factor of an exponent below -126 is 0, and an inf in the data
        times 0 was NaN (``x + 1e30`` of x at 2^-40 holding an inf); one above 127 was
        clamped there."""
        if value.any_scale:
            return value.data
        ratio = value.scale.over(target)
        if ratio.is_static:
            return self.emit.scale_tensor_static(value.data, ratio.exp)
        if far:
            once = self.emit.times_factor(value.data, self.factor(ratio, "high"))
            return self.emit.times_factor(once, self.factor(ratio, "low"))
        return self.emit.times_factor(value.data, self.factor(ratio))

    @staticmethod
    def beside_far_constant(values: Sequence[Scaled]) -> bool:
        """Whether a runtime scale meets a static one at least 2^FAR_EXP from 1 (1e30, a
        sentinel): there a runtime ratio can pass f32's normal range (``rescale_data``)."""
        return any(not v.any_scale and v.scale.is_static and abs(v.scale.exp) >= FAR_EXP
                   for v in values) and any(not v.any_scale and not v.scale.is_static
                                            for v in values)

    def common_scale(self, values: Sequence[Scaled], constants_follow: bool = False,
                     merge: bool = False, above_constants: bool = False) -> Scale:
        """The scale that operands of a same-scale op are brought to.

        Statically the largest when the runtime factors agree; otherwise, by the pass option,
        the runtime maximum (no data grows, so none overflows: the default) or the first
        operand's scale (one rescale instead of two, but data 2^200 times its scale apart
        overflows). Ops that ``merge`` pieces of their operands without arithmetic between
        them (select, concatenate, max) take the midpoint of the exponents instead of the
        max when the data has f32's range: both operands stay representable up to a spread
        of 2^250 (2^-100 next to 2^100), where the max would flush the smaller one to 0.
        With ``constants_follow``, static (constant-derived) scales adopt the runtime ones,
        down to the lowest scale at which the constant's data stays in the data type's range
        (``constant_floor``). With ``above_constants`` (an add of a program constant), the
        ``first`` choice is raised to the constants' scales (``_first_above_constants``).
        """
        scaled = [v for v in values if not v.any_scale]
        if constants_follow and any(not v.scale.is_static for v in scaled):
            floor = self.constant_floor([v for v in scaled if v.scale.is_static])
            scaled = [v for v in scaled if not v.scale.is_static]
            return self.at_least(self.common_scale(scaled, merge=merge), floor)
        if not scaled:
            return ONE
        first = scaled[0].scale
        if all(v.scale.same_factors(first) for v in scaled):
            exps = [v.scale.exp for v in scaled]
            if merge and self.data_has_wide_range() and self.is_wide_range() and (
                    max(exps) - min(exps) > self.reach_below_largest()):
                # pieces put side by side move half as far: tanh's values beside
                # finfo(f32).max went 2^127 down, subnormal, and XLA flushed them to 0
                return self.midpoint(scaled)
            return Scale(max(exps), first.factors)
        if self.state.common_scale_rule == "first":
            if above_constants:
                return self._first_above_constants(scaled)
            if merge:
                return self._first_below_constants(scaled)
            return _first_choice(scaled)
        distinct: list[Scale] = []
        for value in scaled:
            if value.scale not in distinct:
                distinct.append(value.scale)
        if merge and self.is_wide_range():
            common = self._runtime_midpoint(distinct)
        else:  # an unset exponent is below every other: the maximum ignores it
            common = Scale.dynamic(_fold(self.emit, "stablehlo.maximum",
                                         [self.exponent(scale) for scale in distinct]))
            self.state.maxima[common] = tuple(distinct)
        if all(self.state.maybe_unset(scale) for scale in distinct):
            self.state.unset_factors.add(common.factors[0][0])
        return common

    def _first_above_constants(self, values: Sequence[Scaled]) -> Scale:
        """The ``common-scale=first`` choice among the runtime operands, raised at run time to
        the largest constant operand's scale where it is below it.

        A constant taken to a runtime scale 2^127 below its own passes f32's range: the
        ``var + 1e-6`` of a layer norm over values near 1e-24 (var 1e-48, at scale 2^-160)
        made 1e-6 2^140 times that scale, clamped to 2^127, and the norm was 0 where the
        original gives x * 1000 (f32 and bf16 data; f16's max rule already took the
        maximum). The runtime operand's data only shrinks by the maximum, exactly (a power
        of two), and where it does, it is below the constant's f32 rounding."""
        runtime = [v for v in values if not v.scale.is_static]
        constants = [v.scale.exp for v in values if v.scale.is_static]
        if not runtime or not constants:
            return _first_choice(values)
        choice = _first_choice(runtime)
        common = Scale.dynamic(self.emit.binary(
            "stablehlo.maximum", self.exponent(choice), self.emit.int_scalar(max(constants)),
            self.exponent_type()))
        self.state.maxima[common] = (choice, Scale(max(constants)))
        return common

    def _first_below_constants(self, values: Sequence[Scaled]) -> Scale:
        """The ``common-scale=first`` choice of a merging op (concatenate, pad, select),
        raised at run time to where its large constant operands' data stays in range
        (``constant_floor``): ``pad(x, constant_values=3e38)`` of x near 1 put 3e38 at x's
        scale, 2^129 below its own, and the factor's clamp to 2^127 made it 7.5e37. Only
        constants above 1 get a floor: a smaller one's floor is below every normal scale."""
        choice = _first_choice(values)
        floor = self.constant_floor([v for v in values if v.scale.is_static])
        if floor is None or floor <= self.min_normal_exponent():
            return choice
        return self.at_least(choice, floor)

    def _runtime_midpoint(self, distinct: Sequence[Scale]) -> Scale:
        """``2^((e_max + e_min) >> 1)`` of distinct scales, at run time (an unset exponent, a
        zero-filled loop carry's, left out of the minimum: ``_midpoint_total``)."""
        emit, i32 = self.emit, self.exponent_type()
        exponents = [self.exponent(scale) for scale in distinct]
        unset = [self.state.maybe_unset(scale) for scale in distinct]
        if any(unset):
            total = self._midpoint_total(exponents, unset)
        elif len(exponents) == 2:
            total = emit.binary("stablehlo.add", *exponents, i32)
        else:
            total = emit.binary("stablehlo.add", _fold(emit, "stablehlo.maximum", exponents),
                                _fold(emit, "stablehlo.minimum", exponents), i32)
        middle = emit.binary("stablehlo.shift_right_arithmetic", total, emit.int_scalar(1), i32)
        reach = emit.binary("stablehlo.subtract", _fold(emit, "stablehlo.maximum", exponents),
                            emit.int_scalar(MIDPOINT_REACH), i32)
        return Scale.dynamic(emit.binary("stablehlo.maximum", middle, reach, i32))

    def is_wide_range(self) -> bool:
        """Whether the current data type has f32's exponent range (f32, bf16)."""
        return type(self.current_data_dtype()) in _WIDE_RANGE_CLASSES

    def data_has_wide_range(self) -> bool:
        """Whether the step's data type has f32's exponent range (f32 and bf16 data), not
        only the current op's (an f16 step's f32 ops hand on results that go back to f16,
        where data moved toward the middle of f32's range overflows)."""
        return type(self.state.data_dtype) in _WIDE_RANGE_CLASSES

    def reach_below_largest(self) -> int:
        """How many binades below the largest scale an operand may be taken to it: the data
        type's headroom below unit data (2^14 in f16), and in f32 and bf16 data (the step's)
        half the normal range, 2^63, since data is not always near 1 (a log's values near
        0 moved 2^126 down beside ``finfo(f32).max`` went subnormal, and XLA flushed them)."""
        headroom = -self.min_normal_exponent()
        return headroom // 2 if self.is_wide_range() and self.data_has_wide_range() else headroom

    def holds_wide_range(self, old: ir.Value) -> bool:
        """Whether the original value ``old`` has data with f32's exponent range: an op that
        computes in f32 (it reads an angle) may still hand on a result in f16."""
        return type(self.state.dtype_of(old)) in _WIDE_RANGE_CLASSES

    def midpoint(self, values: Sequence[Scaled]) -> Scale:
        """The scale halfway (in exponent) between the extreme scales of ``values`` (any-scale
        values ignored): every operand's data moves by at most half their spread, so f32
        holds operands up to 2^250 apart. Static when the runtime factors agree. No operand
        moves up by more than ``MIDPOINT_REACH`` binades: data is not always near 1 (a
        quotient by 0.001 computed in f32), and an all-zero second moment's decoded scale
        (2^-252) met a bias-corrected one (2^-18) half their spread away, at 2^117 times data
        of 1074: inf. Past that reach the smaller operand moves down instead, into f32's
        subnormals only where it is 2^220 below the other."""
        scaled = [v for v in values if not v.any_scale]
        if not scaled:
            return ONE
        first = scaled[0].scale
        if all(v.scale.same_factors(first) for v in scaled):
            exps = [v.scale.exp for v in scaled]
            return Scale(max((max(exps) + min(exps)) // 2, max(exps) - MIDPOINT_REACH),
                         first.factors)
        distinct: list[Scale] = []
        for value in scaled:
            if value.scale not in distinct:
                distinct.append(value.scale)
        return self._runtime_midpoint(distinct)

    def static_spread(self, values: Sequence[Scaled]) -> int | None:
        """How many binades apart the scales of ``values`` are (any-scale values ignored),
        when that is known at rewrite time (the runtime factors agree); else None."""
        scaled = [v for v in values if not v.any_scale]
        if not scaled:
            return 0
        first = scaled[0].scale
        if not all(v.scale.same_factors(first) for v in scaled):
            return None
        exps = [v.scale.exp for v in scaled]
        return max(exps) - min(exps)

    def in_type(self, values: Sequence[Scaled], scale: Scale, element: ir.Type) -> list[ir.Value]:
        """The data of ``values`` at ``scale`` in ``element`` (converted first: a rescale of
        f16 data in f32 neither flushes nor overflows)."""
        return [self.rescale_data(Scaled(self.emit.convert(v.data, element), v.scale,
                                         v.any_scale), scale) for v in values]

    def _midpoint_total(self, exponents: Sequence[ir.Value], unset: Sequence[bool]) -> ir.Value:
        """``max + min`` of the exponents, the minimum taken over those that are set (an unset
        one counts as the maximum): the midpoint of a zero-filled loop carry and a value is
        the value's scale, where the unset exponent would flush the value to 0."""
        emit = self.emit
        i32 = self.exponent_type()
        largest = _fold(emit, "stablehlo.maximum", exponents)
        present = [emit.op("stablehlo.select", [self.is_unset(e), largest, e], [i32]).result
                   if maybe else e for e, maybe in zip(exponents, unset, strict=True)]
        return emit.binary("stablehlo.add", largest, _fold(emit, "stablehlo.minimum", present),
                           i32)

    def is_unset(self, exponent: ir.Value) -> ir.Value:
        """Whether a runtime exponent is (derived from) ``UNSET_EXPONENT``, as an i1."""
        return self.emit.compare("LT", exponent, self.emit.int_scalar(UNSET_BELOW))

    def can_drift(self, scale: Scale) -> bool:
        """Whether a result's scale can move from one call of the step to the next when the
        result is fed back as its argument: not static, not an argument's scale handed back
        as is, and not the runtime max of one (which never falls below it; SGD's
        ``w - lr * g`` with f16 data). A moving average's ``0.99 * v`` is at half v's scale
        (0.99 is 1.98 * 2^-1), so ``0.99 * v + 0.01 * x * x`` halves its scale, and doubles
        its data, on every call until the data overflows: such results take their scale
        from their data (the ``drifting-outputs`` rescale point)."""
        if scale.is_static:
            return False
        factor = scale.single_factor
        if factor is not None and factor.is_f32:
            return False
        parts = self.state.maxima.get(scale)
        return parts is None or all(part.is_static or self.can_drift(part) for part in parts)

    def constant_floor(self, constants: Sequence[Scaled]) -> int | None:
        """The lowest exponent a constant operand of a select may follow the runtime operand
        down to: a constant's data is below 2 at its own scale (``rule_constant``), so below
        2^(max_exp - 1) times it, it is still in the data type's range. Without it, the 1.0
        of ``where(norm(b) > 0, norm(b) / norm(g), 1.0)`` follows the ratio of a zero
        tensor's norms (scale 2^-126 in f16) and saturates. Sentinels beyond the data type's
        range at scale 1 (a mask's -1e9) saturate to the largest finite value
        (``rescale_constant``), which keeps their sign and order, instead of pushing the
        runtime data below the range; their floor keeps them at 2^SENTINEL_EXP or more
        (``sentinel_floor``), so that scores far below 1 do not pull a mask into a
        softmax's reach."""
        max_exp = self.max_exponent()
        largest = LARGEST_FINITE.get(dtype_name(self.current_data_dtype()))
        # In f32-range data (f32, bf16) no constant is a sentinel: finfo(f32).max at 2^127
        # follows down to 2^1, where its data is still finite (f32 data took x's scale for
        # pad(x, constant_values=3e38), 2^129 below it, and the factor's clamp made it 7.5e37).
        narrow = largest is not None and not self.is_wide_range()
        floors = [v.scale.exp - (max_exp - 1) for v in constants
                  if v.scale.exp < max_exp or not narrow]
        if narrow and any(v.scale.exp >= max_exp for v in constants):
            floors.append(sentinel_floor(largest))  # a saturated sentinel keeps its effect
        return max(floors) if floors else None

    def to_common_scale(self, values: Sequence[Scaled], constants_follow: bool = False,
                        merge: bool = False, above_constants: bool = False,
                        ) -> tuple[list[ir.Value], Scale]:
        if len(values) == 1:  # layout ops, convert...: what the general path computes
            value = values[0]  # (its common scale drops the recipe, so this one does too)
            scale = value.scale
            return [value.data], (ONE if value.any_scale else scale if scale.recipe is None
                                  else Scale(scale.exp, scale.factors))
        scale = self.common_scale(values, constants_follow, merge, above_constants)
        far = self.beside_far_constant(values)
        if not constants_follow:
            return [self.rescale_data(v, scale, far) for v in values], scale
        return [self.rescale_constant(v, scale) if v.scale.is_static and not v.any_scale
                else self.rescale_data(v, scale, far) for v in values], scale

    def rescale_constant(self, value: Scaled, target: Scale) -> ir.Value:
        """A constant operand that follows a runtime scale (``constants_follow``), saturated
        to the data type's largest finite value where it passes the range: a mask's sentinel
        (Flax's ``finfo(f32).min``, -1e9) stays below every unmasked value, as it is in the
        original, but finite, so that a row with every key masked is ``-M - (-M) = 0`` in a
        softmax, where -inf gave ``-inf - (-inf) = NaN`` (attention with a padding mask,
        f16 and bf16 data)."""
        largest = LARGEST_FINITE.get(dtype_name(self.current_data_dtype()))
        if largest is None or largest >= LARGEST_FINITE["f32"]:
            return self.rescale_data(value, target)
        return self.rescale_saturated(value, target, largest)

    def rescale_saturated(self, value: Scaled, target: Scale, level: float) -> ir.Value:
        """``value``'s data at ``target`` computed in f32, clamped to ``level`` in magnitude
        where it passes it (f32 data too)."""
        ratio = value.scale.over(target)
        if ratio.is_static:
            if ratio.exp <= 0:  # data that shrinks never passes the range
                return self.rescale_data(value, target)
            # 2^126 is f32's largest normal power of two: a larger ratio saturates anyway.
            factor = self.emit.scalar_f32(2.0 ** min(ratio.exp, 126))
            return self.emit.times_factor(value.data, factor, saturate_at=level)
        return self.emit.times_factor(value.data, self.factor(ratio), saturate_at=level)

    def at_least(self, scale: Scale, floor: int | None) -> Scale:
        """``scale`` raised to at least ``2^floor`` (unchanged for no floor): static where
        ``scale`` is, else one runtime maximum."""
        if floor is None:
            return scale
        if scale.is_static:
            return Scale(max(scale.exp, floor), scale.factors)
        return Scale.dynamic(self.emit.binary("stablehlo.maximum", self.exponent(scale),
                                              self.emit.int_scalar(floor),
                                              self.exponent_type()))

    def at_most(self, scale: Scale, ceiling: int) -> Scale:
        """``scale`` lowered to at most ``2^ceiling``: static where ``scale`` is, else one
        runtime minimum."""
        if scale.is_static:
            return Scale(min(scale.exp, ceiling), scale.factors)
        return Scale.dynamic(self.emit.binary("stablehlo.minimum", self.exponent(scale),
                                              self.emit.int_scalar(ceiling),
                                              self.exponent_type()))


def _first_choice(values: Sequence[Scaled]) -> Scale:
    """The ``common-scale=first`` choice: the first operand whose scale is one runtime factor
    as it is (an argument's own scale, a loop carry's, a measured one), else the first
    operand's.

    The result's data inherits the drift from unit of the scale it takes, and each runtime
    factor (an argument's scale, say) can carry its own: ``x @ w1 + b1`` at ``x @ w1``'s
    scale holds x's and w1's, at ``b1``'s only b1's (an MLP with every input's data at
    2^-20 flushed its loss at x's, w1's and w2's, squared). The cost is the same, one
    operand rescaled. Such a scale is also stable from call to call: an update hands the
    weight's own scale back in either order (``lr * g + w``), a loop carry keeps its own
    each trip, where a scale shifted by a constant (``0.9 * mu``'s, 2^-1 times mu's) would
    move by that constant on every call."""
    for value in values:
        if value.scale.single_factor is not None:
            return value.scale
    return values[0].scale


def _fold(emit: Emitter, name: str, exponents: Sequence[ir.Value]) -> ir.Value:
    result = exponents[0]
    for value in exponents[1:]:
        result = emit.binary(name, result, value, emit.types.scalar_i32)
    return result
