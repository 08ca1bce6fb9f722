"""Squares that are state cross the entry boundary as their signed square root (issue 19):
decoded by squaring on entry, encoded (nearest or stochastic rounding) on exit.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.scale import Scale


def square_from_root(scope: Scope, value: Scaled, inside: ir.Type) -> Scaled:
    """A square stored as its signed square root ``x = data * scale``, as ``x * |x|`` in the
    type it is computed in (``inside``, f32 for f16 data): the data is squared in f32 (exact
    for f16 and bf16 data), the scale is squared symbolically (no runtime op)."""
    emit, f32 = scope.emit, scope.state.types.f32
    wide = emit.convert(value.data, f32)
    square = emit.binary("stablehlo.multiply", wide, emit.unary("stablehlo.abs", wide))
    return Scaled(emit.convert(square, inside), value.scale.times(value.scale))


# Bits of f32's significand that a 16-bit storage type drops (stochastic rounding).
_DROPPED_BITS = {"f16": 13, "bf16": 16}
# Multipliers of a 32-bit integer hash (murmur3's finalizer), as signed i32.
_HASH_MULTIPLIERS = (-1640531535, -2048144789, -1028477387)


def _hash_bits(scope: Scope, bits: ir.Value, t: ir.RankedTensorType) -> ir.Value:
    """A pseudo-random i32 per element, from its own bits and its indices: the root changes
    every step, so each element draws a new value each step (no state, no key)."""
    emit = scope.emit

    def splat(value: int) -> ir.Value:
        return emit.broadcast_scalar(emit.int_scalar(value), t)

    h = bits
    for dim in range(t.rank):
        index = emit.op("stablehlo.iota", [], [t], {
            "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).result
        h = emit.binary("stablehlo.xor", h, emit.binary(
            "stablehlo.multiply", index, splat(_HASH_MULTIPLIERS[dim % 3])))
    for shift, multiplier in ((16, _HASH_MULTIPLIERS[1]), (13, _HASH_MULTIPLIERS[2])):
        h = emit.binary("stablehlo.xor", h,
                        emit.binary("stablehlo.shift_right_logical", h, splat(shift)))
        h = emit.binary("stablehlo.multiply", h, splat(multiplier))
    return emit.binary("stablehlo.xor", h,
                       emit.binary("stablehlo.shift_right_logical", h, splat(16)))


def _stochastic_round(scope: Scope, data: ir.Value, storage: ir.Type) -> ir.Value:
    """f32 ``data`` rounded stochastically to ``storage`` (f16, bf16): a random integer
    below 2^dropped is added to the bits and the dropped bits cleared, so a value rounds up
    with probability equal to its distance from the value below. A moving average whose
    per-step change is below half a unit in the last place (Adam's b2 = 0.999 in f16: 2^-10)
    keeps its expected value, where nearest rounding drops the change. Exact for values in
    the storage type's normal range; smaller ones (f16 subnormals) and non-finite ones are
    rounded to nearest."""
    dropped = _DROPPED_BITS.get(str(storage))
    if dropped is None:
        return data
    emit, types = scope.emit, scope.state.types
    t = ir.RankedTensorType(data.type)
    int_type = types.with_element_type(t, ir.IntegerType.get_signless(32))
    bits = emit.unary("stablehlo.bitcast_convert", data, int_type)
    noise = emit.binary("stablehlo.and", _hash_bits(scope, bits, int_type),
                        emit.broadcast_scalar(emit.int_scalar((1 << dropped) - 1), int_type))
    mask = emit.broadcast_scalar(emit.int_scalar(-(1 << dropped)), int_type)
    dithered = emit.binary("stablehlo.and", emit.binary("stablehlo.add", bits, noise), mask)
    rounded = emit.unary("stablehlo.bitcast_convert", dithered, t)
    magnitude = emit.unary("stablehlo.abs", data)
    smallest = 2.0 ** -14 if dropped == 13 else 2.0 ** -126  # the smallest normal
    largest = 65504.0 if dropped == 13 else 3.0e38
    i1 = types.with_element_type(t, ir.IntegerType.get_signless(1))
    in_range = emit.op("stablehlo.and", [
        emit.compare("GE", magnitude, emit.splat(smallest, t)),
        emit.compare("LE", magnitude, emit.splat(largest, t))], [i1]).result
    chosen = emit.op("stablehlo.select", [in_range, rounded, data], [t]).result
    return emit.convert(chosen, storage)


def root_from_square(scope: Scope, value: Scaled, storage: ir.Type,
                 stochastic: bool = False) -> Scaled:
    """A square as its signed square root ``sign(v) sqrt(|v|)`` in ``storage``: its binade
    span halves, so 16 bits hold squares of values spanning twice as many binades. The
    scale's exponent is made even first (an odd one moves a factor 2 into the data, in
    f32), then halved; the root is rescaled by its amax so that it sits at unit scale
    whatever the square's scale was."""
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
    rescaled = scope.rescale(Scaled(root, Scale.dynamic(half)), "amax:nearest")
    data = (_stochastic_round(scope, rescaled.data, storage) if stochastic
            else emit.convert(rescaled.data, storage))
    return Scaled(data, rescaled.scale)
