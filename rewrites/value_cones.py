"""The values a class of values is computed from: walked back through chosen ops and across
the places a loop holds a carried value. The angle class (``angle_values``) and the trip-count
class (``trip_count_values``) are such cones, from different starts through different ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import defining_op, terminator
from scalify_hlo.rewrites.program_constants import loop_slot


def loop_places(argument: ir.Value) -> list[ir.Value]:
    """The values a ``while`` holds in the same place as its block argument ``argument``:
    its operand, result, both regions' arguments and the body's returned value, which a
    class of values must take together (none for an argument of any other block: the
    function's, a reducer's)."""
    slot = loop_slot(argument)
    if slot is None:
        return []
    loop, index = slot
    body = loop.regions[1].blocks[0]
    return [loop.operands[index], loop.results[index], loop.regions[0].blocks[0].arguments[index],
            body.arguments[index], terminator(body).operands[index]]


def source_cone(starts: Iterable[ir.Value], walks_through: Callable[[str], bool],
                is_member: Callable[[ir.Value], bool],
                through_others: bool = False) -> set[ir.Value]:
    """The members among ``starts`` and the values they are computed from: into the operands
    of the ops ``walks_through`` accepts (by name), and from a loop's block argument to every
    place the loop holds it. A value that is not a member ends the walk, unless
    ``through_others`` (a loop condition's booleans and integers lead to the floats that
    decide them)."""
    members: set[ir.Value] = set()
    seen: set[ir.Value] = set()
    pending = list(starts)
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        if is_member(value):
            members.add(value)
        elif not through_others:
            continue
        op = defining_op(value)
        if op is None:
            pending.extend(loop_places(value))
        elif walks_through(op.name):
            pending.extend(op.operands)
    return members
