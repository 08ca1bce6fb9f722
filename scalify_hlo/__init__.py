"""scalify-hlo: scale propagation on StableHLO for FP8 / FP16 training of JAX models.

The Python API: ``compile_scaled(fn, *args, policy=Policy(...))`` returns a step that takes and
returns pytrees (floating leaves as arrays or ``ScaledArray``s) and composes with ``jax.jit``.
"""

from __future__ import annotations

from typing import Any

from scalify_hlo._checkout import find_checkout_folders

__version__ = "0.1.0"

__all__ = ["Policy", "Report", "ScaledArray", "ScaledStep", "as_scaled", "compile_scaled",
           "export", "load_scaled", "scale_tree", "unscale_tree"]

_LAZY = {
    "Policy": "scalify_hlo.policy",
    "Report": "scalify_hlo.compile",
    "ScaledStep": "scalify_hlo.compile",
    "compile_scaled": "scalify_hlo.compile",
    "export": "scalify_hlo.compile",
    "load_scaled": "scalify_hlo.saved",
    "ScaledArray": "scalify_hlo.scaled_array",
    "as_scaled": "scalify_hlo.scaled_array",
    "scale_tree": "scalify_hlo.scaled_array",
    "unscale_tree": "scalify_hlo.scaled_array",
}


find_checkout_folders()  # Python run in a checkout finds scalify_hlo.rewrites in rewrites/


def __getattr__(name: str) -> Any:
    """Import the API lazily, so that ``scalify_hlo.module_io`` and the CLI's --help stay fast."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scalify_hlo' has no attribute '{name}'")
