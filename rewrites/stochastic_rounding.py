"""Stochastic rounding of f32 values onto a narrower float's grid, for state stored between
steps (a square's root in f16, a first moment in FP8): a moving average whose per-step change
is below half a unit in the last place keeps its expected value, where nearest rounding
drops the change (Adam's b2 = 0.999 in f16: 2^-10 of the value per step).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.scope import Scope

# Per storage type: the bits of f32's significand it drops, its smallest normal and its
# largest finite value (the range where dropping bits is exact rounding), or no range where
# every finite value is in it (bf16 keeps f32's exponent bits).
_STORAGE: dict[str, tuple[int, float | None, float | None]] = {
    "f16": (13, 2.0 ** -14, 65504.0), "bf16": (16, None, None),
    "f8E4M3FN": (20, 2.0 ** -6, 448.0), "f8E5M2": (21, 2.0 ** -14, 57344.0)}
# Multipliers of a 32-bit integer hash (murmur3's finalizer), as signed i32.
_HASH_MULTIPLIERS = (-1640531535, -2048144789, -1028477387)


def _hash_bits(scope: Scope, bits: ir.Value, t: ir.RankedTensorType) -> ir.Value:
    """A pseudo-random i32 per element, from its own bits and its indices: the state changes
    every step, so each element draws a new value each step (no state, no key).

    Each index is mixed into the running hash (``(h ^ i) * m``), never multiplied on its
    own: XLA:TPU computes a product of an iota and a constant, which reads no data, in a
    kernel of its own (one per shape: 5 of the 2-layer GPT's 390 kernels on tpu7x). One
    round of murmur3's finalizer then spreads every input bit into the low bits that the
    rounding reads (a second round cost 0.8% of the step's estimated cycles for nothing a
    dither needs)."""
    emit = scope.emit

    def splat(value: int) -> ir.Value:
        return emit.broadcast_scalar(emit.int_scalar(value), t)

    def xorshift(h: ir.Value, shift: int) -> ir.Value:
        return emit.binary("stablehlo.xor", h,
                           emit.binary("stablehlo.shift_right_logical", h, splat(shift)))

    h = bits
    for dim in range(t.rank):
        index = emit.op("stablehlo.iota", [], [t], {
            "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).result
        h = emit.binary("stablehlo.multiply", emit.binary("stablehlo.xor", h, index),
                        splat(_HASH_MULTIPLIERS[dim % 3]))
    h = emit.binary("stablehlo.multiply", xorshift(h, 16), splat(_HASH_MULTIPLIERS[1]))
    return xorshift(h, 16)


def stochastic_grid(scope: Scope, data: ir.Value, storage: str) -> ir.Value:
    """f32 ``data`` rounded stochastically onto the grid of ``storage`` (its MLIR name), still
    in f32: a random integer below 2^dropped is added to the bits and the dropped bits
    cleared, so a value rounds up with probability equal to its distance from the value
    below. Exact for values in the storage type's normal range, and for bf16 (f32's exponent
    bits) for every finite value; the others (f16's and FP8's subnormals, values past their
    largest finite one, non-finite ones) are left for the convert to round to nearest. An
    unknown storage type leaves ``data`` as it is."""
    if storage not in _STORAGE:
        return data
    dropped, smallest, largest = _STORAGE[storage]
    emit, types = scope.emit, scope.state.types
    t = ir.RankedTensorType(data.type)
    int_type = types.with_element_type(t, ir.IntegerType.get_signless(32))
    bits = emit.unary("stablehlo.bitcast_convert", data, int_type)
    noise = emit.binary("stablehlo.and", _hash_bits(scope, bits, int_type),
                        emit.broadcast_scalar(emit.int_scalar((1 << dropped) - 1), int_type))
    mask = emit.broadcast_scalar(emit.int_scalar(-(1 << dropped)), int_type)
    dithered = emit.binary("stablehlo.and", emit.binary("stablehlo.add", bits, noise), mask)
    rounded = emit.unary("stablehlo.bitcast_convert", dithered, t)
    i1 = types.with_element_type(t, ir.IntegerType.get_signless(1))
    if smallest is None or largest is None:
        in_range = emit.op("stablehlo.is_finite", [data], [i1]).result
    else:
        magnitude = emit.unary("stablehlo.abs", data)
        in_range = emit.op("stablehlo.and", [
            emit.compare("GE", magnitude, emit.splat(smallest, t)),
            emit.compare("LE", magnitude, emit.splat(largest, t))], [i1]).result
    return emit.op("stablehlo.select", [in_range, rounded, data], [t]).result
