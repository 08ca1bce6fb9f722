"""``group-statistics``: a block's run-time statistics, reduced together in one kernel.

Every run-time scale comes from a statistic: the maximum magnitude (or the sum of squares)
of a whole tensor, a ``stablehlo.reduce`` over every dimension to a scalar. XLA:GPU runs
each such reduction as a kernel of its own, two for a large tensor (a partial reduction,
then a final one), and on a sharded step each one is a scalar all-reduce; a rescaled GPT
step takes hundreds of them (rescale points, the FP8 operands' amaxes, the boundary
encodings), and they were most of the kernels the rewrite added.

Statistics that can be taken at the same point of a block are taken as one: each tensor
flattened and cut into rows of ``ROW`` elements (its last row padded with the reduction's
neutral value), the rows of every tensor of the group concatenated, one reduce of each
row, and one more reduce of the row results masked per tensor (``member_reduce.py``). XLA
fuses the pads, reshapes and the concatenate into the row reduction, and the mask into the
second, so a group is two kernels whatever its size (one where every tensor fits in a row;
at most ``GROUP`` tensors: XLA:GPU splits a fusion with more operands), and the groups of
one point share their second kernel; the scalars are slices of the vectors, read where they
are used.

Where: a statistic can be taken once the tensors it reads exist (the operands of its
elementwise prelude, ``abs(convert(x))`` say, which is cloned beside the group as XLA would
clone it into the group's kernel) and must be taken before its first use other than the
scalar and elementwise ops that apply it, which wait below the group (a rescaled gradient is
not needed before the update). Those intervals are covered by the fewest points (sort by
first use, take the earliest, group everything available by then whose inputs do not wait on
another member: the greedy cover is optimal), and each group goes just before its point.
Max statistics are exact in any order; sums are regrouped, which changes their rounding in
the last bits (a scale is a power of two rounded from it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import Emitter, ops_named
from scalify_hlo.rewrites.member_reduce import (
    combiner_region,
    pad_to,
    per_member_of_groups,
)
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.regions import combiner as body_combiner
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register
from scalify_hlo.rewrites.scale_epochs import _Epochs, move_to_epochs
from scalify_hlo.symbols import partition_count

# Elements per row of the concatenated rows (a power of two: XLA's row reduction tiles it).
ROW = 2048
# Tensors per group: XLA:GPU fuses the concatenate of up to about 80 operands into the row
# reduction and splits a larger one (measured on an H100 target: 148 tensors in one group
# took 88 kernels, in groups of 64 six).
GROUP = 64
# Groups of one point and kind whose second stages (the masked per-member reduce) are one
# reduce: XLA:GPU fuses their padded row vectors into it (GPT-2-small's delayed step takes
# 24 groups at its end, 24 second-stage kernels before).
SECOND_STAGE = 32
# The reducers this pass groups, by the op in their body, with the value a padded element
# takes (the reduction's neutral value; a max reduce's own init, which it combines with).
_COMBINERS = ("stablehlo.maximum", "stablehlo.add")
# Ops of a statistic's elementwise prelude (abs, convert, multiply, ...), cloned beside its
# group, and how many of them at most: the chain from the last reduction, dot or loop.
_PRELUDE = ops_with(Trait.HOISTABLE) | {"stablehlo.broadcast_in_dim", "stablehlo.reshape",
                                         "stablehlo.transpose"}
PRELUDE = 64


@dataclass
class _Statistic:
    """One full reduction: the op, its combiner, its init, the ops of its prelude (in
    block order) and the interval of positions where it can be taken."""

    reduce: ir.Operation
    combiner: str
    init: float
    prelude: list[ir.Operation]
    reads: list[int]  # positions of the prelude's ops and of the ops whose results it reads
    input: ir.Value
    available: int  # position of the last op whose result it reads (-1: none in the block)
    needed: int  # position of the first op other than its scalar chain that uses it
    chain: list[tuple[int, ir.Operation]]  # the ops before ``needed`` that use it and can
    # wait (they follow its group), with their positions (an op's hash changes with its
    # operands: it cannot stay a dict key while groups replace uses)


def full_reduction(op: ir.Operation) -> tuple[str, float] | None:
    """(combiner, init) of a reduce of one float tensor over every dimension to a scalar
    whose init is the combiner's neutral value for padding (any init for max, 0 for add)."""
    if op.name != "stablehlo.reduce" or len(op.operands) != 2 or len(op.results) != 1:
        return None
    input_type = op.operands[0].type
    if not (isinstance(input_type, ir.RankedTensorType) and input_type.rank >= 1
            and input_type.has_static_shape
            and isinstance(input_type.element_type, ir.FloatType)):
        return None
    dimensions = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if sorted(dimensions) != list(range(input_type.rank)):
        return None
    combiner = body_combiner(op)
    init = splat_constant_value(op.operands[1])
    if combiner not in _COMBINERS or init is None or (
            combiner == "stablehlo.add" and init != 0.0):
        return None
    return combiner, init


