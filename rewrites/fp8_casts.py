"""How one dot operand becomes FP8 (``fp8-dots``): its layout, its shift and its cast.

``cast_operand`` gives ``convert(clamp(-max, x * 2^e, max)) -> f8`` with ``e`` from the
operand's amax (``measures_amax``: under ``scaling=auto`` where the format does not hold
every power of two of the data's type), grouped to (batch..., contracting, free) or
transposed to it with the contracting dimension minor, as cuBLASLt's FP8 GEMMs take it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.dtypes import (
    EXACT_POW2_EXPONENTS,
    EXPONENT_RANGES,
    FP8_EXPONENT_RANGES,
    FP8_MAX,
    FP8_SMALLEST_EXPONENT,
    FP8_TOP_EXPONENT,
)
from scalify_hlo.rewrites.delayed_statistics import DelayedExponents
from scalify_hlo.rewrites.emitter import Emitter, element_type, float_type, shape_of

# Bounds on a shift of f32 data (and of any operand that is not of a data dtype, shifted in
# f32): its factor is a normal f32 power of two. Two such shifts can sum past f32's normals;
# fp8-dots undoes them as two factors then (``undo_range``).
MIN_SHIFT, MAX_SHIFT = EXPONENT_RANGES["f32"]


def free_dims(rank: int, batch: list[int], contracting: list[int]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def _contiguous(dims: list[int]) -> bool:
    return dims == list(range(dims[0], dims[0] + len(dims))) if dims else True


@dataclass(frozen=True)
class OperandLayout:
    """How one dot operand becomes (batch..., group, group): a permutation (identity when the
    dimensions already group, so no transpose is spent) and the grouped shape."""

    permutation: list[int]
    grouped_shape: list[int]
    contracting_position: int
    free_position: int

    @staticmethod
    def of(shape: list[int], batch: list[int], contracting: list[int]) -> OperandLayout:
        free = free_dims(len(shape), batch, contracting)
        in_place = (batch == list(range(len(batch))) and _contiguous(contracting)
                    and _contiguous(free))
        if in_place:
            permutation = list(range(len(shape)))
            groups = sorted([contracting, free], key=lambda g: g[0])
        else:  # batch leading, contracting minor ("TN"), as cuBLASLt wants
            permutation = batch + free + contracting
            groups = [free, contracting]
        grouped = [shape[d] for d in batch] + [math.prod(shape[d] for d in g) for g in groups]
        nb = len(batch)
        contracting_position = nb + (0 if groups[0] is contracting else 1)
        free_position = nb + (1 if groups[0] is contracting else 0)
        return OperandLayout(permutation, grouped, contracting_position, free_position)


def amax_shift(emit: Emitter, wide: ir.Value, fmt: str, low: int = MIN_SHIFT,
                high: int = MAX_SHIFT) -> ir.Value:
    """The rank-0 i32 ``e`` that brings the amax of ``wide`` (f32) into the format's top
    binade, within [``low``, ``high``]; 0 for an amax of 0, a subnormal, inf or NaN (the cast
    then sees the data as is)."""
    amax = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum", 0.0)
    exponent = emit.exponent_of_pow2(amax)  # floor(log2(amax)) for a normal amax
    i32 = emit.types.scalar_i32
    shift = emit.binary("stablehlo.subtract", emit.int_scalar(FP8_TOP_EXPONENT[fmt]),
                        exponent, i32)
    shift = emit.clamp_exponent(shift, low, high)
    normal = emit.binary("stablehlo.and", emit.compare("GT", exponent, emit.int_scalar(-127)),
                         emit.compare("LT", exponent, emit.int_scalar(128)))
    return emit.op("stablehlo.select", [normal, shift, emit.int_scalar(0)], [i32]).result


def measures_amax(scaling: str, fmt: str, data_dtype: str) -> bool:
    """Whether an operand of ``data_dtype`` takes a shift from its amax before the cast to
    ``fmt``: always under ``amax``, never under ``none``; under ``auto`` where the format
    does not hold every power of two the data type holds. That is every format and data
    type today: E5M2 has f16's normals but flushes its subnormals below 2^-16, and f16
    data sits there when a tensor's scale was set by entries that are gone (a gradient
    whose largest entries a ReLU mask zeroed: its kept entries came out 0 in E5M2, and the
    dot's whole gradient with them). The statistic costs a reduction per operand (3.4% more
    kernels on the H100 target policy's 1-layer GPT)."""
    if scaling != "auto":
        return scaling == "amax"
    data_low, data_high = EXACT_POW2_EXPONENTS[data_dtype]
    return FP8_SMALLEST_EXPONENT[fmt] > data_low or FP8_EXPONENT_RANGES[fmt][1] < data_high


