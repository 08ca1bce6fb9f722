"""The state of a scalify rewrite inside one block: the value map and what it has emitted.

An original value maps either to a ``Scaled`` pair (floating tensors) or to one new value
(integers, booleans, tokens, and floats the pass leaves alone such as f64). Materialized
scales and unscaled copies are cached per block, and nested blocks see their parents'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.ir import short_location
from scalify_hlo.rewrites.emitter import (
    MIN_NORMAL_EXP,
    Emitter,
    Types,
    dtype_name,
    element_type,
    is_scalable_type,
    scalar_type,
    splat_constant_value,
    with_element_type,
)
from scalify_hlo.rewrites.registry import PassContext
from scalify_hlo.scale import (
    EXPONENT_RANGES,
    LARGEST_FINITE,
    MIN_EXPONENT,
    ONE,
    UNSET_BELOW,
    UNSET_EXPONENT,
    Factor,
    Scale,
    saturate_exponent,
)

# Data types with f32's exponent range, where data may sit far from unit scale.
WIDE_RANGE_DTYPES = ("f32", "bf16")
_WIDE_RANGE_CLASSES = (ir.F32Type, ir.BF16Type)  # the same, as the bindings' type classes
RESCALE_ATTR = "scalify.rescale"  # set by the rescale pass on ops whose results it rescales
# Set by the rescale pass on the entry function's return: rescale the results whose scale can
# drift from one call to the next (``Scope.can_drift``).
RESCALE_DRIFTING_ATTR = "scalify.rescale-drifting"


@dataclass(frozen=True)
class Scaled:
    """``original = data * scale``; data is in the pass's data dtype.

    ``any_scale`` marks values made only of 0, +-inf and NaN (relu's zero, reduce inits,
    masks): their data is the same at every scale, so they never force a rescale.
    """

    data: ir.Value
    scale: Scale
    any_scale: bool = False

    def __init__(self, data: ir.Value, scale: Scale, any_scale: bool = False) -> None:
        fields = self.__dict__  # see Scale.__init__: one of these per rewritten value
        fields["data"] = data
        fields["scale"] = scale
        fields["any_scale"] = any_scale

    def data_element(self) -> ir.Type:
        """The data's element type, read from the IR once per pair: each read of a type
        makes the bindings build new type objects, and ops ask for every operand's."""
        found = self.__dict__.get("_element")
        if found is None:
            found = self.__dict__["_element"] = element_type(self.data)
        return found


Mapped = Scaled | ir.Value


def _wider(known: ir.Type | None, dtype: ir.Type) -> ir.Type:
    """The wider of two data types (f32 over f16 and bf16; the first of two 16-bit ones)."""
    if known is None or isinstance(dtype, ir.F32Type):
        return dtype
    return known


