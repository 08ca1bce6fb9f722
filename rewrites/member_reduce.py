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
    element = ir.RankedTensorType(per_row.type).element_type
    total, members = sum(counts), len(counts)
    i32 = ir.IntegerType.get_signless(32)
    table = ir.RankedTensorType.get([members, total], i32)
    firsts = np.cumsum([0, *counts[:-1]])

    def by_member(values: np.ndarray) -> ir.Value:
        column = emit.constant(np.asarray(values), ir.RankedTensorType.get([members], i32))
        return emit.op("stablehlo.broadcast_in_dim", [column], [table],
                       {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([0])}).result

    row = emit.op("stablehlo.iota", [], [table], {
        "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).result
    own = emit.binary("stablehlo.and", emit.compare("GE", row, by_member(firsts)),
                      emit.compare("LT", row, by_member(firsts + np.asarray(counts))))
    values_type = ir.RankedTensorType.get([members, total], element)
    spread = emit.op("stablehlo.broadcast_in_dim", [per_row], [values_type],
                     {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([1])}).result
    kept = emit.op("stablehlo.select", [own, spread, emit.broadcast_scalar(pad, values_type)],
                   [values_type]).result
    reduced = emit.op("stablehlo.reduce", [kept, pad],
                      [ir.RankedTensorType.get([members], element)],
                      {"dimensions": ir.DenseI64ArrayAttr.get([1])}, regions=1)
    combiner_region(reduced, combiner, element)
    return reduced.result


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
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    stacked_rows = []
    for per_row, group_counts in zip(per_rows, counts, strict=True):
        total = sum(group_counts)
        if total < longest:
            per_row = emit.op("stablehlo.pad", [per_row, pad],
                              [ir.RankedTensorType.get([longest], element)], {
                                  "edge_padding_low": ir.DenseI64ArrayAttr.get([0]),
                                  "edge_padding_high": ir.DenseI64ArrayAttr.get(
                                      [longest - total]),
                                  "interior_padding": ir.DenseI64ArrayAttr.get([0])}).result
        stacked_rows.append(emit.op("stablehlo.reshape", [per_row],
                                    [ir.RankedTensorType.get([1, longest], element)]).result)
    stacked = emit.op("stablehlo.concatenate", stacked_rows,
                      [ir.RankedTensorType.get([groups, longest], element)],
                      {"dimension": ir.IntegerAttr.get(i64, 0)}).result
    firsts = np.zeros((groups, slots), np.int64)
    ends = np.zeros((groups, slots), np.int64)  # an unused slot keeps no row
    for group, group_counts in enumerate(counts):
        starts = np.cumsum([0, *group_counts[:-1]])
        firsts[group, :len(group_counts)] = starts
        ends[group, :len(group_counts)] = starts + np.asarray(group_counts)
    table = ir.RankedTensorType.get([groups, slots, longest], i32)

    def by_slot(values: np.ndarray) -> ir.Value:
        grid = emit.constant(values, ir.RankedTensorType.get([groups, slots], i32))
        return emit.op("stablehlo.broadcast_in_dim", [grid], [table],
                       {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([0, 1])}).result

    row = emit.op("stablehlo.iota", [], [table],
                  {"iota_dimension": ir.IntegerAttr.get(i64, 2)}).result
    own = emit.binary("stablehlo.and", emit.compare("GE", row, by_slot(firsts)),
                      emit.compare("LT", row, by_slot(ends)))
    values_type = ir.RankedTensorType.get([groups, slots, longest], element)
    spread = emit.op("stablehlo.broadcast_in_dim", [stacked], [values_type],
                     {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([0, 2])}).result
    kept = emit.op("stablehlo.select", [own, spread, emit.broadcast_scalar(pad, values_type)],
                   [values_type]).result
    reduced = emit.op("stablehlo.reduce", [kept, pad],
                      [ir.RankedTensorType.get([groups, slots], element)],
                      {"dimensions": ir.DenseI64ArrayAttr.get([2])}, regions=1)
    combiner_region(reduced, combiner, element)
    flat = emit.op("stablehlo.reshape", [reduced.result],
                   [ir.RankedTensorType.get([groups * slots], element)]).result
    return [emit.op("stablehlo.slice", [flat],
                    [ir.RankedTensorType.get([len(group_counts)], element)], {
                        "start_indices": ir.DenseI64ArrayAttr.get([group * slots]),
                        "limit_indices": ir.DenseI64ArrayAttr.get(
                            [group * slots + len(group_counts)]),
                        "strides": ir.DenseI64ArrayAttr.get([1])}).result
            for group, group_counts in enumerate(counts)]