def shift_range(data: str) -> tuple[int, int]:
    """The shifts an operand of ``data`` dtype may take: the powers of two it holds as
    normals, because the shift is applied in the data's own type (``times_pow2``). For bf16
    and f32 that is f32's whole range: bf16 data with no rescale point grows past 2^74 (a
    scan's squared outputs near f32's largest), and a shift bound of 60 left it 2^50 above
    the format's largest value, every element clamped to it. For f16 the bound costs
    nothing: an amax under 2^-7 keeps its data below E4M3FN's top binade, but every f16
    value is a multiple of 2^-24, and 2^-24 * 2^15 is E4M3FN's smallest subnormal, 2^-9
    (E5M2's, 2^-16, is lower still), so no f16 value the wider shift would have kept
    flushes to zero, and the f16 normals land on E4M3FN normals, where the cast rounds as
    it would anyway."""
    return EXPONENT_RANGES.get(data, (MIN_SHIFT, MAX_SHIFT))


def undo_range(*data: str) -> tuple[int, int]:
    """The exponents the undo of the shifts of operands of ``data`` dtypes can take."""
    ranges = [shift_range(dtype) for dtype in data]
    return -sum(high for _, high in ranges), -sum(low for low, _ in ranges)


def times_pow2(emit: Emitter, value: ir.Value, shift: ir.Value) -> ir.Value:
    """``value * 2^shift`` in the value's own type: exact (the shift is within the type's
    normal powers, and the product within the FP8 format's range or clamped after), and a
    chain of its own from the data to the cast. Multiplying ``convert(x, f32)`` instead
    shares that convert with every other f32 use of ``x`` (a weight's Adam update), and XLA
    then gives them all the layout the GEMM wants for its operand (contracting dimension
    minor): on an H100 target the update ran transposed, a transpose kernel per weight,
    moment and result (2-layer GPT, delayed statistics: 246 -> 205 fusions from this alone)."""
    factor = emit.pow2_of_exponent(shift)
    element = element_type(value)
    if element != emit.types.f32:
        factor = emit.convert(factor, element, emit.types.scalar_f32)
    return emit.binary("stablehlo.multiply", value, emit.broadcast_scalar(factor, value.type),
                       value.type)


def cast_operand(emit: Emitter, value: ir.Value, fmt: str, layout: OperandLayout,
                  scaling: str = "none", delayed: DelayedExponents | None = None
                  ) -> tuple[ir.Value, ir.Value | None]:
    """The FP8 operand, and (when it ``measures_amax``) the i32 exponent its data was
    multiplied by: with ``delayed``, the one the previous call measured (in ``use`` mode).
    A tensor cast again in the same format (a weight for its forward and its backward dot)
    takes the point of its first cast (``DelayedExponents.by_operand``): both casts are then
    the same ops (one all-gather of a sharded weight, where two points gave two differently
    scaled copies)."""
    limit = FP8_MAX[fmt]
    shift = None
    data = str(element_type(value))
    if measures_amax(scaling, fmt, data):
        f32 = emit.types.f32
        key = (value, fmt)
        shift = delayed.by_operand.get(key) if delayed is not None else None
        if shift is None:
            low, high = shift_range(data)
            shift = amax_shift(emit, emit.convert(value, f32), fmt, low, high)
            if delayed is not None:
                given = delayed.exponent(emit, shift, held=False)
                if given is not shift:  # any vector a caller passes: keep the factors normal
                    shift = emit.clamp_exponent(given, low, high)
                delayed.by_operand[key] = shift
        if data not in EXPONENT_RANGES:  # not a data dtype: shifted in f32
            value = emit.convert(value, f32)
        value = times_pow2(emit, value, shift)
    scalar = ir.RankedTensorType.get([], element_type(value))
    low = emit.splat(-limit, scalar)
    high = emit.splat(limit, scalar)
    clamped = emit.op("stablehlo.clamp", [low, value, high], [value.type]).result
    f8_type = float_type(fmt)
    f8 = emit.convert(clamped, f8_type)
    shape = shape_of(value)
    if layout.permutation != list(range(len(shape))):
        permuted = [shape[d] for d in layout.permutation]
        f8 = emit.op("stablehlo.transpose", [f8], [ir.RankedTensorType.get(permuted, f8_type)],
                     {"permutation": ir.DenseI64ArrayAttr.get(layout.permutation)}).result
    if layout.grouped_shape != shape_of(f8):
        f8 = emit.op("stablehlo.reshape", [f8], [ir.RankedTensorType.get(
            layout.grouped_shape, f8_type)]).result
    return f8, shift
