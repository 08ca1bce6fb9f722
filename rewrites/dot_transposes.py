"""Transposes of a dot's result move up to the dot, through the elementwise ops between.

JAX writes a weight gradient as ``transpose(dot_general(dy, x))`` and attention's outputs as
a dot followed by a transpose of its head axes. XLA folds a transpose that directly follows
a dot into the dot (the GEMM writes the transposed layout), but not one behind the ops a
rewrite puts between them: the unit-scaling multiplies, the f16 round trips, the saturating
clamp of a narrowing convert. Then the GEMM writes the dot's own layout and XLA runs all
that meets the value in it, transposing what it meets: on the 2-layer GPT step compiled for
an H100, Adam reads each weight and both moments of the nine transposed gradients through a
transpose kernel and writes them back through another.

This rewrite takes the ops between a dot and a transpose of its result, an elementwise DAG
whose only tensor source is the dot (its other operands are scalars, broadcast scalars or
splat constants), and emits them on ``transpose(dot)``: the transpose is the dot's only user
again, as in the original. A value of the DAG used elsewhere must be used by a like
transpose or by a full reduction (a statistic, which the order of elements does not change
but for the rounding order of a sum); otherwise nothing moves.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import (
    Emitter,
    attributes_of,
    defining_op,
    is_scalar_broadcast,
    ops_named,
)
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register

_ELEMENTWISE = ops_with(Trait.ELEMENTWISE)
_DOT = "stablehlo.dot_general"
MAX_DAG_OPS = 64  # a DAG this large is not scale arithmetic: left alone (and the walk bounded)


def _permutation(transpose: ir.Operation) -> tuple[int, ...]:
    return tuple(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))


def _is_splat(op: ir.Operation | None) -> bool:
    if op is None or op.name != "stablehlo.constant":
        return False
    value = op.attributes["value"]
    return isinstance(value, ir.DenseElementsAttr) and value.is_splat


def _free(value: ir.Value) -> bool:
    """An operand that is the same in any layout: a scalar, a broadcast scalar, a splat."""
    if ir.RankedTensorType(value.type).rank == 0:
        return True
    return is_scalar_broadcast(value) or _is_splat(defining_op(value))


def _has_sharding(op: ir.Operation) -> bool:
    return any("sharding" in name for name in op.attributes)


def _dag(transpose: ir.Operation) -> tuple[ir.Operation, list[ir.Operation]] | None:
    """The dot and the elementwise ops between it and ``transpose``, operands first; None
    where the transpose's operand is not such a DAG."""
    source = transpose.operands[0]
    shape = ir.RankedTensorType(source.type).shape
    parent = transpose.parent  # the op whose region holds the DAG
    dot: ir.Operation | None = None
    order: list[ir.Operation] = []
    seen: set[ir.Value] = set()
    # Iterative post-order: an op is listed after the ops that define its operands.
    stack: list[tuple[ir.Value, bool]] = [(source, False)]
    while stack:
        value, expanded = stack.pop()
        op = defining_op(value)
        if expanded:
            order.append(op)
            continue
        if value in seen:
            continue
        seen.add(value)
        if op is None or op.parent != parent or len(op.results) != 1:
            return None
        if op.name == _DOT:
            if dot is not None:
                return None  # two dots: not one GEMM's output
            dot = op
            continue
        if (op.name not in _ELEMENTWISE or _has_sharding(op) or len(order) >= MAX_DAG_OPS
                or ir.RankedTensorType(value.type).shape != shape):
            return None
        stack.append((value, True))
        for operand in op.operands:
            if operand in seen or _free(operand):
                continue
            if ir.RankedTensorType(operand.type).shape != shape:
                return None
            stack.append((operand, False))
    if dot is None or not order or _has_sharding(dot):
        return None
    return dot, order


def _full_reduction(op: ir.Operation) -> bool:
    """A reduce of one input over all of its dimensions: blind to the input's layout."""
    if op.name != "stablehlo.reduce" or len(op.operands) != 2:
        return False
    rank = ir.RankedTensorType(op.operands[0].type).rank
    return sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) == list(range(rank))


def _closed(dot: ir.Operation, order: list[ir.Operation], permutation: tuple[int, ...]
            ) -> list[ir.Operation] | None:
    """``order`` with the elementwise ops that use its values joined (a statistic's ``abs``
    beside the chain), operands first; None unless every other use of the dot's and the
    DAG's results is a transpose with ``permutation`` or a full reduction."""
    shape = ir.RankedTensorType(dot.results[0].type).shape
    parent = dot.parent
    inside = {dot.results[0], *(op.results[0] for op in order)}
    work = list(inside)
    waiting: dict[ir.Value, ir.Operation] = {}  # elementwise users with an operand to come
    while work:
        value = work.pop()
        for use in value.uses:
            user = use.owner.operation
            if user.name == "stablehlo.transpose":
                if _permutation(user) != permutation:
                    return None
                continue
            if _full_reduction(user):
                continue
            if (user.name not in _ELEMENTWISE or len(user.results) != 1 or _has_sharding(user)
                    or user.parent != parent  # a use inside a loop or branch stays
                    or ir.RankedTensorType(user.results[0].type).shape != shape):
                return None
            result = user.results[0]
            if result in inside:
                continue
            if not all(operand in inside or _free(operand) for operand in user.operands):
                waiting[result] = user
                continue
            waiting.pop(result, None)
            if len(order) >= MAX_DAG_OPS:
                return None
            inside.add(result)
            order.append(user)
            work.append(result)
    return order if not waiting else None


