"""remainder: exact at any spread of its operands' scales.

``remainder(c*x, c*y) = c * remainder(x, y)``, so the op can run at a common scale, but the
largest scale flushed the smaller operand in f16 data: ``jnp.remainder(x, 1.0)`` of x at
2^30 divided by a 0 (NaN), and of x at 2^-30 took x as 0 (0 where the original gives x, or
1 + x for a negative x). The op runs instead in a type that holds both operands (f32 for
f16 data) at the midpoint of their exponents, where IEEE's remainder is exact, and the
result, never larger in magnitude than either operand, is stored at the smaller of their
scales.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.rule_support import emit_like, float_operands, same_scale
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.scale import Scale


def rule_remainder(scope: Scope, op: ir.Operation) -> None:
    """remainder (module docstring); same-scale where the largest scale keeps both operands'
    data normal (f32-range data, or a static spread within f16's headroom)."""
    olds = list(op.operands)
    indices, floats = float_operands(scope, olds)
    spread = scope.static_spread(floats)
    if (len(indices) != 2 or any(v.any_scale for v in floats) or scope.is_wide_range()
            or (spread is not None and spread <= -scope.min_normal_exponent())):
        same_scale(scope, op)
        return
    types = scope.state.types
    midpoint = scope.midpoint(floats)
    wide = emit_like(scope, op, scope.in_type(floats, midpoint, types.f32),
                     lambda t: types.with_element_type(t, types.f32)).results[0]
    smaller = _smaller(scope, floats[0].scale, floats[1].scale)
    data = scope.rescale_data(Scaled(wide, midpoint), smaller)
    scope.set(op.results[0], Scaled(scope.emit.convert(data, scope.current_data_dtype()),
                                    smaller))


def _smaller(scope: Scope, a: Scale, b: Scale) -> Scale:
    """The smaller of two scales: static where their runtime factors agree."""
    if a.same_factors(b):
        return a if a.exp <= b.exp else b
    return Scale.dynamic(scope.emit.binary("stablehlo.minimum", scope.exponent(a),
                                           scope.exponent(b), scope.exponent_type()))