class _Block:
    """The statistics of one block and the positions of its ops, from the analysis of
    ``move_to_epochs`` (made with its users): its ops, chain flags, result positions and
    users in the order the moves left the block in. This saves a listing of the block and,
    per value, a query of its owner or its uses through the bindings, which build an op view
    for each (per op of a step)."""

    def __init__(self, epochs: _Epochs, order: list[int]) -> None:
        self.ops = [epochs.ops[at] for at in order]  # order: moved_order()
        self._can_wait: list[bool | None] = [True if epochs.chain[at] else None
                                             for at in order]  # by position
        self._old_position = order  # position now -> position as analysed
        self._new_position = [0] * len(order)  # position as analysed -> position now
        for new, old in enumerate(order):
            self._new_position[old] = new
        self._value_position = epochs.position  # -> position as analysed
        self._users = epochs.users  # by position as analysed

    def first_use(self, at: int) -> tuple[int, list[tuple[int, ir.Operation]]]:
        """The position of the first op that needs the result of the op at ``at`` now, and
        the ops of this block before it that use it and can wait: the scalar ops that
        compute scales from it (the exponent of a statistic, its ``2^-e``) and the
        elementwise ops that apply them (a rescaled gradient's data is not needed before
        the update), in block order.

        The waiting ops are visited in block order and the walk stops at the first op that
        needs the value: a use follows its definition in a block, so nothing past that op
        can come before it. (A full walk of the waiting ops visits every scale computed
        downstream of the statistic, most of a backward pass: quadratic in the step.)"""
        first = len(self.ops)
        pending: list[int] = []  # positions of the waiting ops still to visit (a heap)
        waiting: dict[int, ir.Operation] = {}  # position -> waiting op, each found once
        users, new_position, old_position = self._users, self._new_position, self._old_position
        can_wait, ops = self.can_wait, self.ops

        def visit(at: int) -> None:  # the users of the op at ``at`` (one result)
            nonlocal first
            for user in users[old_position[at]]:
                user_at = new_position[user]
                if user_at >= first or user_at in waiting:  # past the first need, or found
                    continue
                if can_wait(user_at):
                    waiting[user_at] = ops[user_at]
                    heapq.heappush(pending, user_at)
                else:
                    first = user_at

        visit(at)
        while pending and pending[0] < first:
            visit(heapq.heappop(pending))
        return first, [(at, waiting[at]) for at in sorted(waiting) if at < first]

    def can_wait(self, at: int) -> bool:
        """Whether the op at ``at`` computes or applies a scale: it can follow a group."""
        known = self._can_wait[at]
        if known is None:
            op = self.ops[at]
            known = self._can_wait[at] = op.name in _PRELUDE and len(op.results) == 1
        return known

    def defined_at(self, value: ir.Value) -> int:
        at = self._value_position.get(value)
        return -1 if at is None else self._new_position[at]  # -1: not of this block

    def prelude(self, value: ir.Value) -> tuple[list[ir.Operation], list[int], int]:
        """The elementwise ops on tensors that make ``value`` from the nearest other values
        (at most ``PRELUDE`` of them, in block order: they are cloned beside the group, as
        XLA would clone them into its kernel), the positions of those ops and of the ops of
        this block whose results they read, and the position of the last of the latter."""
        shape = ir.RankedTensorType(value.type).shape
        chain: set[int] = set()  # positions of the prelude's ops
        leaves: dict[int, None] = {}  # positions of the ops it reads, in the order found
        available = -1
        pending = [value]
        while pending:
            current = pending.pop()
            at = self.defined_at(current)
            if at < 0:
                available = max(available, at)
                continue
            if at in chain:
                continue
            op = self.ops[at]
            if (len(chain) < PRELUDE and op.name in _PRELUDE and len(op.results) == 1
                    and ir.RankedTensorType(current.type).shape == shape):
                chain.add(at)
                pending.extend(op.operands)
            else:
                available = max(available, at)
                leaves[at] = None
        ops, in_order = self.ops, sorted(chain)
        return [ops[at] for at in in_order], in_order + list(leaves), available

    def statistics(self, kinds: dict[ir.Value, tuple[str, float]] | None = None
                   ) -> list[_Statistic]:
        """The block's full reductions; ``kinds``: ``full_reduction`` of every one of them
        by its result, where the caller has it already."""
        found = []
        for at, op in enumerate(self.ops):
            if op.name != "stablehlo.reduce":
                continue
            kind = full_reduction(op) if kinds is None else kinds.get(op.results[0])
            if kind is None or _size(op.operands[0]) == 0:
                continue  # an empty tensor's statistic is the init (it has no row to take)
            prelude, reads, available = self.prelude(op.operands[0])
            init_at = self.defined_at(op.operands[1])
            needed, chain = self.first_use(at)
            found.append(_Statistic(op, kind[0], kind[1], prelude, reads, op.operands[0],
                                    max(available, init_at), needed, chain))
        return found


