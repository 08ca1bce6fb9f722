"""``slice-statistics``: the statistics of the slices of one tensor, taken in one reduction.

A fused projection cut into pieces (a transformer's ``qkv`` output sliced into q, k and v)
gives each piece a statistic of its own when the pieces are FP8 operands: the amax of
``abs(convert(slice(x)))``. XLA:TPU runs those reductions of slices as a kernel of their
own after the projection, where a reduction of the whole tensor fuses into the projection's
kernel as one more output (tpu7x, 2-layer GPT, target policy: one kernel fewer per layer,
391 -> 389 fusions, 769,337 -> 768,129 estimated cycles for one layer's q, k and v by hand).

So statistics of equal slices that tile one dimension of a tensor become one reduction of
the tensor with that dimension split in two, ``[..., n*s, ...] -> [..., n, s, ...]``,
reduced over every dimension but the ``n`` one: a vector with each slice's value, the
same maxima (sums add the same elements in another order, which changes their rounding in
the last bits). Only where the slices cover the whole dimension, so the one reduction
reads nothing the separate ones did not. The elementwise ops between a slice and its
reduction (its prelude: ``convert``, ``abs``) are applied to the whole tensor instead, and
reshapes and transposes in it are dropped (a full reduction does not see the order).

``simplify`` runs it where it does not group statistics (``group-statistics=false``, the TPU
targets): grouping takes each slice's statistic into a row reduction already.
"""

from __future__ import annotations

from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter, attributes_of, ops_named
from scalify_hlo.rewrites.group_statistics import full_reduction
from scalify_hlo.rewrites.member_reduce import combiner_region
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register

# Ops a full reduction does not see: they only reorder the elements.
_REORDER = frozenset({"stablehlo.reshape", "stablehlo.transpose"})
_ELEMENTWISE = ops_with(Trait.ELEMENTWISE)


@dataclass
class _SliceStatistic:
    reduce: ir.Operation
    inputs: list[ir.Operation]  # the ops from the reduce's input up to the slice, its last
    chunk: int  # which piece of the sliced dimension: start // size

    @property
    def prelude(self) -> list[ir.Operation]:
        """The elementwise ops of ``inputs``, from the slice's user down."""
        return [op for op in reversed(self.inputs[:-1]) if op.name not in _REORDER]


def _unary_elementwise(op: ir.Operation) -> bool:
    """One operand, one result of its shape (a bitcast_convert between widths is not)."""
    return (op.name in _ELEMENTWISE and len(op.operands) == 1 and len(op.results) == 1
            and ir.RankedTensorType(op.operands[0].type).shape
            == ir.RankedTensorType(op.results[0].type).shape)


def _piece(reduce: ir.Operation) -> tuple[tuple, _SliceStatistic] | None:
    """The key that the statistics of one tensor's pieces share (the sliced tensor, the
    sliced dimension and piece size, the reduction's kind and the prelude's ops and element
    types) and this one's piece; None where the input is not a piece of a tensor."""
    kind = full_reduction(reduce)
    if kind is None:
        return None
    inputs: list[ir.Operation] = []
    value = reduce.operands[0]
    while True:
        owner = value.owner
        if not isinstance(owner, ir.OpView):  # a block argument
            return None
        op = owner.operation
        inputs.append(op)
        if op.name == "stablehlo.slice":
            break
        if op.name not in _REORDER and not _unary_elementwise(op):
            return None
        value = op.operands[0]
    source_type = ir.RankedTensorType(op.operands[0].type)
    if not source_type.has_static_shape:
        return None
    starts = list(ir.DenseI64ArrayAttr(op.attributes["start_indices"]))
    limits = list(ir.DenseI64ArrayAttr(op.attributes["limit_indices"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    shape = source_type.shape
    cut = [d for d in range(len(shape)) if (starts[d], limits[d]) != (0, shape[d])]
    if len(cut) != 1 or any(stride != 1 for stride in strides):
        return None
    dimension = cut[0]
    size = limits[dimension] - starts[dimension]
    if starts[dimension] % size or shape[dimension] % size:
        return None
    piece = _SliceStatistic(reduce, inputs, starts[dimension] // size)
    signature = tuple((p.name, str(p.results[0].type.element_type),
                       tuple(sorted((k, str(v)) for k, v in attributes_of(p).items())))
                      for p in piece.prelude)
    return (reduce.block, op.operands[0], dimension, size, kind, signature), piece


def _take_together(members: list[_SliceStatistic], source: ir.Value, dimension: int,
                   size: int, combiner: str) -> None:
    """One reduction of ``source`` split at ``dimension`` in pieces of ``size``, before the
    first member; each member's result becomes its element of the vector."""
    first = members[0].reduce
    emit = Emitter(ir.InsertionPoint(first), first.location)
    source_type = ir.RankedTensorType(source.type)
    shape = list(source_type.shape)
    split = shape[:dimension] + [shape[dimension] // size, size] + shape[dimension + 1:]
    value = emit.unary("stablehlo.reshape", source,
                       ir.RankedTensorType.get(split, source_type.element_type))
    for op in members[0].prelude:
        element = ir.RankedTensorType(op.results[0].type).element_type
        value = emit.op(op.name, [value], [ir.RankedTensorType.get(split, element)],
                        attributes_of(op)).result
    element = ir.RankedTensorType(value.type).element_type
    kept = [d for d in range(len(split)) if d != dimension]
    vector = emit.op("stablehlo.reduce", [value, first.operands[1]],
                     [ir.RankedTensorType.get([split[dimension]], element)],
                     {"dimensions": ir.DenseI64ArrayAttr.get(kept)}, regions=1)
    combiner_region(vector, combiner, element)
    elements = [emit.element(vector.result, member.chunk) for member in members]
    for member, value in zip(members, elements, strict=True):  # the insertion point is
        member.reduce.results[0].replace_all_uses_with(value)  # the first: erased last
    for member in members:
        member.reduce.erase()
        for op in member.inputs:  # up to the slice, while nothing else uses them
            if next(iter(op.results[0].uses), None) is not None:
                break
            op.erase()


def slice_statistics(module: ir.Module) -> int:
    """Take the statistics of the pieces of each tensor together; returns how many
    reductions were merged."""
    groups: dict[tuple, list[_SliceStatistic]] = {}
    for reduce in ops_named(module.operation, "stablehlo.reduce"):
        found = _piece(reduce.operation)
        if found is not None:
            groups.setdefault(found[0], []).append(found[1])
    merged = 0
    # Each list is in block order: the walk visits one block's ops in order.
    for (_, source, dimension, size, kind, _), members in groups.items():
        pieces = ir.RankedTensorType(source.type).shape[dimension] // size
        if len(members) < 2 or sorted(m.chunk for m in members) != list(range(pieces)):
            continue
        _take_together(members, source, dimension, size, kind[0])
        merged += len(members)
    return merged


@register("slice-statistics",
          "Take the statistics (full max/sum reductions) of slices that tile one dimension "
          "of a tensor as one reduction of the tensor, one value per slice, which XLA:TPU "
          "fuses into the kernel that makes the tensor (part of simplify where it does not "
          "group statistics).")
class SliceStatistics(ModulePass):
    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("slice-statistics.merged", slice_statistics(module))
