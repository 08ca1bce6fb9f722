"""Forward or backward: JAX's name stack in op locations.

JAX names each op with its transformation stack, e.g. ``jit(step)/transpose(jvp(loss))/dot``;
ops under ``transpose(...)`` belong to the backward pass. Inlined ops carry
``callsite(callee at call site)`` locations, so the caller's stack is searched too.
"""

from __future__ import annotations

from jax.extend.mlir import ir

BACKWARD_MARKER = "transpose("
# jax.checkpoint recomputes forward values inside the backward pass under this name.
REMAT_MARKER = "rematted_computation"


def location_text(loc: ir.Location) -> str:
    return str(loc)


def is_backward(loc: ir.Location) -> bool:
    """Whether an op computes gradients: under ``transpose(...)`` and not a forward value
    that ``jax.checkpoint`` recomputes there."""
    text = location_text(loc)
    return BACKWARD_MARKER in text and REMAT_MARKER not in text


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
