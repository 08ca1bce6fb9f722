"""The passes of scalify-hlo; importing this package registers every one of them."""

from scalify_hlo.rewrites import (  # noqa: F401  (registration)
    collective_combine,
    dot_transposes,
    fp8_cast_fence,
    fp8_dots,
    gradient_join,
    group_statistics,
    inline,
    loop_scales,
    mlir_passes,
    rescale,
    scalar_lanes,
    scale_epochs,
    scalify,
    simplify,
    slice_statistics,
    statistics_fence,
)
from scalify_hlo.rewrites.registry import (
    PASSES,
    RECORD_KINDS,
    ModulePass,
    Option,
    PassContext,
    Record,
    parse_pipeline,
    print_pipeline,
    run_pipeline,
)

__all__ = [
    "PASSES",
    "PassContext",
    "ModulePass",
    "Option",
    "RECORD_KINDS",
    "Record",
    "parse_pipeline",
    "print_pipeline",
    "run_pipeline",
]
