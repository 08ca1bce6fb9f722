"""The second program of a step with delayed statistics: the one a fed-back call runs.

``Policy(statistics="delayed")`` rewrites the step with ``delayed-statistics=measure`` (the
first call: it measures, applies and returns its statistics' exponents);
``compile_scaled`` also needs the same pipeline with ``use``, which takes the exponents the
call before returned (rewrites/delayed_statistics.py, docs/scaled-signature.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from jax import export as jax_export
from jax.extend.mlir import ir

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.errors import ScalifyError
from scalify_hlo.leaf_specs import LeafSpec
from scalify_hlo.rewrites.delayed_statistics import delayed_count, with_delayed_mode
from scalify_hlo.rewrites.registry import ModulePass, parse_pipeline
from scalify_hlo.scaled_exported import scaled_exported
from scalify_hlo.signature import EntrySignature, signature_of


def delayed_program(exported_text: str, passes: str | Sequence[ModulePass], count: int,
                    original: jax_export.Exported, in_specs: list[LeafSpec],
                    out_specs: list[LeafSpec]) -> tuple[str, jax_export.Exported]:
    """The text and ``Exported`` of ``passes`` run with ``delayed-statistics=use`` on the
    step's exported text; ``count``: the exponents the ``measure`` rewrite returns (the
    two must have the same points)."""
    use = with_delayed_mode(parse_pipeline(passes) if isinstance(passes, str) else passes,
                            "use")
    signature: list[EntrySignature] = []
    counts: list[int] = []

    def inspect(module: ir.Module) -> None:
        signature.append(signature_of(module))
        counts.append(delayed_count(module))

    result = rewrite_module_source(exported_text, use, debug_info=True, inspect=inspect)
    if result.error is not None or result.output is None or counts != [count]:
        raise ScalifyError("cannot rewrite the step with delayed statistics: "
                           f"{result.error or 'its statistics differ from the first rewrite'}")
    text = result.output.decode()
    return text, scaled_exported(original, text, signature[0], in_specs, out_specs,
                                 delayed_input=True, delayed_result=True)