def _permuted(t: ir.Type, permutation: tuple[int, ...]) -> ir.RankedTensorType:
    ranked = ir.RankedTensorType(t)
    shape = ranked.shape
    return ir.RankedTensorType.get([shape[p] for p in permutation], ranked.element_type)


def _free_operand(emit: Emitter, value: ir.Value, permutation: tuple[int, ...]) -> ir.Value:
    """A free operand in the transposed shape."""
    if ir.RankedTensorType(value.type).rank == 0:
        return value
    t = _permuted(value.type, permutation)
    op = defining_op(value)
    if is_scalar_broadcast(value):
        return emit.broadcast_scalar(op.operands[0], t)
    splat = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
    return emit.op("stablehlo.constant", [], [t],
                   {"value": ir.DenseElementsAttr.get_splat(t, splat)}).result


def _move(dot: ir.Operation, order: list[ir.Operation], permutation: tuple[int, ...],
          transpose: ir.Operation) -> list[ir.Operation]:
    """Emit the DAG on ``transpose(dot)``, each op just before the one it replaces, and hand
    its users the new values: like transposes' users take them, full reductions read them.
    Nothing is erased here (a caller's other handle to an erased op would dangle): returns
    the ops left dead, users first (the bypassed transposes, the old DAG backwards), then
    the broadcasts and splats the old DAG read, dead where nothing else reads them."""
    emit = Emitter(ir.InsertionPoint(dot), dot.location)
    folded = emit.op("stablehlo.transpose", [dot.results[0]],
                     [_permuted(dot.results[0].type, permutation)], attributes_of(transpose))
    dot.move_before(folded)
    moved = {dot.results[0]: folded.results[0]}
    free_ops: dict[ir.Value, ir.Operation] = {}  # one handle per op: see above
    for op in order:
        emit = Emitter(ir.InsertionPoint(op), op.location)
        operands = []
        for operand in op.operands:
            new = moved.get(operand)
            if new is None:
                new = _free_operand(emit, operand, permutation)
                if new is not operand:
                    free_ops.setdefault(operand, defining_op(operand))
            operands.append(new)
        moved[op.results[0]] = emit.op(op.name, operands,
                                       [_permuted(op.results[0].type, permutation)],
                                       attributes_of(op)).result
    bypassed = []
    for old, new in moved.items():
        for use in list(old.uses):
            user = use.owner.operation
            if user.name == "stablehlo.transpose" and user != folded:
                user.results[0].replace_all_uses_with(new)
                bypassed.append(user)
            elif _full_reduction(user):
                user.operands[use.operand_number] = new
    return bypassed + order[::-1] + list(free_ops.values())


def _used(op: ir.Operation) -> bool:
    return any(True for _ in op.results[0].uses)


def transposes_to_dots(transposes: list[ir.Operation], dead: list[ir.Operation] | None = None
                       ) -> tuple[int, list[ir.Operation]]:
    """Move each of ``transposes`` that follows a dot through elementwise ops up to the dot.
    Returns how many DAGs moved (one for all of its like transposes) and the transposes
    still in use (those bypassed are dead: a caller must not rewrite them); ``dead``, when
    given, collects the ops left dead, in an order they can be erased in."""
    moved = 0
    for transpose in transposes:
        if not _used(transpose):  # bypassed by an earlier move, or dead already
            continue
        found = _dag(transpose)
        if found is None:
            continue
        dot, order = found
        permutation = _permutation(transpose)
        order = _closed(dot, order, permutation)
        if order is not None:
            left = _move(dot, order, permutation, transpose)
            if dead is not None:
                dead += left
            moved += 1
    return moved, [t for t in transposes if _used(t)]


@register("dot-transposes",
          "Move a transpose of a dot's result up to the dot, through the elementwise ops "
          "between (scale factors, round trips, saturation), so that XLA folds it into the "
          "GEMM's output layout (part of simplify).")
class DotTransposes(ModulePass):
    def apply(self, module: ir.Module, context: PassContext) -> None:
        dead: list[ir.Operation] = []
        moved, _ = transposes_to_dots(ops_named(module.operation, "stablehlo.transpose"), dead)
        for op in dead:  # simplify leaves them to canonicalize; alone, the pass drops them
            if not _used(op):
                op.erase()
        context.bump("dot-transposes.moved", moved)
