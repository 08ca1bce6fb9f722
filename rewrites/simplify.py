"""The ``simplify`` pass: drop what scale propagation left trivial, then canonicalize and CSE.

Static scales already emit nothing; what remains are multiplications by a splat 1, converts
to the same type and duplicated constants or broadcasts, which this pass removes.
"""

from __future__ import annotations

from typing import Any

from jax.extend.mlir import ir
from scalify_hlo.rewrites.emitter import splat_constant_value
from scalify_hlo.rewrites.mlir_passes import run_mlir_pipeline
from scalify_hlo.rewrites.registry import PassContext, PassInfo, register


def _trivial_result(op: ir.Operation) -> ir.Value | None:
    """The operand an op can be replaced by, when it is an identity."""
    if op.name == "stablehlo.multiply":
        lhs, rhs = op.operands
        if splat_constant_value(rhs) == 1.0 and lhs.type == op.results[0].type:
            return lhs
        if splat_constant_value(lhs) == 1.0 and rhs.type == op.results[0].type:
            return rhs
    elif op.name == "stablehlo.divide":
        lhs, rhs = op.operands
        if splat_constant_value(rhs) == 1.0 and lhs.type == op.results[0].type:
            return lhs
    elif op.name == "stablehlo.convert":
        if op.operands[0].type == op.results[0].type:
            return op.operands[0]
    return None


def drop_identities(module: ir.Module) -> int:
    """Replace identity ops by their operand; returns how many were dropped.

    Candidates are collected first and each replacement is computed only when it is applied,
    because dropping one identity can change the operand of the next.
    """
    candidates: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("stablehlo.multiply", "stablehlo.divide", "stablehlo.convert"):
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    dropped = 0
    for op in candidates:
        replacement = _trivial_result(op)
        if replacement is not None:
            op.results[0].replace_all_uses_with(replacement)
            op.erase()
            dropped += 1
    return dropped


def _run(module: ir.Module, options: dict[str, Any], context: PassContext) -> None:
    context.bump("simplify.identities-dropped", drop_identities(module))
    run_mlir_pipeline(module, "canonicalize,cse,symbol-dce")


SIMPLIFY = register(PassInfo(
    name="simplify",
    description="Drop multiplications by one and no-op converts, then canonicalize, CSE and "
                "remove dead private functions.",
    run=_run,
))
