"""The passes of scalify-hlo; importing this package registers every one of them."""

from scalify_hlo.rewrites import inline, mlir_passes, scalify, simplify  # noqa: F401
from scalify_hlo.rewrites.registry import (
    PASSES,
    PassContext,
    PassInfo,
    PassInvocation,
    parse_pipeline,
    run_pipeline,
)

DEFAULT_PIPELINE = "inline,symbol-dce"

__all__ = [
    "DEFAULT_PIPELINE",
    "PASSES",
    "PassContext",
    "PassInfo",
    "PassInvocation",
    "parse_pipeline",
    "run_pipeline",
]
