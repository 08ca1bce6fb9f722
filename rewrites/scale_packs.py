"""Scalars packed into i32 vectors behind one ``optimization_barrier``, read back by static
slices: how ``materialize-scales`` hands a scale epoch's values to their users (a vector is
one buffer that XLA reads, where it would copy a scalar chain into every user).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.errors import PipelineError
from scalify_hlo.rewrites.emitter import Emitter

# Scalars per packed vector by default (the pass's ``pack-width``; see loop_scales.PACK:
# XLA:CPU runs a concatenate of more operands as a kernel per operand). XLA:GPU runs one of up
# to about 80 scalars as one kernel (group_statistics.GROUP), so GPU targets pack wider.
PACK = 8


def _as_i32(emit: Emitter, value: ir.Value) -> ir.Value:
    """A scalar as an i32 for the epoch's vector: a float by its bits (exact, and an integer
    is never flushed as a subnormal would be; a 16-bit float's bits widened as an i16), a
    predicate as 0 or 1."""
    element = value.type.element_type
    i32 = emit.types.scalar_i32
    if element == emit.types.i32:
        return value
    if element == emit.types.f32:
        return emit.unary("stablehlo.bitcast_convert", value, i32)
    if isinstance(element, _HALF_FLOATS):
        bits = emit.unary("stablehlo.bitcast_convert", value, _scalar_i16())
        return emit.unary("stablehlo.convert", bits, i32)
    return emit.unary("stablehlo.convert", value, i32)


def _from_i32(emit: Emitter, value: ir.Value, t: ir.Type) -> ir.Value:
    element = t.element_type
    if element == emit.types.i32:
        return value
    if element == emit.types.f32:
        return emit.unary("stablehlo.bitcast_convert", value, t)
    if isinstance(element, _HALF_FLOATS):
        bits = emit.unary("stablehlo.convert", value, _scalar_i16())
        return emit.unary("stablehlo.bitcast_convert", bits, t)
    return emit.unary("stablehlo.convert", value, t)


_HALF_FLOATS = (ir.F16Type, ir.BF16Type)


def _scalar_i16() -> ir.RankedTensorType:
    return ir.RankedTensorType.get([], ir.IntegerType.get_signless(16))


def packable(value: ir.Value) -> bool:
    """i32, f32, f16, bf16 and i1 scalars: what an i32 vector holds exactly (an FP8 operand's
    shift is a factor in the data's own type)."""
    if value.type.rank != 0:  # an element read, tensor<1xT>: its reshape is packed instead
        return False
    element = value.type.element_type
    if isinstance(element, (ir.F32Type, *_HALF_FLOATS)):
        return True
    return isinstance(element, ir.IntegerType) and element.width in (1, 32)


def _returned(value: ir.Value) -> bool:
    """Whether the function returns ``value``. Returned values go first in a pack: XLA:GPU
    writes the returned elements of one vector in one kernel, but each vector's in another
    (the 1-layer GPT's delayed step on an H100: 3 kernels for its returned scales, 1 when
    they are together)."""
    return any(use.owner.operation.name == "func.return" for use in value.uses)


def pack_scalars(emit: Emitter, values: list[ir.Value], width: int = PACK) -> list[ir.Value]:
    """``values`` as i32 vectors of at most ``width`` behind one barrier, taken back as
    scalars (static slices), the returned values first. A vector has at least two elements
    (XLA folds the slice of one of one back into its scalar). A returned f32 is sliced from
    one f32 view of its vector, not bitcast after its slice: XLA:GPU fuses the view into
    the slices and writes a vector's returned scales in one kernel, where a bare slice
    behind the barrier is a kernel of its own (the 1-layer GPT's delayed step for an H100:
    111 -> 92 kernels), and the vector's other returned values join them (Adam's count: 91).
    Other users keep the bitcast after the slice, and a vector without a returned f32 gets
    no view: XLA:TPU runs a view as a kernel of its own (+6% cycles on the 2-layer GPT on
    v6e with every f32 read through one, +0.4% with a view for Adam's count alone).
    Vectors of one length (the last padded) saved XLA:GPU a kernel on the 1-layer GPT and
    cost it 9 on GPT-2-small (its scalars for the FP8 GEMMs, fused with the pack's kernel
    or not, by the packs' shapes): not taken."""
    returned = [_returned(value) for value in values]  # each value's uses walked once
    order = sorted(range(len(values)), key=lambda position: not returned[position])
    chunks = [order[start:start + width] for start in range(0, len(order), width)]
    vectors = [emit.vector_of([_as_i32(emit, values[p]) for p in chunk], at_least_two=True)
               for chunk in chunks]
    barrier = emit.op("stablehlo.optimization_barrier", vectors, [v.type for v in vectors])
    taken: list[ir.Value] = list(values)
    for vector, chunk in zip(barrier.results, chunks, strict=True):
        as_f32 = None  # the vector's bits as f32, where it holds a returned f32
        if any(returned[p] and values[p].type.element_type == emit.types.f32 for p in chunk):
            as_f32 = emit.unary("stablehlo.bitcast_convert", vector, ir.RankedTensorType.get(
                ir.RankedTensorType(vector.type).shape, emit.types.f32))
        for index, position in enumerate(chunk):
            t = values[position].type
            if as_f32 is None or not returned[position]:
                taken[position] = _from_i32(emit, emit.element(vector, index), t)
                continue
            element = emit.element(as_f32, index)
            if t.element_type != emit.types.f32:  # back to its bits, in the same kernel
                element = _from_i32(emit, emit.unary("stablehlo.bitcast_convert", element,
                                                     emit.types.scalar_i32), t)
            taken[position] = element
    return taken


def check_pack_width(width: int) -> None:
    """A pack holds at least two scalars (see ``pack_scalars``)."""
    if width < 2:
        raise PipelineError(f"pack-width must be at least 2, not {width}")
