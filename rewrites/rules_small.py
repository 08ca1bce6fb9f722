"""The result scale of a bounded nonlinear op that vanishes linearly at 0.

A bounded op (tanh, sine, erf, ...) runs on its unscaled operand and stores its results at
scale 1, which f16 holds for every result. But ``|tanh(x)| <= |x|``: for an operand at
2^-20, scale 1 left each result with the 4 bits of an f16 subnormal (1.4% off), and flushed
those of an operand below 2^-25, where the original f32 step keeps them. Such an op
(``Trait.VANISHES_AT_ZERO``, ``|f(x)| <= 2|x|``) stores its results one binade above its
operand's scale where that is below 1: the results' data is then at most the operand's in
magnitude (no overflow) and as precise. An op whose results are measured (tan, sinh, expm1
of an operand that may be positive: ``encode_in_range``) takes that scale as its floor in
place of 1: the measurement keeps large results in range. Scales stop at f32's smallest
normal exponent, below which the op's f32 operand has lost its bits already.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import MIN_NORMAL_EXP
from scalify_hlo.rewrites.op_table import Trait, has_trait
from scalify_hlo.rewrites.scope import Scope
from scalify_hlo.scale import Scale

_HEADROOM = 1  # |f(x)| <= 2|x|: one binade above the operand's scale


def small_result_scale(scope: Scope, op: ir.Operation) -> Scale | None:
    """The scale for the results of the bounded nonlinear ``op``: its operand's scale times
    2, where that is below 1 (a runtime scale: the smaller of the two at run time); None
    where scale 1 is the only choice (f32-range data, an op that does not vanish at 0, an
    operand of any scale)."""
    if scope.is_wide_range() or not has_trait(op.name, Trait.VANISHES_AT_ZERO):
        return None
    operand = scope.scaled(op.operands[0])
    if operand.any_scale:
        return None
    if operand.scale.is_static:
        exp = max(min(operand.scale.exp + _HEADROOM, 0), MIN_NORMAL_EXP)
        return Scale(exp) if exp else None
    emit = scope.emit
    exponent = emit.binary("stablehlo.add", scope.exponent(operand.scale),
                           emit.int_scalar(_HEADROOM), scope.exponent_type())
    return Scale.dynamic(emit.clamp_exponent(exponent, MIN_NORMAL_EXP, 0))
