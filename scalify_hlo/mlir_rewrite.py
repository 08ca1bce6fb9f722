"""MLIR's greedy pattern driver, which jaxlib ships only under a private module path.

``jaxlib.mlir._mlir_libs._mlir.rewrite`` has no public re-export (``jax.extend.mlir`` has
``ir`` and ``passmanager`` only), so this is the one place that imports it: if a jaxlib
moves it, the first rewrite that needs it fails with one line that says so, not with an
import error at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jax.extend.mlir import ir

from scalify_hlo.errors import ScalifyError

_PRIVATE_PATH = "jaxlib.mlir._mlir_libs._mlir.rewrite"

try:
    from jaxlib.mlir._mlir_libs._mlir import rewrite as _bindings
except ImportError:  # a jaxlib that moved or dropped it
    _bindings = None

# A pattern: called with each op of its name and a rewriter; returns True for "no match".
PatternFn = Callable[[ir.OpView, object], bool]


def walk_and_apply_patterns(root: ir.Operation, patterns: Mapping[str, PatternFn]) -> None:
    """Apply ``patterns`` (op name -> pattern) to the ops nested in ``root``'s regions, in
    one walk in C++ (``walk_and_apply_patterns``: neither folds nor erases by itself)."""
    if _bindings is None:
        raise ScalifyError(f"this jaxlib has no MLIR pattern rewrite bindings at "
                           f"{_PRIVATE_PATH}: install a jaxlib version that scalify-hlo "
                           f"supports (pyproject.toml)")
    pattern_set = _bindings.RewritePatternSet()
    for name, pattern in patterns.items():
        pattern_set.add(name, pattern)
    _bindings.walk_and_apply_patterns(root, pattern_set.freeze())
