"""The result scale of a nonlinear op that vanishes at 0.

A bounded op (tanh, sine, erf, ...) runs on its unscaled operand and stores its results at
scale 1, which f16 holds for every result. But ``|tanh(x)| <= |x|``: for an operand at
2^-20, scale 1 left each result with the 4 bits of an f16 subnormal (1.4% off), and flushed
those of an operand below 2^-25, where the original f32 step keeps them. Such an op
(``Trait.VANISHES_AT_ZERO``, ``|f(x)| <= 2|x|``) stores its results one binade above its
operand's scale where that is below 1: the results' data is then at most the operand's in
magnitude and as precise. Not below the scale that holds the op's finite limit at infinity
(``op_table.infinity_limit``; tanh: 2^-15 holds 1): an infinite operand's data is inf at any
scale, and tanh(inf) = 1 must stay 1 (sin(inf) is NaN and asinh(inf) inf: no limit). An op
whose results are measured (tan, sinh, expm1 of an operand that may be positive:
``encode_in_range``) takes the operand's scale as the floor of the measured one, in place of
1: the measurement keeps large results in range.
"""

from __future__ import annotations

import math

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import MIN_NORMAL_EXP
from scalify_hlo.rewrites.op_table import Trait, has_trait, infinity_limit
from scalify_hlo.rewrites.scope import Scope
from scalify_hlo.scale import ONE, Scale

_HEADROOM = 1  # |f(x)| <= 2|x|: one binade above the operand's scale


def small_result_scale(scope: Scope, op: ir.Operation, measured: bool = False) -> Scale:
    """The scale for the results of the nonlinear ``op``: its operand's scale times 2 where
    that is below 1 (a runtime scale: the smaller of the two at run time), and for results
    not ``measured``, at least the scale that holds its finite limit at infinity; 1 where
    that is the only choice (f32-range data, an op that does not vanish at 0, an operand of
    any scale)."""
    if not has_trait(op.name, Trait.VANISHES_AT_ZERO) or scope.holds_wide_range(op.results[0]):
        return ONE
    operand = scope.scaled(op.operands[0])
    if operand.any_scale:
        return ONE
    lowest, limit = MIN_NORMAL_EXP, infinity_limit(op.name)
    if limit and not measured:  # f(inf)'s data below 2^(max exponent + 1) of its data type
        lowest = math.ceil(math.log2(limit)) - scope.max_exponent(
            scope.state.dtype_of(op.results[0]))
    if operand.scale.is_static:
        return Scale(max(min(operand.scale.exp + _HEADROOM, 0), lowest))
    emit = scope.emit
    exponent = emit.binary("stablehlo.add", scope.exponent(operand.scale),
                           emit.int_scalar(_HEADROOM), scope.exponent_type())
    return Scale.dynamic(emit.clamp_exponent(exponent, lowest, 0))
