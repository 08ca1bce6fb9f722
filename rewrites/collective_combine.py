"""``combine-all-reduces``: a block's independent all-reduces made one all-reduce (of their
operands concatenated) before XLA sees them, as XLA's own combiner would make them after its
fusion passes.

Why: a sum over devices of scaled data is taken at a scale every device agrees on, so the
rewritten ``psum`` of a gradient is ``g * 2^(e - agreed)`` then the all-reduce: a kernel of
its own ahead of each all-reduce that the original did not have. XLA:GPU's multi-output
fusion joins such a kernel to an independent sibling that reads the same small operands
(the exponents of the step): the optimizer update of another parameter, which waits for
that parameter's all-reduce. XLA's all-reduce combiner runs after fusion, and all-reduces
that now depend on one another cannot be combined: a 2-layer GPT ``shard_map`` step with
``psum`` of gradients on 8 H100s ran 6 all-reduces one after another in f32 mode where the
original runs 1. Combined before fusion, they are one op, and a fusion that joins a kernel
before it to one after it would be a cycle, which XLA never makes.

Which: ``stablehlo.all_reduce`` ops of one block with the same replica groups, channel,
device-id mode, element type and reducer, none of which depends on another, taken in block
order into groups of at most ``threshold-bytes`` (XLA:GPU's combiner default, 30 MiB: a
larger group would wait longer for its last operand and overlap less of the step). The
combined op goes where the group's last member was; the ops between that read an earlier
member's results move after it. The values stay the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.rewrites.emitter import (
    Emitter,
    attributes_of,
    element_type,
    is_ranked_tensor,
    ops_named,
    shape_of,
)
from scalify_hlo.rewrites.regions import nested_ops
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.symbols import partition_count

THRESHOLD_BYTES = 30 * 1024 * 1024  # XLA's kDefaultAllReduceCombineThreshold, less its 7
_ALL_REDUCE = "stablehlo.all_reduce"
# The attributes a combined all-reduce keeps from its members (all equal across a group).
_ATTRIBUTES = frozenset({"replica_groups", "channel_handle", "use_global_device_ids"})


@dataclass
class _Group:
    """All-reduces that may become one: in block order, with their operand bytes."""

    members: list[ir.Operation] = field(default_factory=list)
    bytes: int = 0


def _operand_bytes(op: ir.Operation) -> int | None:
    """Bytes of the all-reduce's operands; None where a shape is not static or an element
    has no bit width (complex)."""
    total = 0
    for value in op.operands:
        t = value.type
        if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
            return None
        width = getattr(t.element_type, "width", None)
        if not width:
            return None
        total += (width + 7) // 8 * math.prod(t.shape)
    return total


def _reducer_signature(op: ir.Operation) -> tuple | None:
    """The reducer's ops as names, attributes and operand positions (block arguments or
    earlier ops): two reducers with equal signatures compute the same function."""
    blocks = op.regions[0].blocks
    if len(blocks) != 1:
        return None
    block = blocks[0]
    arguments = {argument: ("arg", n) for n, argument in enumerate(block.arguments)}
    defined: dict[ir.Value, tuple] = dict(arguments)
    signature: list[tuple] = [tuple(str(a.type) for a in block.arguments)]
    for position, inner in enumerate(block.operations):
        inner = inner.operation
        if len(inner.regions):
            return None
        operands = []
        for value in inner.operands:
            where = defined.get(value)
            if where is None:
                return None  # reads a value from outside the reducer
            operands.append(where)
        attributes = tuple(sorted((name, str(attr)) for name, attr in attributes_of(inner).items()))
        signature.append((inner.name, tuple(operands), attributes,
                          tuple(str(r.type) for r in inner.results)))
        for n, result in enumerate(inner.results):
            defined[result] = ("op", position, n)
    return tuple(signature)


def _key(op: ir.Operation) -> tuple | None:
    """What two all-reduces must share to be combined; None for one that cannot be."""
    if len(op.regions) != 1 or not len(op.operands):
        return None
    element_types = {str(element_type(v)) if is_ranked_tensor(v.type) else None
                     for v in op.operands}
    if len(element_types) != 1 or None in element_types:
        return None
    attributes = attributes_of(op)
    if not set(attributes) <= _ATTRIBUTES:  # a sharding annotation fits one shape only
        return None
    reducer = _reducer_signature(op)
    if reducer is None:
        return None
    return (tuple(sorted((name, str(attr)) for name, attr in attributes.items())),
            element_types.pop(), reducer)


def _reads(op: ir.Operation) -> list[ir.Value]:
    """The values ``op`` reads: its operands and those of every op in its regions."""
    if not len(op.regions):
        return list(op.operands)
    return [value for inner in (op, *nested_ops(op)) for value in inner.operands]


def _groups(block: ir.Block, threshold: int) -> list[_Group]:
    """Candidate groups of the block's all-reduces (two or more each): per key, in block
    order, a member joining the open group only if it does not depend on the group's
    earlier members, and only while the group stays within ``threshold`` bytes."""
    open_groups: dict[tuple, _Group] = {}
    found: list[_Group] = []
    # Per value of the block: the open groups whose members it depends on.
    depends: dict[ir.Value, frozenset[int]] = {}
    for op in block.operations:
        op = op.operation
        taint: frozenset[int] = frozenset()
        for value in _reads(op):
            taint |= depends.get(value, frozenset())
        if op.name == _ALL_REDUCE:
            key, size = _key(op), _operand_bytes(op)
            if key is not None and size is not None:
                group = open_groups.get(key)
                if (group is None or id(group) in taint
                        or group.bytes + size > threshold):
                    group = open_groups[key] = _Group()
                    found.append(group)
                group.members.append(op)
                group.bytes += size
                taint |= {id(group)}
        if taint:
            for result in op.results:
                depends[result] = taint
    return [group for group in found if len(group.members) > 1]


def _combine(group: list[ir.Operation]) -> bool:
    """Make ``group`` one all-reduce where its last member is, moving the ops between that
    read an earlier member below it. Members that now depend on earlier ones (an earlier
    combination can make them) are left out; False where fewer than two remain."""
    members: list[ir.Operation] = [group[0]]
    pending = set(group[1:])
    moved: list[ir.Operation] = []
    reached: set[ir.Value] = set(group[0].results)
    block = group[0].block
    started = False
    for current in block.operations:
        current = current.operation
        if not started:
            started = current == group[0]
            continue
        if not pending:
            break
        tainted = any(value in reached for value in _reads(current))
        if current in pending:
            pending.discard(current)
            if not tainted:
                members.append(current)
                reached.update(current.results)
                continue
        if tainted:
            moved.append(current)
            reached.update(current.results)
    if len(members) < 2:
        return False
    last = members[-1]
    moved = [m for m in moved if m.is_before_in_block(last)]
    emit = Emitter(ir.InsertionPoint(last), last.location)
    parts = _combined(emit, members)
    anchor = parts[-1].owner.operation
    for op in moved:
        op.move_after(anchor)
        anchor = op
    values = iter(parts)
    for member in members:
        for result in member.results:
            result.replace_all_uses_with(next(values))
    for member in members:
        member.erase()
    return True


def _combined(emit: Emitter, members: list[ir.Operation]) -> list[ir.Value]:
    """One all-reduce of the members' operands flattened and concatenated (XLA rejects a
    variadic all-reduce inside a manual computation), sliced back to each result."""
    element = ir.RankedTensorType(members[0].operands[0].type).element_type
    flat, sizes = [], []
    for member in members:
        for value in member.operands:
            size = math.prod(shape_of(value))
            sizes.append(size)
            flat.append(_reshaped(emit, value, ir.RankedTensorType.get([size], element)))
    vector_type = ir.RankedTensorType.get([sum(sizes)], element)
    joined = emit.op("stablehlo.concatenate", flat, [vector_type], {
        "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
    reduce = emit.op(_ALL_REDUCE, [joined], [vector_type], attributes_of(members[0]),
                     regions=1)
    members[0].regions[0].blocks[0].append_to(reduce.regions[0])
    parts, offset = [], 0
    results = [result for member in members for result in member.results]
    for size, result in zip(sizes, results, strict=True):
        piece = emit.slice(reduce.result, offset, offset + size)
        parts.append(_reshaped(emit, piece, result.type))
        offset += size
    return parts


def _reshaped(emit: Emitter, value: ir.Value, t: ir.Type) -> ir.Value:
    return value if value.type == t else emit.unary("stablehlo.reshape", value, t)


def combine_all_reduces(module: ir.Module, threshold: int = THRESHOLD_BYTES) -> int:
    """Combine the independent all-reduces of every block of a partitioned module; returns
    how many all-reduces were folded into others."""
    if partition_count(module) == 1:
        return 0
    folded = 0
    # The blocks that hold an all-reduce, found by the C++ walk (a Python one would visit
    # every op of the step).
    blocks = list(dict.fromkeys(op.block for op in ops_named(module.operation, _ALL_REDUCE)))
    for block in blocks:
        for group in _groups(block, threshold):
            members = group.members
            if _combine(members):
                folded += len(members) - 1
    return folded


@register("combine-all-reduces",
          "In a module partitioned over several devices, make a block's independent "
          "all-reduces of the same kind one all-reduce of their operands concatenated, as "
          "XLA's combiner would "
          "after fusion (where fusion may already have chained them; part of simplify).")
class CombineAllReduces(ModulePass):
    threshold_bytes: int = option(THRESHOLD_BYTES, "largest combined all-reduce, in bytes "
                                  "of its operands (XLA:GPU's combiner default)")

    def validate(self) -> None:
        if self.threshold_bytes < 1:
            raise RewriteError("combine-all-reduces: threshold-bytes must be at least 1")

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("combine-all-reduces.folded",
                     combine_all_reduces(module, self.threshold_bytes))
