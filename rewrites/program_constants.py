"""Which values of the original program are constants: seen through the ops that only
reshape, broadcast or convert a constant, and through the carries a while passes on
unchanged (how JAX hands a scan body the constants it closes over).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import constant_splat
from scalify_hlo.rewrites.emitter import defining_op, terminator
from scalify_hlo.rewrites.op_table import Trait, ops_with

# Ops that make a constant of a constant operand (a zero fill of a zero fill).
_CONSTANT_KEEPING = ops_with(Trait.ZERO_FILL_THROUGH)


def is_zero_fill(old: ir.Value) -> bool:
    """A splat 0 constant of the original program, or a layout op of one."""
    return program_splat(old) == 0.0


def program_splat(old: ir.Value) -> float | None:
    """The value of a splat ``program_constant``; None for any other value."""
    op = program_constant(old)
    return None if op is None else constant_splat(op)


def program_constant(old: ir.Value) -> ir.Operation | None:
    """The ``stablehlo.constant`` that an original value is, seen through the ops that only
    reshape, broadcast or convert it and through the loop-invariant carries of whiles: a
    remat'd scan body gets a causal mask's -1e9 as a carry that the loop passes on
    unchanged, and the select that applies it must know it is a constant (its scale
    static, its value a sentinel) to keep it from setting the scale of the logits."""
    value = old
    while True:
        op = defining_op(value)
        if op is None:
            value = invariant_operand(value)
            if value is None:
                return None
            continue
        if op.name == "stablehlo.constant":
            return op
        if op.name not in _CONSTANT_KEEPING:
            return None
        value = op.operands[0]


def loop_slot(argument: ir.Value) -> tuple[ir.Operation, int] | None:
    """The while whose condition or body has the block argument ``argument``, and its
    index; None for an argument of any other block."""
    parent = argument.owner.owner
    if parent is None or parent.name != "stablehlo.while":
        return None
    return parent.operation, ir.BlockArgument(argument).arg_number


def invariant_operand(argument: ir.Value) -> ir.Value | None:
    """The loop operand behind a while's block argument when the body returns the argument
    unchanged; None for any other block argument."""
    slot = loop_slot(argument)
    if slot is None:
        return None
    loop, index = slot
    body = loop.regions[1].blocks[0]
    returned = terminator(body).operands[index]
    if returned != body.arguments[index]:
        return None
    return loop.operands[index]
