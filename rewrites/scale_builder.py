"""Scale materialization: a symbolic scale becomes a rank-0 i32 exponent (or an f32 factor)
once per block, built by the cheapest recipe, and reused by nested blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.module_io import short_location
from scalify_hlo.rewrites.emitter import MIN_NORMAL_EXP, Emitter
from scalify_hlo.rewrites.scalify_state import Scaled
from scalify_hlo.scale import Scale, saturate_exponent

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scalify_state import ScalifyState
    from scalify_hlo.rewrites.scope import Scope


class ScaleBuilder:
    """Emits exponents and factors of scales into the scope's block (a mixin of ``Scope``)."""

    state: ScalifyState
    emit: Emitter
    parent: Scope | None

    def _cached(self, attr: str, key) -> ir.Value | None:
        found = getattr(self, attr).get(key)
        scope = self.parent
        while found is None and scope is not None:
            found = getattr(scope, attr).get(key)
            scope = scope.parent
        return found

    def report_saturated(self, exp: int, saturated: int, runtime: bool = False) -> None:
        """Saturation happens where a scale leaves the entry function (``scale_f32``)."""
        context = self.state.context
        context.bump("scalify.saturated-scales")
        what = f"2^{exp} times runtime scales" if runtime else f"2^{exp}"
        context.warn(
            f"{short_location(self.emit.loc)}: scale {what} leaves the f32 range; saturated "
            f"to 2^{saturated}{' at run time' if runtime else ''}, the rest moved into the "
            f"data")
        context.record("func.return", self.emit.loc, "saturated", f"{what} to 2^{saturated}")

    def exponent(self, scale: Scale) -> ir.Value:
        """The scale's exponent as a rank-0 i32 SSA value, emitted once per block and reused."""
        found = self._materialized.get(scale)
        if found is None and self.parent is not None:
            found = self.parent._cached("_materialized", scale)
        if found is not None:
            return found
        value = self._build(scale)
        self._materialized[scale] = value
        return value

    def factor(self, scale: Scale, part: str = "flush") -> ir.Value:
        """``2**e`` of the scale's exponent ``e`` as a rank-0 f32, once per block.

        ``flush``: one factor, ``e`` clamped to [-127, 127], where 2^-127 is built as 0 (below
        f32's normal range a factor flushes, as the f32 product would). ``high`` and ``low``:
        two normal factors whose product is ``2**e`` for ``|e| <= 252`` (``low`` flushes
        beyond), for putting a value back together, where 2^-200 times large data is still a
        number.
        """
        key = (scale, part)
        found = self._factors.get(key)
        if found is None and self.parent is not None:
            found = self.parent._cached("_factors", key)
        if found is not None:
            return found
        emit = self.emit
        exponent = self.exponent(scale)
        if part == "flush":
            value = emit.pow2_of_exponent(emit.clamp_exponent(exponent, MIN_NORMAL_EXP - 1))
        else:
            high = self._clamped(scale, exponent)
            if part == "high":
                value = emit.pow2_of_exponent(high)
            else:
                value = emit.pow2_of_exponent(emit.clamp_exponent(
                    emit.binary("stablehlo.subtract", exponent, high, self.exponent_type()),
                    MIN_NORMAL_EXP - 1))
        self._factors[key] = value
        return value

    def _clamped(self, scale: Scale, exponent: ir.Value) -> ir.Value:
        """``clamp(e, -126, 127)``, shared by the ``high`` and ``low`` factors of a scale."""
        key = (scale, "clamped")
        found = self._cached("_factors", key)
        if found is None:
            found = self._factors[key] = self.emit.clamp_exponent(exponent)
        return found

    def apply_exactly(self, data: ir.Value, scale: Scale) -> ir.Value:
        """``data * scale`` in f32 with the two-factor ``2**e`` (see ``factor``)."""
        f32 = self.state.types.f32
        if scale.is_static:
            return self.emit.scale_tensor_static(self.emit.convert(data, f32), scale.exp)
        once = self.emit.times_factor(self.emit.convert(data, f32), self.factor(scale, "high"))
        return self.emit.times_factor(once, self.factor(scale, "low"))

    def _cost(self, scale: Scale, memo: dict[Scale, int]) -> int:
        """Ops needed to build the exponent now: via its recipe or as a flat sum."""
        if scale in memo:
            return memo[scale]
        if self._cached("_materialized", scale) is not None or scale.is_static:
            cost = 0
        elif scale.factors == ((scale.factors[0][0], 1),):
            cost = 0 if scale.exp == 0 else 1
        else:
            cost = self._flat_cost(scale)
            recipe = scale.recipe
            if recipe is not None and recipe[0] == "shift":
                cost = min(cost, 1 + self._cost(recipe[1], memo))
            elif recipe is not None:
                cost = min(cost, 1 + self._cost(recipe[1], memo) + self._cost(recipe[2], memo))
        memo[scale] = cost
        return cost

    @staticmethod
    def _flat_cost(scale: Scale) -> int:
        return (len(scale.factors) - 1 + sum(1 for _, p in scale.factors if abs(p) != 1)
                + (1 if scale.exp else 0) + (1 if scale.factors[0][1] < 0 else 0))

    def _build(self, scale: Scale) -> ir.Value:
        emit = self.emit
        if scale.is_static:
            return emit.int_scalar(scale.exp)
        i32 = self.exponent_type()  # every exponent is a rank-0 i32
        factor = scale.factors[0][0]
        if scale.factors == ((factor, 1),):
            if scale.exp != 0:
                return emit.binary("stablehlo.add", self.exponent(Scale(0, scale.factors)),
                                   emit.int_scalar(scale.exp), i32)
            return emit.exponent_of_pow2(factor.value) if factor.is_f32 else factor.value
        recipe = scale.recipe
        memo: dict[Scale, int] = {}
        if recipe is not None and self._cost(scale, memo) < self._flat_cost(scale):
            if recipe[0] == "shift":
                return emit.binary("stablehlo.add", self.exponent(recipe[1]),
                                   emit.int_scalar(recipe[2]), i32)
            name = "stablehlo.add" if recipe[0] == "mul" else "stablehlo.subtract"
            return emit.binary(name, self.exponent(recipe[1]), self.exponent(recipe[2]), i32)
        value: ir.Value | None = None
        for factor, power in scale.factors:
            term = self.exponent(Scale(0, ((factor, 1),)))
            if abs(power) != 1:
                term = emit.binary("stablehlo.multiply", term, emit.int_scalar(abs(power)), i32)
            if value is None:
                value = term if power > 0 else emit.unary("stablehlo.negate", term, i32)
            else:
                value = emit.binary("stablehlo.add" if power > 0 else "stablehlo.subtract",
                                    value, term, i32)
        if scale.exp:
            value = emit.binary("stablehlo.add", value, emit.int_scalar(scale.exp), i32)
        return value

    def scale_f32(self, value: Scaled) -> tuple[ir.Value, ir.Value]:
        """``value`` as (data, f32 scale) where it leaves the program: the scale saturated to
        a normal f32 (an exponent past [-126, 127] cannot be one), the excess moved into the
        data, where it is exact or becomes the 0 or inf the unscaled value is."""
        factor = value.scale.single_factor
        if factor is not None and factor.is_f32:  # an argument's scale, handed back as is
            return value.data, factor.value
        emit = self.emit
        if value.scale.is_static:
            exp, clamped = saturate_exponent(value.scale.exp)
            if clamped:
                self.report_saturated(value.scale.exp, exp)
            return (emit.scale_tensor_static(value.data, value.scale.exp - exp),
                    emit.scalar_f32(2.0 ** exp))
        exp, clamped = saturate_exponent(value.scale.exp)
        if clamped:  # the runtime factors would have to make up 2^(exp - saturated)
            self.report_saturated(value.scale.exp, exp, runtime=True)
        data = emit.times_factor(value.data, self.factor(value.scale, "low"))
        return data, self.factor(value.scale, "high")
