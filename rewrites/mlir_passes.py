"""MLIR's own passes that work through jaxlib's bindings, registered under their usual names."""

from __future__ import annotations

from dataclasses import dataclass

from jax.extend.mlir import ir, passmanager

from scalify_hlo.errors import RewriteError
from scalify_hlo.module_io import format_diagnostics
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register


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


@dataclass(frozen=True)
class _MlirPass(ModulePass):
    """An MLIR pass run by its textual name through the bindings' pass manager."""

    def apply(self, module: ir.Module, context: PassContext) -> None:
        run_mlir_pipeline(module, self.name)


@register("canonicalize",
          "MLIR canonicalization: fold constants and apply each op's canonical patterns.")
class Canonicalize(_MlirPass):
    """MLIR's own pass of this name."""


@register("cse",
          "Eliminate common subexpressions.")
class Cse(_MlirPass):
    """MLIR's own pass of this name."""


@register("symbol-dce",
          "Remove private functions that nothing refers to.")
class SymbolDce(_MlirPass):
    """MLIR's own pass of this name."""
