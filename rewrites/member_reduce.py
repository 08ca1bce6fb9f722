"""The second stage of ``group-statistics``: the row results of grouped statistics
combined into one value per member.

A group's first stage reduces every row of its members' concatenated rows; a member with
more than one row then needs its own rows combined. That is one masked reduce: the row
vector spread to a row per member, each keeping the member's own rows (from an iota and its
first and last row) and the neutral value elsewhere, reduced along the rows. Groups taken
at one point share one such reduce (their row vectors padded to the longest and stacked):
XLA:GPU runs a reduce as a kernel, and a delayed step takes all its statistics at its end
(GPT-2-small: 24 groups, 24 second-stage kernels before).
"""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter


def combiner_region(op: ir.Operation, combiner: str, element: ir.Type) -> None:
    scalar = ir.RankedTensorType.get([], element)
    block = op.regions[0].blocks.append(scalar, scalar)
    inner = Emitter(ir.InsertionPoint(block), op.location)
    inner.op("stablehlo.return", [inner.binary(combiner, block.arguments[0],
                                               block.arguments[1])], [])


def pad_to(emit: Emitter, vector: ir.Value, pad: ir.Value, length: int) -> ir.Value:
    """A rank-1 ``vector`` padded at its end with ``pad`` to ``length`` elements."""
    size = ir.RankedTensorType(vector.type).shape[0]
    if size == length:
        return vector
    element = ir.RankedTensorType(vector.type).element_type
    return emit.op("stablehlo.pad", [vector, pad],
                   [ir.RankedTensorType.get([length], element)], {
                       "edge_padding_low": ir.DenseI64ArrayAttr.get([0]),
                       "edge_padding_high": ir.DenseI64ArrayAttr.get([length - size]),
                       "interior_padding": ir.DenseI64ArrayAttr.get([0])}).result


def _own_rows_reduced(emit: Emitter, rows: ir.Value, rows_dims: list[int],
                      firsts: np.ndarray, ends: np.ndarray, pad: ir.Value,
                      combiner: str) -> ir.Value:
    """The masked reduce: ``rows`` (row results along its last dimension) spread to one
    row per slot of ``firsts``' shape (``rows_dims``: where its dimensions go), each slot
    keeping its rows ``firsts`` to ``ends`` (from an iota along the rows) and ``pad``
    elsewhere, reduced along the rows to ``firsts``' shape."""
    rows_type = ir.RankedTensorType(rows.type)
    element, length = rows_type.element_type, rows_type.shape[-1]
    slots = list(firsts.shape)
    i32 = ir.IntegerType.get_signless(32)
    table = ir.RankedTensorType.get([*slots, length], i32)
    by_slot_dims = ir.DenseI64ArrayAttr.get(list(range(len(slots))))

    def by_slot(values: np.ndarray) -> ir.Value:
        grid = emit.constant(values, ir.RankedTensorType.get(slots, i32))
        return emit.op("stablehlo.broadcast_in_dim", [grid], [table],
                       {"broadcast_dimensions": by_slot_dims}).result

    row = emit.op("stablehlo.iota", [], [table], {
        "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                             len(slots))}).result
    own = emit.binary("stablehlo.and", emit.compare("GE", row, by_slot(firsts)),
                      emit.compare("LT", row, by_slot(ends)))
    values_type = ir.RankedTensorType.get([*slots, length], element)
    spread = emit.op("stablehlo.broadcast_in_dim", [rows], [values_type],
                     {"broadcast_dimensions": ir.DenseI64ArrayAttr.get(rows_dims)}).result
    kept = emit.op("stablehlo.select", [own, spread, emit.broadcast_scalar(pad, values_type)],
                   [values_type]).result
    reduced = emit.op("stablehlo.reduce", [kept, pad], [ir.RankedTensorType.get(slots, element)],
                      {"dimensions": ir.DenseI64ArrayAttr.get([len(slots)])}, regions=1)
    combiner_region(reduced, combiner, element)
    return reduced.result


def per_member(emit: Emitter, per_row: ir.Value, counts: list[int], pad: ir.Value,
               combiner: str) -> ir.Value:
    """The row results combined into one value per member (``counts``: each member's rows,
    in order): the row vector itself where every member is one row, else one masked
    reduce: the row vector broadcast to a row per member, each row keeping the member's own
    row results (its first row to its last, from an iota) and the neutral value elsewhere,
    reduced along the rows. Elementwise ops and a reduce: one kernel on XLA:GPU and TPU. A
    scatter into a vector of neutral values took two on XLA:GPU (one filling the operand);
    a gather of each member's rows cost XLA:TPU's cost model 10% more cycles."""
    if max(counts) == 1:
        return per_row
    firsts = np.cumsum([0, *counts[:-1]])
    return _own_rows_reduced(emit, per_row, [1], firsts, firsts + np.asarray(counts), pad,
                             combiner)


def per_member_of_groups(emit: Emitter, per_rows: list[ir.Value], counts: list[list[int]],
                         pad: ir.Value, combiner: str) -> list[ir.Value]:
    """The row results of several groups taken at one point combined into one value per
    member in one masked reduce (one kernel where a reduce each was one kernel each): the
    groups' row vectors padded to the longest and stacked, each spread to a row per member
    slot that keeps the member's own row results, reduced along the rows. Returns each
    group's vector of per-member values (slices of one)."""
    if len(per_rows) == 1:
        return [per_member(emit, per_rows[0], counts[0], pad, combiner)]
    element = ir.RankedTensorType(per_rows[0].type).element_type
    groups, slots = len(per_rows), max(len(c) for c in counts)
    longest = max(sum(c) for c in counts)
    stacked = emit.op("stablehlo.concatenate", [
        emit.op("stablehlo.reshape", [pad_to(emit, per_row, pad, longest)],
                [ir.RankedTensorType.get([1, longest], element)]).result
        for per_row in per_rows], [ir.RankedTensorType.get([groups, longest], element)],
        {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
    firsts = np.zeros((groups, slots), np.int64)
    ends = np.zeros((groups, slots), np.int64)  # an unused slot keeps no row
    for group, group_counts in enumerate(counts):
        starts = np.cumsum([0, *group_counts[:-1]])
        firsts[group, :len(group_counts)] = starts
        ends[group, :len(group_counts)] = starts + np.asarray(group_counts)
    reduced = _own_rows_reduced(emit, stacked, [0, 2], firsts, ends, pad, combiner)
    flat = emit.op("stablehlo.reshape", [reduced],
                   [ir.RankedTensorType.get([groups * slots], element)]).result
    return [emit.slice(flat, group * slots, group * slots + len(group_counts))
            for group, group_counts in enumerate(counts)]
