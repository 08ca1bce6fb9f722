"""MLIR's own passes that work through jaxlib's bindings, registered under their usual names."""

from __future__ import annotations

from typing import Any

from jax.extend.mlir import ir, passmanager
from scalify_hlo.rewrites.registry import PassContext, PassInfo, register

from scalify_hlo.errors import RewriteError
from scalify_hlo.ir import format_diagnostics


def run_mlir_pipeline(module: ir.Module, pipeline: str) -> None:
    """Run a textual MLIR pipeline on the module; failures become a one-line RewriteError.

    The pass manager's verify-each is off: ``run_pipeline`` verifies the module at the end of
    the pipeline (after every pass with ``--verify-each``), and verifying after each MLIR pass
    of a chain costs more than the passes themselves on a large module."""
    manager = passmanager.PassManager.parse(f"builtin.module({pipeline})")
    manager.enable_verifier(False)
    try:
        manager.run(module.operation)
    except ir.MLIRError as exc:
        raise RewriteError(f"{pipeline} failed: {format_diagnostics(exc, '-')}") from None


def _mlir_pass(name: str, description: str) -> PassInfo:
    def run(module: ir.Module, options: dict[str, Any], context: PassContext) -> None:
        run_mlir_pipeline(module, name)

    return register(PassInfo(name=name, description=description, run=run))


CANONICALIZE = _mlir_pass("canonicalize", "MLIR canonicalization: fold constants and apply "
                          "each op's canonical patterns.")
CSE = _mlir_pass("cse", "Eliminate common subexpressions.")
SYMBOL_DCE = _mlir_pass("symbol-dce", "Remove private functions that nothing refers to.")