@dataclass
class ScalifyState:
    """Settings and reporting shared by every scope of one scalify run."""

    data_dtype: ir.Type
    strict: bool
    common_scale_rule: str  # "max" or "first"
    context: PassContext
    rules: dict[str, Callable[[Scope, ir.Operation], None]]
    fallback: Callable[[Scope, ir.Operation], None]
    clone: Callable[[Scope, ir.Operation], None]
    reported: set[str] = field(default_factory=set)
    # Values of the original program that get a data type of their own (squares, see
    # square_values.py, and floats made from integer bits) and that type; empty: every value
    # uses data_dtype. ``wide_dtype`` is None when there is none, else the widest of them.
    wide: dict[ir.Value, ir.Type] = field(default_factory=dict)
    wide_dtype: ir.Type | None = None
    # The ops that define or use a value of ``wide``, and the type they compute in (see
    # ``op_dtype``), found once from the values rather than per op from its operands.
    wide_ops: dict[ir.Operation, ir.Type] = field(default_factory=dict)
    # The data type of the op being rewritten: its operands are read in it, its results made
    # in it (None outside an op: values keep their own type).
    current_dtype: ir.Type | None = None
    types: Types = field(default_factory=Types)
    # The last op reported as a fallback: its record says so, not which scale it got.
    fallback_op: ir.Operation | None = None

    # Runtime factors that may hold ``UNSET_EXPONENT``: the scales of loop-carried values
    # that enter a loop as zeros (see ``rule_while``), and common scales of only such.
    unset_factors: set[Factor] = field(default_factory=set)

    def maybe_unset(self, scale: Scale) -> bool:
        """Whether ``scale``'s runtime exponent may be ``UNSET_EXPONENT`` (or sums with it)."""
        return bool(self.unset_factors) and any(
            factor in self.unset_factors for factor, _ in scale.factors)

    # Runtime maxima of scales (common_scale): each one's operands, for ``Scope.can_drift``.
    maxima: dict[Scale, tuple[Scale, ...]] = field(default_factory=dict)
    # Runtime + constant adds whose result's data later products raise to a power, rescaled
    # under ``common-scale=first`` (drift.py).
    compounding: set[ir.Operation] = field(default_factory=set)

    def dtype_of(self, old: ir.Value) -> ir.Type:
        """The data type of an original float value in the rewritten program."""
        if self.wide_dtype is not None:
            return self.wide.get(old, self.data_dtype)
        return self.data_dtype

    def set_wide(self, values: set[ir.Value], dtype: ir.Type) -> None:
        """Make ``values`` wide (of type ``dtype``), and note the ops that touch them; a value
        or op in two classes (a square of random bits) takes the wider type."""
        wide, wide_ops = self.wide, self.wide_ops
        for value in values:
            wide[value] = _wider(wide.get(value), dtype)
            owner = value.owner
            touching = [] if isinstance(owner, ir.Block) else [owner.operation]
            touching += [use.owner.operation for use in value.uses]
            for op in touching:
                wide_ops[op] = _wider(wide_ops.get(op), dtype)
        if values:
            self.wide_dtype = _wider(self.wide_dtype, dtype)

    def op_dtype(self, op: ir.Operation) -> ir.Type:
        """Wide if any float operand or result of ``op`` is wide: an op computes in the wider
        type of what it touches, so a square is formed, and its sqrt taken, in it."""
        if self.wide_dtype is not None:
            return self.wide_ops.get(op, self.data_dtype)
        return self.data_dtype

    def report_fallback(self, op: ir.Operation, why: str) -> None:
        where = short_location(op.location)
        if self.strict:
            raise RewriteError(f"{where}: {op.name} {why} (scalify strict mode)")
        message = f"{where}: {op.name} {why}; running it unscaled (scale 1)"
        self.context.bump("scalify.fallback-ops")
        self.context.warn(message)
        if self.context.records is not None:
            self.fallback_op = op
            self.context.record(op.name, op.location, "fallback", why)


