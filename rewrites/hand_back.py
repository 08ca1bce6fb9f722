"""Hand a result back at its argument's scale when its drift is a small static power of two.

A moving average fed back from one call of the step to the next (momentum, Adam's moments,
BatchNorm's running statistics: ``0.99 * v + 0.01 * x``) comes out at a static power of two
times its argument's scale (0.99 is 1.98 * 2^-1, so ``0.99 * v`` is at half v's scale). Left
so, its scale moves by that power on every call: in f32 and bf16 data it saturates at 2^-126
after about 126 calls, then the data doubles until it overflows (inf at call ~130 for a
running variance near 4). Shifting the data by that static power instead is exact in the
data dtype while the data stays normal, costs one multiply by a constant that XLA fuses into
the result's producer, and needs no runtime statistic: the result leaves at the argument's
own scale, so a value fed back keeps its scale on every call.

Only a result that can be that argument's next value is handed back: one of the same type
as the argument's data (a sum over an argument's elements is not, and keeps the scale its
rule chose), and only by a power small next to the data type's range (at most half its
largest exponent: 2^7 for f16), so that data near unit scale stays far from overflow.
Results that a rescale point already re-derived from their data (``drifting-outputs``, the
default for f16 data) have a runtime scale and are left as they are.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.scale import EXPONENT_RANGES, Scale


def argument_of(scale: Scale, entry: ir.Block) -> ir.BlockArgument | None:
    """The entry block's data argument whose scale ``scale`` is a static power of two away
    from (not equal to), else None."""
    if scale.exp == 0 or len(scale.factors) != 1:
        return None
    factor, power = scale.factors[0]
    value = factor.value
    if (power != 1 or not factor.is_f32 or not isinstance(value, ir.BlockArgument)
            or value.owner != entry or value.arg_number == 0):
        return None
    return entry.arguments[value.arg_number - 1]


def handed_back(scope: Scope, value: Scaled, entry: ir.Block, data_dtype: str) -> Scaled | None:
    """``value`` at its argument's scale (data shifted by the static power), or None when it
    is not a small static power of two away from the scale of an argument of its type."""
    if value.any_scale or abs(value.scale.exp) > EXPONENT_RANGES[data_dtype][1] // 2:
        return None
    argument = argument_of(value.scale, entry)
    if argument is None or argument.type != value.data.type:
        return None
    factor = value.scale.factors[0][0]
    return Scaled(scope.rescale_data(value, Scale(0, ((factor, 1),))), Scale(0, ((factor, 1),)))
