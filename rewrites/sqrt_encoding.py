"""Squares that are state cross the entry boundary as their signed square root (issue 19):
decoded by squaring on entry, encoded (nearest or stochastic rounding) on exit, in the data
dtype or in FP8 (``square-format``).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.dtypes import FP8_FORMATS
from scalify_hlo.rewrites.fp8_storage import to_fp8
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.stochastic_rounding import stochastic_grid
from scalify_hlo.scale import Scale


def square_from_root(scope: Scope, value: Scaled, inside: ir.Type) -> Scaled:
    """A square stored as its signed square root ``x = data * scale``, as ``x * |x|`` in the
    type it is computed in (``inside``, f32 for f16 data): the data is squared in f32 (exact
    for f16 and bf16 data), the scale is squared symbolically (no runtime op)."""
    emit, f32 = scope.emit, scope.state.types.f32
    wide = emit.convert(value.data, f32)
    square = emit.binary("stablehlo.multiply", wide, emit.unary("stablehlo.abs", wide))
    return Scaled(emit.convert(square, inside), value.scale.times(value.scale))


def root_from_square(scope: Scope, value: Scaled, storage: ir.Type,
                     stochastic: bool = False) -> Scaled:
    """A square as its signed square root ``sign(v) sqrt(|v|)`` in ``storage``: its binade
    span halves, so 16 bits hold squares of values spanning twice as many binades. The
    scale's exponent is made even first (an odd one moves a factor 2 into the data, in
    f32), then halved; the root is rescaled by its amax so that it sits at unit scale
    whatever the square's scale was (in FP8 ``storage``: at the format's top binade,
    ``fp8_storage.to_fp8``)."""
    emit, types = scope.emit, scope.state.types
    i32, f32 = types.scalar_i32, types.f32
    wide = emit.convert(value.data, f32)
    exponent = scope.exponent(value.scale)
    odd = emit.binary("stablehlo.and", exponent, emit.int_scalar(1), i32)
    wide = emit.times_factor(wide, emit.pow2_of_exponent(odd))
    half = emit.binary("stablehlo.shift_right_arithmetic",
                       emit.binary("stablehlo.subtract", exponent, odd, i32),
                       emit.int_scalar(1), i32)
    root = emit.binary("stablehlo.multiply", emit.unary("stablehlo.sign", wide),
                       emit.unary("stablehlo.sqrt", emit.unary("stablehlo.abs", wide)))
    if str(storage) in FP8_FORMATS:
        return to_fp8(scope, Scaled(root, Scale.dynamic(half)), storage, stochastic)
    # Rescaled straight into ``storage``, where a stale delayed exponent saturates (a root
    # rounded stochastically stays f32 until the grid, and takes its current exponent).
    rescaled = scope.rescale(Scaled(root, Scale.dynamic(half)), "amax:nearest",
                             delayable=not stochastic, element=None if stochastic else storage)
    data = rescaled.data
    if stochastic:
        data = stochastic_grid(scope, emit.convert(data, types.f32), str(storage))
    return Scaled(emit.convert(data, storage), rescaled.scale)
