"""The passes of scalify-hlo; importing this package registers every one of them."""

from scalify_hlo.rewrites import (  # noqa: F401  (registration)
    fp8_dots,
    inline,
    loop_scales,
    mlir_passes,
    rescale,
    scale_epochs,
    scalify,
    simplify,
)
from scalify_hlo.rewrites.registry import (
    PASSES,
    RECORD_KINDS,
    PassContext,
    PassInfo,
    PassInvocation,
    Record,
    parse_pipeline,
    run_pipeline,
)

__all__ = [
    "PASSES",
    "PassContext",
    "PassInfo",
    "PassInvocation",
    "RECORD_KINDS",
    "Record",
    "parse_pipeline",
    "run_pipeline",
]