class Scope:
    def __init__(self, state: ScalifyState, block: ir.Block, parent: Scope | None = None):
        self.state = state
        self.block = block
        self.parent = parent
        self.values: dict[ir.Value, Mapped] = {}
        self._materialized: dict[Scale, ir.Value] = {}
        self._factors: dict[tuple[Scale, str], ir.Value] = {}
        self._unscaled: dict[ir.Value, ir.Value] = {}
        self._converted: dict[tuple[ir.Value, ir.Type], ir.Value] = {}
        self.emit = Emitter(ir.InsertionPoint(block), ir.Location.unknown(), constants={},
                            types=state.types)
        # The op being rewritten, its results and their types (see ``results_of``).
        self._op: ir.Operation | None = None
        self._results: list[ir.Value] = []
        self._result_types: list[ir.Type] = []

    # ----- the value map -------------------------------------------------------------
    def lookup(self, old: ir.Value) -> Mapped | None:
        found = self.values.get(old)  # the common case, before walking up the scopes
        if found is not None:
            return found
        scope = self.parent
        while scope is not None:
            found = scope.values.get(old)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def get(self, old: ir.Value) -> Mapped:
        found = self.values.get(old)
        if found is None:
            found = self.lookup(old)
            if found is None:
                raise RewriteError(f"{short_location(self.emit.loc)}: value used before "
                                   f"definition")
        return found

    def is_scaled(self, old: ir.Value) -> bool:
        return isinstance(self.get(old), Scaled)

    def scaled(self, old: ir.Value) -> Scaled:
        """The (data, scale) of a float operand, its data in the current op's data type."""
        found = self.get(old)
        if not isinstance(found, Scaled):
            raise RewriteError(f"{short_location(self.emit.loc)}: expected a floating value")
        target = self.state.current_dtype
        if target is None or found.data_element() == target:
            return found
        key = (old, target)  # types are uniqued: equal types are equal keys
        data = self._converted.get(key)
        if data is None:
            value = splat_constant_value(old)
            if value is not None and found.scale.is_static:
                # A constant is made again in the wider type, not widened from f16: Adam's
                # 0.999 is 0.99902 in f16, which moves 1 - b2 by 2.5%.
                with np.errstate(over="ignore", under="ignore"):
                    split = float(np.float64(value) / 2.0 ** found.scale.exp)
                data = self.emit.splat(split, with_element_type(found.data.type, target))
            else:
                data = self.emit.convert(found.data, target)
            self._converted[key] = data
        converted = Scaled(data, found.scale, found.any_scale)
        converted.__dict__["_element"] = target
        return converted

    def set(self, old: ir.Value, new: Mapped) -> None:
        self.values[old] = new

    def plain(self, old: ir.Value) -> ir.Value:
        """The new value of an operand in its original type (unscaling floats)."""
        found = self.get(old)
        if isinstance(found, Scaled):
            return self.unscaled(old)
        return found

    # ----- scales --------------------------------------------------------------------
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

    def rescale_data(self, value: Scaled, target: Scale) -> ir.Value:
        """``value``'s data re-expressed at scale ``target`` (an exact power-of-two factor)."""
        if value.any_scale:
            return value.data
        ratio = value.scale.over(target)
        if ratio.is_static:
            return self.emit.scale_tensor_static(value.data, ratio.exp)
        return self.emit.times_factor(value.data, self.factor(ratio))

    def common_scale(self, values: Sequence[Scaled], constants_follow: bool = False,
                     merge: bool = False) -> Scale:
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
        (``_constant_floor``).
        """
        scaled = [v for v in values if not v.any_scale]
        if constants_follow and any(not v.scale.is_static for v in scaled):
            floor = self._constant_floor([v for v in scaled if v.scale.is_static])
            scaled = [v for v in scaled if not v.scale.is_static]
            common = self.common_scale(scaled, merge=merge)
            if floor is None:
                return common
            i32 = self.exponent_type()
            return Scale.dynamic(self.emit.binary("stablehlo.maximum", self.exponent(common),
                                                  self.emit.int_scalar(floor), i32))
        if not scaled:
            return ONE
        first = scaled[0].scale
        if all(v.scale.same_factors(first) for v in scaled):
            return Scale(max(v.scale.exp for v in scaled), first.factors)
        if self.state.common_scale_rule == "first":
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
        return Scale.dynamic(emit.binary("stablehlo.shift_right_arithmetic", total,
                                         emit.int_scalar(1), i32))

    def is_wide_range(self) -> bool:
        """Whether the current data type has f32's exponent range (f32, bf16)."""
        return type(self.current_data_dtype()) in _WIDE_RANGE_CLASSES

    def midpoint(self, values: Sequence[Scaled]) -> Scale:
        """The scale halfway (in exponent) between the extreme scales of ``values`` (any-scale
        values ignored): every operand's data moves by at most half their spread, so f32
        holds operands up to 2^250 apart. Static when the runtime factors agree."""
        scaled = [v for v in values if not v.any_scale]
        if not scaled:
            return ONE
        first = scaled[0].scale
        if all(v.scale.same_factors(first) for v in scaled):
            exps = [v.scale.exp for v in scaled]
            return Scale((max(exps) + min(exps)) // 2, first.factors)
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
        types = self.state.types
        i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        attributes = {
            "comparison_direction": types.attribute(
                ("direction", "LT"),
                lambda: ir.Attribute.parse("#stablehlo<comparison_direction LT>")),
            "compare_type": types.attribute(
                ("compare_type", "SIGNED"),
                lambda: ir.Attribute.parse("#stablehlo<comparison_type SIGNED>")),
        }
        return self.emit.op("stablehlo.compare", [exponent, self.emit.int_scalar(UNSET_BELOW)],
                            [i1], attributes).result

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

    def _constant_floor(self, constants: Sequence[Scaled]) -> int | None:
        """The lowest exponent a constant operand of a select may follow the runtime operand
        down to: a constant's data is below 2 at its own scale (``rule_constant``), so below
        2^(max_exp - 1) times it, it is still in the data type's range. Without it, the 1.0
        of ``where(norm(b) > 0, norm(b) / norm(g), 1.0)`` follows the ratio of a zero
        tensor's norms (scale 2^-126 in f16) and saturates. Sentinels beyond the data type's
        range at scale 1 (a mask's -1e9) have no floor: they saturate to the largest finite
        value (``rescale_constant``), which keeps their sign and order, instead of pushing
        the runtime data below the range."""
        max_exp = self.max_exponent()
        floors = [v.scale.exp - (max_exp - 1) for v in constants if v.scale.exp < max_exp]
        return max(floors) if floors else None

    def to_common_scale(self, values: Sequence[Scaled], constants_follow: bool = False,
                        merge: bool = False) -> tuple[list[ir.Value], Scale]:
        if len(values) == 1:  # layout ops, convert...: what the general path computes
            value = values[0]  # (its common scale drops the recipe, so this one does too)
            scale = value.scale
            return [value.data], (ONE if value.any_scale else scale if scale.recipe is None
                                  else Scale(scale.exp, scale.factors))
        scale = self.common_scale(values, constants_follow, merge)
        if not constants_follow:
            return [self.rescale_data(v, scale) for v in values], scale
        return [self.rescale_constant(v, scale) if v.scale.is_static and not v.any_scale
                else self.rescale_data(v, scale) for v in values], scale

    def rescale_constant(self, value: Scaled, target: Scale) -> ir.Value:
        """A constant operand that follows a runtime scale (``constants_follow``), saturated
        to the data type's largest finite value where it passes the range: a mask's sentinel
        (Flax's ``finfo(f32).min``, -1e9) stays below every unmasked value, as it is in the
        original, but finite, so that a row with every key masked is ``-M - (-M) = 0`` in a
        softmax, where -inf gave ``-inf - (-inf) = NaN`` (attention with a padding mask,
        f16 and bf16 data)."""
        ratio = value.scale.over(target)
        largest = LARGEST_FINITE.get(dtype_name(self.current_data_dtype()))
        if ratio.is_static or largest is None or largest >= LARGEST_FINITE["f32"]:
            return self.rescale_data(value, target)
        return self.emit.times_factor(value.data, self.factor(ratio), saturate_at=largest)

    # ----- crossing between the scaled and the original representation --------------
    def unscaled(self, old: ir.Value) -> ir.Value:
        """``data * scale`` in the original element type (computed in f32 when narrower)."""
        cached = self._cached("_unscaled", old)
        if cached is not None:
            return cached
        value = self.scaled(old)
        original = element_type(old)
        emit = self.emit
        scale = value.scale  # any exponent: applied in steps of normal powers of two
        data = value.data
        if scale.is_static:
            wide = self.state.types.f32 if scale.exp != 0 else original
            result = emit.convert(emit.scale_tensor_static(emit.convert(data, wide), scale.exp),
                                  original)
        else:
            result = emit.convert(self.apply_exactly(data, scale), original)
        self._unscaled[old] = result
        return result

    def current_data_dtype(self) -> ir.Type:
        return self.state.current_dtype or self.state.data_dtype

    def encode(self, value: ir.Value, scale: Scale | None = None) -> Scaled:
        """A value of the original program as data in the data dtype with a static scale."""
        scale = scale or ONE
        data = value
        if scale.exp != 0:
            data = self.emit.scale_tensor_static(self.emit.convert(value, self.state.types.f32),
                                                 -scale.exp)
        return Scaled(self.emit.convert(data, self.current_data_dtype()), scale)

    def min_normal_exponent(self) -> int:
        """The smallest normal exponent of the current data type (-14 for f16)."""
        return EXPONENT_RANGES.get(dtype_name(self.current_data_dtype()), (-126, 0))[0]

    def max_exponent(self) -> int:
        """The largest exponent of the current data type (15 for f16)."""
        return EXPONENT_RANGES.get(dtype_name(self.current_data_dtype()), (0, 127))[1]

    def passes_data_range(self, largest: float, target: ir.Type) -> bool:
        """Whether values of the float type ``target`` up to ``largest`` in magnitude can pass
        the current data type's range at scale 1 where ``target``'s own range holds them (an
        int32 step count converted to f32 is inf in f16 data from 65520 on, and a
        learning-rate schedule of it 0 or NaN); where ``target``'s does not, the original
        overflows the same way."""
        within_target = min(largest, LARGEST_FINITE.get(dtype_name(target), math.inf))
        return within_target > LARGEST_FINITE.get(dtype_name(self.current_data_dtype()),
                                                  math.inf)

    def encode_in_range(self, value: ir.Value) -> Scaled:
        """A float tensor converted from integers (or f64), as data at the smallest
        power-of-two scale that keeps its largest magnitude below 2^(max exponent) of the data
        type, measured at run time (the values' range is not known before): scale 1 while
        it fits, so that small integers stay exact."""
        emit, types = self.emit, self.state.types
        max_exp = self.max_exponent()
        wide = emit.convert(value, types.f32)
        largest = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum", 0.0)
        i32 = types.scalar_i32
        # nearest power of two of the largest magnitude, 2^e; 0 reads as 2^-127
        excess = emit.binary("stablehlo.subtract", emit.exponent_of_pow2(emit.pow2_round(
            largest)), emit.int_scalar(max_exp - 1), i32)
        exponent = emit.binary("stablehlo.maximum", excess, emit.int_scalar(0), i32)
        inverse = emit.pow2_of_exponent(emit.unary("stablehlo.negate", exponent, i32))
        data = emit.convert(emit.times_factor(wide, inverse), self.current_data_dtype())
        self.state.context.bump("scalify.integer-range")
        return Scaled(data, Scale.dynamic(exponent))

    def data_type(self, t: ir.Type) -> ir.Type:
        """The type a value of type ``t`` has in the rewritten program (its data half), in
        the current op's data type."""
        types = self.state.types
        if types.is_scalable(t):
            self.check_static(t)
            return types.with_element_type(t, self.current_data_dtype())
        return t

    def data_type_of(self, old: ir.Value) -> ir.Type:
        """The data type of the original value ``old`` in the rewritten program."""
        t = old.type
        if is_scalable_type(t):
            self.check_static(t)
            return self.state.types.with_element_type(t, self.state.dtype_of(old))
        return t

    def check_static(self, t: ir.Type) -> None:
        if type(t) is ir.RankedTensorType and not t.has_static_shape:
            raise RewriteError(
                f"{short_location(self.emit.loc)}: dynamic shapes are not supported ({t})")

    def exponent_type(self) -> ir.Type:
        return self.state.types.scalar_i32

    # ----- dynamic rescaling ------------------------------------------------------------
    def rescale(self, value: Scaled, how: str) -> Scaled:
        """Move ``pow2(amax or rms of data)`` from data to scale (1 for zero/non-finite).

        ``how`` is ``method:rounding`` as the rescale pass writes it.
        """
        method, _, rounding = how.partition(":")
        emit = self.emit
        f32 = self.state.types.f32
        wide = emit.convert(value.data, f32)
        scalar = scalar_type(f32)
        if method == "rms":
            squares = emit.binary("stablehlo.multiply", wide, wide)
            total = emit.reduce_all(squares, "stablehlo.add", 0.0)
            count = float(max(1, int(np.prod(ir.RankedTensorType(wide.type).shape))))
            statistic = emit.unary("stablehlo.sqrt", emit.binary(
                "stablehlo.divide", total, emit.splat(count, scalar)))
        else:
            statistic = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum",
                                        0.0)
        rounded = emit.pow2_round(statistic)
        if rounding == "up":  # the next power of two at or above the statistic
            below = emit.compare("LT", rounded, statistic)
            rounded = emit.op("stablehlo.select", [below, emit.binary(
                "stablehlo.multiply", rounded, emit.splat(2.0, scalar)), rounded],
                [scalar]).result
        # A normal power of two up to 2^126, so that its inverse is one too: subnormal, inf
        # and NaN statistics leave the scale as it is, 0 sets it (``_zero_shift``).
        i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        usable = emit.op("stablehlo.and", [
            emit.compare("GE", rounded, emit.splat(2.0 ** -126, scalar)),
            emit.compare("LE", rounded, emit.splat(2.0 ** 126, scalar))], [i1]).result
        i32 = self.state.types.scalar_i32
        bits = emit.unary("stablehlo.bitcast_convert", rounded, i32)
        measured = emit.binary("stablehlo.subtract", emit.binary(
            "stablehlo.shift_right_logical", bits, emit.int_scalar(23), i32),
            emit.int_scalar(127), i32)
        # 2^-e straight from the bits of 2^e (biased exponents add up to 254): the chain
        # from the statistic to the factor is what XLA copies into every fusion that uses
        # the data, so it takes 4 ops fewer than negating the exponent and rebuilding.
        inverse = emit.unary("stablehlo.bitcast_convert", emit.op("stablehlo.select", [
            usable, emit.binary("stablehlo.subtract", emit.int_scalar(254 << 23), bits, i32),
            emit.int_scalar(127 << 23)], [i32]).result, self.state.types.scalar_f32)
        data = emit.convert(emit.times_factor(wide, inverse), value.data_element())
        # The scale moves by the same exponent, or, for all-zero data (which no factor
        # changes), to where an all-zero argument's is.
        moved = emit.op("stablehlo.select", [usable, measured,
                                             self._zero_shift(value, statistic)], [i32]).result
        self.state.context.bump("scalify.rescaled")
        return Scaled(data, value.scale.times(Scale.dynamic(moved)))

    def _zero_shift(self, value: Scaled, statistic: ir.Value) -> ir.Value:
        """What a rescale moves into the scale when its statistic is no normal power of two:
        nothing, except for an all-zero tensor, whose scale becomes the one an all-zero
        argument gets (2^-126 under common-scale=max, 1 under first). Zeros are valid at any
        scale, and the one they come with can be anything: in a scan's backward pass a
        gradient that is zero for many steps (an LSTM's, where the loss reads one step)
        keeps multiplying its scale by the dots' 2^k, 2^40 after 20 steps, and the max
        common scale then flushes the first nonzero gradient added to it to 0."""
        emit, i32 = self.emit, self.state.types.scalar_i32
        target = MIN_EXPONENT if self.state.common_scale_rule == "max" else 0
        shift = emit.binary("stablehlo.subtract", emit.int_scalar(target),
                            self.exponent(value.scale), i32)
        zero = emit.compare("EQ", statistic, emit.splat(0.0, scalar_type(self.state.types.f32)))
        return emit.op("stablehlo.select", [zero, shift, emit.int_scalar(0)], [i32]).result

    def rescale_results(self, op: ir.Operation, method: str) -> None:
        rescaled = False
        for result in op.results:
            found = self.lookup(result)
            if isinstance(found, Scaled) and not found.any_scale:
                self.set(result, self.rescale(found, method))
                rescaled = True
        if rescaled:
            self.state.context.record(op.name, op.location, "rescale", method)

    # ----- walking -------------------------------------------------------------------
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
        wide = state.wide_dtype is not None
        state.current_dtype = state.op_dtype(op)
        try:
            self._rewrite_op(op, results)
            if wide:
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
                    if not found.any_scale and target == self.state.data_dtype:
                        found = self.rescale(found, "amax:nearest")
                        state.context.record(
                            op.name, op.location, "rescale",
                            f"amax:nearest, {dtype_name(found.data_element())} to "
                            f"{dtype_name(target)} (square-dtype)")
                    self.set(result, Scaled(self.emit.convert(found.data, target), found.scale,
                                            found.any_scale))

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
            touches_floats = any(isinstance(self.lookup(v), Scaled) for v in op.operands)
        if not touches_floats:  # integers, booleans, tokens, complex, f64: cloned as they are
            self.state.clone(self, op)
            return
        rule = self.state.rules.get(op.name)
        if rule is None:
            rule = self.state.fallback
        rule(self, op)
        if RESCALE_ATTR in op.attributes:
            self.rescale_results(op, ir.StringAttr(op.attributes[RESCALE_ATTR]).value)
        if self.state.context.records is not None:
            self._record(op, results)

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
            context.record(op.name, location, "wide",
                           f"{dtype_name(state.current_dtype)} data (square-dtype)")
        dynamic = [value.scale for value in scaled if not value.scale.is_static]
        if dynamic:
            context.record(op.name, location, "runtime", describe_runtime(dynamic[0]))
        elif all(value.any_scale for value in scaled):
            context.record(op.name, location, "static", "any (0/inf/NaN)")
        else:
            exponents = sorted({value.scale.exp for value in scaled if not value.any_scale})
            context.record(op.name, location, "static",
                           ", ".join(f"2^{exp}" for exp in exponents))

    def child(self, block: ir.Block) -> Scope:
        child = Scope(self.state, block, self)
        child.emit = Emitter(ir.InsertionPoint(block), self.emit.loc, constants={},
                             types=self.state.types)
        return child

    # ----- flattening (data, scale) pairs for signatures, loops and branches --------
    def flatten(self, olds: Sequence[ir.Value], f32_scales: bool = False,
                unset: Sequence[bool] = ()) -> list[ir.Value]:
        """(data, scale) for floats: i32 exponents inside the program (loops, branches), f32
        scales where it leaves the entry function (``f32_scales``); ``UNSET_EXPONENT`` for
        the values flagged in ``unset`` (zero-filled loop operands)."""
        flat: list[ir.Value] = []
        for index, old in enumerate(olds):
            found = self.get(old)
            if isinstance(found, Scaled):
                if f32_scales:
                    flat += list(self.scale_f32(found))
                elif index < len(unset) and unset[index]:
                    flat += [found.data, self.emit.int_scalar(UNSET_EXPONENT)]
                else:
                    flat += [found.data, self.exponent(found.scale)]
            else:
                flat.append(found)
        return flat

    def flat_types(self, olds: Sequence[ir.Value]) -> list[ir.Type]:
        """The flattened types of original values inside the program: (data, i32 exponent)
        for floats."""
        flat: list[ir.Type] = []
        for old in olds:
            flat.append(self.data_type_of(old))
            if is_scalable_type(old.type):
                flat.append(self.exponent_type())
        return flat

    def bind_flat(self, olds: Sequence[ir.Value], news: Sequence[ir.Value],
                  f32_scales: bool = False) -> None:
        """Map original values to consecutive new values: two for floats (data, then an i32
        exponent, or an f32 scale with ``f32_scales``), one otherwise."""
        position = 0
        for old in olds:
            if is_scalable_type(old.type):
                scale = news[position + 1]
                self.set(old, Scaled(news[position], Scale.dynamic_f32(scale) if f32_scales
                                     else Scale.dynamic(scale)))
                position += 2
            else:
                self.set(old, news[position])
                position += 1


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


def describe_runtime(scale: Scale) -> str:
    """A runtime scale for a reader: its static part and how many runtime factors."""
    count = len(scale.factors)
    factors = f"{count} runtime factor{'s' if count != 1 else ''}"
    return f"2^{scale.exp} x {factors}" if scale.exp else factors


def _fold(emit: Emitter, name: str, exponents: Sequence[ir.Value]) -> ir.Value:
    result = exponents[0]
    for value in exponents[1:]:
        result = emit.binary(name, result, value, emit.types.scalar_i32)
    return result
