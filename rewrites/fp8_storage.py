"""Training state stored in FP8 between steps (issue 19: ``moment-format``, ``square-format``).

The value is still ``data * scale`` with a power-of-two scale; only the data half's type is
FP8 (docs/scaled-signature.md). On exit the scale comes from the data's amax, which is put in
the format's top binade (E4M3FN: [128, 256), E5M2: [16384, 32768)) so that the tensor uses
the whole range down to the format's smallest subnormal (2^-9, 2^-16): 17 and 31 binades
below the largest element. Finite values are clamped to the largest finite value before the
convert (a convert to FP8 does not saturate: E4M3FN turns 465 into NaN), non-finite ones
stay what they are. On entry the data is widened to the type the step computes in, exactly,
and shifted towards unit scale (a static power of two moved into the scale).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.dtypes import FP8_MAX, FP8_TOP_EXPONENT
from scalify_hlo.rewrites.emitter import Emitter, element_type
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.stochastic_rounding import stochastic_grid
from scalify_hlo.scale import MAX_EXPONENT, MIN_EXPONENT, Scale

# How far entry moves the data down (into the scale): from the top binade to unit scale,
# but never so far that the format's smallest subnormal leaves f16 (2^-24): E5M2's 2^-16
# moved by 2^-14 would flush, by 2^-8 it is 2^-24.
_ENTRY_SHIFT = {"f8E4M3FN": 7, "f8E5M2": 8}


def from_fp8(scope: Scope, value: Scaled, inside: ir.Type) -> Scaled:
    """FP8 data as data of ``inside`` (the type the step computes the value in): every FP8
    value is exact in f16, bf16 and f32, and so is the static shift."""
    shift = _ENTRY_SHIFT[str(element_type(value.data))]
    data = scope.emit.scale_tensor_static(scope.emit.convert(value.data, inside), -shift)
    return Scaled(data, value.scale.shifted(shift))


def to_fp8(scope: Scope, value: Scaled, fmt: ir.Type, stochastic: bool = False) -> Scaled:
    """``value`` as FP8 data of format ``fmt`` with an f32 power-of-two scale: the data's
    amax in the format's top binade, rounded to nearest (or ``stochastic``), finite values
    clamped. The scale is an f32 normal power of two; where it saturates (a value beyond
    f32's range), the data takes what it cannot hold and clamps. An all-zero tensor takes the
    scale an all-zero argument gets (``ScaledArray.ZERO_SCALE`` under common-scale=max, else
    1); a non-finite amax leaves the scale as it is."""
    emit, types = scope.emit, scope.state.types
    i32, f32 = types.scalar_i32, types.f32
    name = str(fmt)
    wide = emit.convert(value.data, f32)
    t = wide.type
    amax = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum", 0.0)
    top = emit.exponent_of_pow2(amax)  # floor(log2(amax)); -127 for 0 and subnormals
    static = value.scale.exp if value.scale.is_static else None  # an update tail's result: 0
    total = scope.exponent(value.scale) if static is None else emit.int_scalar(static)

    def pick(condition: ir.Value, yes: ir.Value, no: ir.Value) -> ir.Value:
        return emit.op("stablehlo.select", [condition, yes, no], [i32]).result

    def add(a: ir.Value, b: ir.Value) -> ir.Value:
        return emit.binary("stablehlo.add", a, b, i32)

    i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
    normal = emit.op("stablehlo.and", [
        _int_compare(emit, "GT", top, emit.int_scalar(MIN_EXPONENT - 1), i1),
        _int_compare(emit, "LT", top, emit.int_scalar(MAX_EXPONENT + 1), i1)], [i1]).result
    zero = emit.compare("EQ", amax, emit.splat(0.0, types.scalar_f32))
    zero_exponent = MIN_EXPONENT if scope.state.common_scale_rule == "max" else 0
    measured = (add(top, emit.int_scalar(static - FP8_TOP_EXPONENT[name])) if static is not None
                else add(total, add(top, emit.int_scalar(-FP8_TOP_EXPONENT[name]))))
    scale_exponent = emit.clamp_exponent(pick(normal, measured, pick(
        zero, emit.int_scalar(zero_exponent), total)), MIN_EXPONENT, MAX_EXPONENT)
    shift = emit.clamp_exponent(emit.binary("stablehlo.subtract", total, scale_exponent, i32),
                                MIN_EXPONENT, MAX_EXPONENT - 1)
    data = emit.binary("stablehlo.multiply", wide, emit.broadcast_scalar(
        emit.pow2_of_exponent(shift), t), t)
    if stochastic:
        data = stochastic_grid(scope, data, name)
    limit = FP8_MAX[name]
    clamped = emit.op("stablehlo.clamp", [emit.scalar_f32(-limit), data,
                                          emit.scalar_f32(limit)], [t]).result
    finite = emit.op("stablehlo.is_finite", [data],
                     [types.with_element_type(t, ir.IntegerType.get_signless(1))]).result
    kept = emit.op("stablehlo.select", [finite, clamped, data], [t]).result
    return Scaled(emit.convert(kept, fmt),
                  Scale.dynamic_f32(emit.pow2_of_exponent(scale_exponent)))


def _int_compare(emit: Emitter, direction: str, a: ir.Value, b: ir.Value,
                 i1: ir.Type) -> ir.Value:
    """A signed compare of two rank-0 i32 values."""
    return emit.op("stablehlo.compare", [a, b], [i1], {
        "comparison_direction": ir.Attribute.parse(
            f"#stablehlo<comparison_direction {direction}>"),
        "compare_type": ir.Attribute.parse("#stablehlo<comparison_type SIGNED>")}).result
