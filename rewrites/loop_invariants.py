"""Which values of a ``while`` body are the same on every trip.

Two passes ask: ``hoist-loop-scales`` (the scalar arithmetic it computes once before the
loop) and the loop-drift walk (a product with such a value moves a carry's data by the same
unknown factor on every trip, ``loop_drift.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import terminator


def invariant_arguments(loop: ir.Operation) -> dict[ir.Value, ir.Value]:
    """Each argument of ``loop``'s body that the body returns unchanged -> the loop operand
    it holds."""
    body = loop.regions[1].blocks[0]
    returned = terminator(body).operands
    return {arg: operand for arg, operand, result in
            zip(body.arguments, loop.operands, returned, strict=True) if result == arg}


def invariant_body_ops(loop: ir.Operation, admits: Callable[[ir.Operation], bool]
                       ) -> list[ir.Operation]:
    """The ops of ``loop``'s body (top level, terminator aside), in order, that ``admits``
    and whose operands are all invariant: an invariant argument, a value defined outside the
    loop, or a result of an earlier op of the list."""
    body = loop.regions[1].blocks[0]
    local = set(body.arguments)  # body values; anything else is defined outside the loop
    invariant = set(invariant_arguments(loop))
    found: list[ir.Operation] = []
    for op in list(body.operations)[:-1]:
        op = op.operation
        results = list(op.results)
        local.update(results)
        if admits(op) and all(v in invariant or v not in local for v in op.operands):
            found.append(op)
            invariant.update(results)
    return found