def _groups(statistics: list[_Statistic]) -> list[tuple[int, list[list[_Statistic]]]]:
    """Groups of statistics and the position each goes before, in block order: the fewest
    points that cover every statistic's interval (the earliest first use, and everything
    available by then), split by kind (combiner, init and element type must match to share
    rows) and into at most ``GROUP``; the groups of one point and kind together (at most
    ``SECOND_STAGE``: they share a second stage). A statistic whose prelude reads what
    another one's waiting ops compute (its rescaled data, say) joins a later group than
    that one."""
    waits_on: dict[int, list[int]] = {}  # by position: an int hashes for free, an op does not
    for number, statistic in enumerate(statistics):
        for at, _ in statistic.chain:
            waits_on.setdefault(at, []).append(number)
    after = [{other for at in statistic.reads for other in waits_on.get(at, ())}
             for statistic in statistics]
    pending = sorted(range(len(statistics)), key=lambda n: statistics[n].needed)
    done: set[int] = set()
    groups: list[tuple[int, list[_Statistic]]] = []
    while pending:
        point = statistics[pending[0]].needed
        ready = [n for n in pending if statistics[n].available < point and after[n] <= done]
        if not ready:  # cannot happen (the first one's dependencies are placed): stay safe
            ready = pending[:1]
        by_kind: dict[tuple[str, float, str], list[_Statistic]] = {}
        for n in ready:
            statistic = statistics[n]
            element = str(ir.RankedTensorType(statistic.input.type).element_type)
            by_kind.setdefault((statistic.combiner, statistic.init, element), []).append(
                statistic)
        for members in by_kind.values():
            chunks = [members[i:i + GROUP] for i in range(0, len(members), GROUP)]
            chunks = [chunk for chunk in chunks if len(chunk) > 1]
            groups += [(point, chunks[i:i + SECOND_STAGE])
                       for i in range(0, len(chunks), SECOND_STAGE)]
        done.update(ready)
        pending = [n for n in pending if n not in done]
    return [(point, chunks) for point, chunks in groups if chunks]


def _size(value: ir.Value) -> int:
    return int(np.prod(ir.RankedTensorType(value.type).shape))


