"""The update: a training step's elementwise ops after its backward pass, computed in f32 on
the original values instead of propagating scales through them.

An optimizer's update (Adam's moments, its ratio, the weight step) is a long elementwise
chain per parameter from the gradient and the state to the step's results. Propagating
scales through it buys nothing (its arithmetic runs in f32 either way: the square classes
already put Adam's second moment there) and costs the most scale arithmetic of the whole
step: every add of two values with unrelated runtime scales (``b1 * m + (1 - b1) * g``,
``w - lr * u``) is a chain of exponent ops, and XLA copies each chain into every kernel that
uses it. In a GPT step with Adam, the update and the results' scales held 79% of the rank-0
ops of the rewrite in f32 data mode and two thirds in f16 data mode.

So the *tail* of a step with a backward pass (the ops that lead only to its results, through
nothing but elementwise and layout ops) runs as in the original program, on unscaled values
in the original types: a value entering it is unscaled once (``data * 2^e``, one multiply
that XLA fuses into the kernel reading it), and each result leaves with one scale
(``scalify.tail_result``): at unit RMS for f16 data, whose range is narrow (the results'
statistics are taken together by group-statistics), and 1 for f32 and bf16 data, whose
range is f32's. The numbers are the original's: exact in f32 data mode, and in f16 data mode
the update no longer rounds its intermediates (``b1 * m``, the update's ratio) to f16
before the state is stored.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.name_stack import is_backward
from scalify_hlo.rewrites.op_table import Trait, ops_with

# Ops a tail is made of: pure elementwise ones, constants and what only moves data.
TAIL_OPS = ops_with(Trait.HOISTABLE) | {
    "stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.reshape",
    "stablehlo.transpose", "stablehlo.iota"}


def update_tail(func: ir.Operation) -> set[ir.Operation]:
    """The tail ops of the entry function's body (see the module docstring): elementwise or
    layout ops whose every user is a tail op or the return, in a function with a backward
    pass (JAX's name stack: ``transpose(jvp(...))``); empty without one (a forward-only
    function keeps its scales to its results)."""
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    if not ops or ops[-1].name != "func.return" or not any(
            is_backward(op.location) for op in ops[:-1]):
        return set()
    terminator = ops[-1]
    tail: set[ir.Operation] = set()
    for op in reversed(ops[:-1]):
        results = list(op.results)
        if op.name not in TAIL_OPS or not results:
            continue
        users = [use.owner.operation for result in results for use in result.uses]
        if users and all(user == terminator or user in tail for user in users):
            tail.add(op)
    return tail
