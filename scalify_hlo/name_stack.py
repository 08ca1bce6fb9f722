"""Forward or backward: JAX's name stack in op locations.

JAX names each op with its transformation stack, e.g. ``jit(step)/transpose(jvp(loss))/dot``;
ops under ``transpose(...)`` belong to the backward pass. Inlined ops carry
``callsite(callee at call site)`` locations, so the caller's stack is searched too.
"""

from __future__ import annotations

from jax.extend.mlir import ir

BACKWARD_MARKER = "transpose("


def location_text(loc: ir.Location) -> str:
    return str(loc)


def is_backward(loc: ir.Location) -> bool:
    return BACKWARD_MARKER in location_text(loc)


def has_name_stack(module: ir.Module) -> bool:
    """Whether any op is named with a JAX transformation stack (``jit(...)``)."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if "jit(" in location_text(op.location):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found
