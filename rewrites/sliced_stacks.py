"""Stacks a loop fills one slice per trip keep one exponent per slice.

A scan's stacked outputs (the residuals its transpose reads back, the per-layer gradients of
stacked weights) are loop carries that enter as zeros and get one slice written per trip by a
``dynamic_update_slice``. With one scale for the whole stack, every slice is held at the
largest slice's scale: a LayerNorm's ``rsqrt(var)^3`` is 2^17 apart between the first layer
of a GPT (inputs of std 0.02) and the last, so the small slices land below f16's normal range
and lose their bits, and slices 2^40 apart flush to 0 (a scan GPT's gradients came out 3-90%
wrong in f16, its unrolled twin's 0.3%). So such a stack carries its data with an i32 vector
of exponents, one per slice along the written dimension: a write stores the slice's data as
it is and its exponent in the vector, a read of one slice (``dynamic_slice``) gets that
exponent back as its scale, and any other use sees the stack brought to one scale (the
largest exponent) on the spot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import attributes_of, is_scalable_type, terminator
from scalify_hlo.rewrites.program_constants import is_zero_fill
from scalify_hlo.rewrites.scalify_state import Scaled
from scalify_hlo.scale import Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scope import Scope

_DUS = "stablehlo.dynamic_update_slice"
_SLICE = "stablehlo.dynamic_slice"
_WIDE_RANGE = (ir.F32Type, ir.BF16Type)
# An exponent difference below this is a factor that no 16-bit data holds: clamped to it.
_MIN_SHIFT = -126


@dataclass(frozen=True)
class SlicedStack:
    """``data[..., i, ...] * 2^exponents[i]`` along ``dim``: data in the data type, exponents
    a rank-1 i32 tensor."""

    data: ir.Value
    exponents: ir.Value
    dim: int


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def written_dim(op: ir.Operation) -> int | None:
    """The one dimension along which a ``dynamic_update_slice`` writes a slice of size 1 into
    a larger stack (the others whole); None for any other update."""
    stack, update = _shape(op.operands[0]), _shape(op.operands[1])
    partial = [d for d, (n, m) in enumerate(zip(stack, update, strict=True)) if n != m]
    if len(partial) != 1 or update[partial[0]] != 1:
        return None
    return partial[0]


def stack_carries(scope: Scope, op: ir.Operation) -> dict[int, int]:
    """The carries of a while op that are sliced stacks, with their dimension: a zero-filled
    operand (or a sliced stack) that the body only writes one slice of per trip, or a sliced
    stack that the body passes on unchanged (the transposed scan reading the residuals).
    Only data of a narrow exponent range needs them: f32 and bf16 hold slices 2^200 apart
    at one scale, and per-slice exponents cost a few small ops per trip."""
    body = op.regions[1].blocks[0]
    cond = op.regions[0].blocks[0]
    returned = list(terminator(body).operands)
    found: dict[int, int] = {}
    for index, (operand, argument) in enumerate(zip(op.operands, body.arguments, strict=True)):
        if not is_scalable_type(operand.type) or isinstance(
                scope.state.dtype_of(argument), _WIDE_RANGE):
            continue
        outer = scope.stack_of(operand)
        if any(True for _ in cond.arguments[index].uses):
            continue
        value = returned[index]
        if value == argument and outer is not None:
            found[index] = outer.dim
            continue
        writer = value.owner
        if isinstance(writer, ir.Block) or writer.operation.name != _DUS:
            continue
        writer = writer.operation
        uses = list(argument.uses)
        if writer.operands[0] != argument or len(uses) != 1:
            continue
        dim = written_dim(writer)
        if dim is None:
            continue
        if outer is not None and outer.dim == dim:
            found[index] = dim
        elif outer is None and is_zero_fill(operand):
            found[index] = dim
    return found


def initial_exponents(scope: Scope, old: ir.Value, dim: int) -> ir.Value:
    """Exponents of a zero-filled stack: 0 for every slice (its zeros hold at any scale)."""
    count = _shape(old)[dim]
    t = ir.RankedTensorType.get([count], scope.state.types.i32)
    attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(scope.state.types.i32, 0))
    return scope.emit.op("stablehlo.constant", [], [t], {"value": attr}).result


def write_slice(scope: Scope, op: ir.Operation, stack: SlicedStack) -> None:
    """``dynamic_update_slice`` of one slice into a sliced stack: the slice's data as it is,
    its exponent into the vector."""
    emit, types = scope.emit, scope.state.types
    olds = list(op.operands)
    update = scope.scaled(olds[1])
    element = types.element(stack.data.type)
    data = emit.convert(update.data, element)
    indices = [scope.in_original_type(v) for v in olds[2:]]
    new_data = emit.op(_DUS, [stack.data, data, *indices], [stack.data.type]).result
    exponent = (emit.int_scalar(0) if update.any_scale else scope.exponent(update.scale))
    one = ir.RankedTensorType.get([1], types.i32)
    slot = emit.op("stablehlo.reshape", [exponent], [one]).result
    vector = emit.op(_DUS, [stack.exponents, slot, indices[stack.dim]],
                     [stack.exponents.type]).result
    scope.set_stack(op.results[0], SlicedStack(new_data, vector, stack.dim))
    scope.state.context.record(op.name, op.location, "runtime", "per-slice exponents")


def read_slice(scope: Scope, op: ir.Operation, stack: SlicedStack) -> bool:
    """``dynamic_slice`` of one slice of a sliced stack: its data, at its own exponent.
    False (nothing emitted) for a slice that spans several slices of the stack."""
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["slice_sizes"]))
    if sizes[stack.dim] != 1:
        return False
    emit, types = scope.emit, scope.state.types
    olds = list(op.operands)
    indices = [scope.in_original_type(v) for v in olds[1:]]
    result_type = types.with_element_type(op.results[0].type,
                                          types.element(stack.data.type))
    data = emit.op(_SLICE, [stack.data, *indices], [result_type], attributes_of(op)).result
    one = ir.RankedTensorType.get([1], types.i32)
    picked = emit.op(_SLICE, [stack.exponents, indices[stack.dim]], [one],
                     {"slice_sizes": ir.DenseI64ArrayAttr.get([1])}).result
    exponent = emit.op("stablehlo.reshape", [picked], [types.scalar_i32]).result
    scope.set(op.results[0], Scaled(data, Scale.dynamic(exponent)))
    scope.state.context.record(op.name, op.location, "runtime", "one slice's exponent")
    return True


def at_one_scale(scope: Scope, stack: SlicedStack) -> Scaled:
    """The stack at its largest exponent: each slice's data times 2^(its exponent - the
    largest), in f32, rounded once to the data type."""
    emit, types = scope.emit, scope.state.types
    f32 = types.f32
    vector_type = stack.exponents.type
    largest = emit.reduce_all(stack.exponents, "stablehlo.maximum", -(2**31))
    shift = emit.binary("stablehlo.subtract", stack.exponents,
                        emit.broadcast_scalar(largest, vector_type), vector_type)
    low = emit.broadcast_scalar(emit.int_scalar(_MIN_SHIFT), vector_type)
    high = emit.broadcast_scalar(emit.int_scalar(0), vector_type)
    shift = emit.op("stablehlo.clamp", [low, shift, high], [vector_type]).result
    biased = emit.binary("stablehlo.add", shift,
                         emit.broadcast_scalar(emit.int_scalar(127), vector_type), vector_type)
    bits = emit.binary("stablehlo.shift_left", biased,
                       emit.broadcast_scalar(emit.int_scalar(23), vector_type), vector_type)
    factors = emit.unary("stablehlo.bitcast_convert", bits,
                         ir.RankedTensorType.get(_shape(stack.exponents), f32))
    data_type = stack.data.type
    wide_type = types.with_element_type(data_type, f32)
    spread = emit.op("stablehlo.broadcast_in_dim", [factors], [wide_type],
                     {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([stack.dim])}).result
    wide = emit.binary("stablehlo.multiply", emit.convert(stack.data, f32), spread, wide_type)
    data = emit.convert(wide, types.element(data_type))
    return Scaled(data, Scale.dynamic(largest))