def _rows(emit: Emitter, value: ir.Value, pad: ir.Value, width: int) -> ir.Value:
    """``value`` flattened and padded into rows of ``width`` elements."""
    t = ir.RankedTensorType(value.type)
    size, element = _size(value), t.element_type
    rows = -(-size // width)
    flat = value
    if rows * width != size:  # flat, padded with the reduction's neutral value
        if t.rank != 1:
            flat = emit.op("stablehlo.reshape", [value],
                           [ir.RankedTensorType.get([size], element)]).result
        flat = pad_to(emit, flat, pad, rows * width)
    return emit.op("stablehlo.reshape", [flat],
                   [ir.RankedTensorType.get([rows, width], element)]).result


def _clone_prelude(member: _Statistic, ip: ir.InsertionPoint) -> ir.Value:
    """The statistic's input, its prelude cloned at ``ip``."""
    mapping: dict[ir.Value, ir.Value] = {}
    for op in member.prelude:
        clone = op.clone(ip=ip)
        if mapping:  # the first op reads no clone
            for number, operand in enumerate(op.operands):
                if operand in mapping:
                    clone.operands[number] = mapping[operand]
        mapping[op.result] = clone.result
    return mapping.get(member.input, member.input)


def _first_stage(members: list[_Statistic], emit: Emitter, ip: ir.InsertionPoint,
                 pad: ir.Value) -> tuple[ir.Value, list[int]]:
    """The members' inputs (preludes cloned at ``ip``) cut into rows and concatenated, and
    one reduce of each row: the row results, and how many rows each member has."""
    first = members[0]
    element = ir.RankedTensorType(first.input.type).element_type
    inputs = [_clone_prelude(member, ip) for member in members]
    # Rows of ROW elements, or of the largest tensor's size (a power of two) when every
    # tensor is smaller: padding is work for the kernel's threads.
    width = min(ROW, 1 << (max(_size(value) for value in inputs) - 1).bit_length())
    parts = [_rows(emit, value, pad, width) for value in inputs]
    counts = [ir.RankedTensorType(part.type).shape[0] for part in parts]
    total = sum(counts)
    i64 = ir.IntegerType.get_signless(64)
    rows = parts[0] if len(parts) == 1 else emit.op(
        "stablehlo.concatenate", parts, [ir.RankedTensorType.get([total, width], element)],
        {"dimension": ir.IntegerAttr.get(i64, 0)}).result
    row_values_type = ir.RankedTensorType.get([total], element)
    per_row = emit.op("stablehlo.reduce", [rows, pad], [row_values_type],
                      {"dimensions": ir.DenseI64ArrayAttr.get([1])}, regions=1)
    combiner_region(per_row, first.combiner, element)
    return per_row.result, counts


def _take_together(groups: list[list[_Statistic]], layout: _Block, point: int) -> None:
    """Replace the reductions of ``groups`` (of one kind, taken at one point) by one row
    reduction each and, where a member has more than one row, one masked reduce for all of
    them, before the op at ``point``; each result becomes an element of its group's
    vector."""
    before = layout.ops[point]
    first = groups[0][0]
    element = ir.RankedTensorType(first.input.type).element_type
    ip = ir.InsertionPoint(before)
    emit = Emitter(ip, first.reduce.location)
    pad = emit.splat(first.init, ir.RankedTensorType.get([], element))
    stages = [_first_stage(members, emit, ip, pad) for members in groups]
    one_row = [max(counts) == 1 for _, counts in stages]
    masked = [stage for stage, single in zip(stages, one_row, strict=True) if not single]
    masked_vectors = iter(per_member_of_groups(
        emit, [per_row for per_row, _ in masked], [counts for _, counts in masked], pad,
        first.combiner) if masked else [])
    for members, (per_row, _), single in zip(groups, stages, one_row, strict=True):
        vector = per_row if single else next(masked_vectors)
        for index, member in enumerate(members):
            member.reduce.results[0].replace_all_uses_with(emit.element(vector, index))
            member.reduce.erase()
            # The waiting ops after the slice they now read, in block order. Groups go in
            # block order and ops only move down to a group, so an op is before this
            # group's point iff it was before it in the block as parsed (MLIR's
            # is_before_in_block renumbers the block after each move: quadratic).
            for at, op in member.chain:
                if at < point:
                    op.move_before(before)
            for op in reversed(member.prelude):  # the originals nothing else uses
                if next(iter(op.result.uses), None) is None:
                    op.erase()


def group_block(block: ir.Block, kinds: dict[ir.Value, tuple[str, float]] | None = None
                ) -> int:
    """Group the statistics of one block; returns how many reductions were merged.
    ``kinds``: as for ``_Block.statistics``."""
    epochs, _ = move_to_epochs(block, users=True)  # scalar chains as early as they can
    order = epochs.moved_order()  # be: statistics that scale by them are available from there
    if order is None:  # a block that does not end with a terminator: MLIR makes none
        return 0
    layout = _Block(epochs, order)
    groups = _groups(layout.statistics(kinds))
    for point, chunks in groups:
        _take_together(chunks, layout, point)
    return sum(len(members) for _, chunks in groups for members in chunks)


def group_statistics(module: ir.Module) -> int:
    """Group the statistics of every block that holds two or more; returns how many
    reductions were merged. A partitioned module is left as it is: rows cut from tensors
    sharded in different ways cannot be concatenated without resharding them (the
    partitioner moves whole tensors, and the outputs' shardings change), while statistics
    taken at the same point are already one combined all-reduce there (XLA combines
    independent all-reduces)."""
    if partition_count(module) > 1:
        return 0
    counts: dict[ir.Block, int] = {}  # in walk order
    kinds: dict[ir.Value, tuple[str, float]] = {}  # full reduction's result -> its kind
    for reduce in ops_named(module.operation, "stablehlo.reduce"):
        kind = full_reduction(reduce)
        if kind is not None:
            kinds[reduce.results[0]] = kind
            block = reduce.operation.block
            counts[block] = counts.get(block, 0) + 1
    # A block's grouping changes no reduction of another block (it replaces the uses of
    # its own): the kinds found here hold for each block in turn.
    return sum(group_block(block, kinds) for block, count in counts.items() if count > 1)


@register("group-statistics",
          "Take the run-time statistics (full max/sum reductions) of a block that can be "
          "taken at the same point in one row reduction, so that XLA runs a group as two "
          "kernels (part of simplify).")
class GroupStatistics(ModulePass):
    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("group-statistics.merged", group_statistics(module))
