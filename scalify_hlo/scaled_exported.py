"""The rewritten module as a ``jax.export.Exported``: its flat (data, scale) avals and
shardings, a scale replicated wherever its data is sharded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from jax import export as jax_export
from jax.extend import mlir as jax_mlir
from jax.extend.mlir.dialects import stablehlo

from scalify_hlo.errors import ScalifyError
from scalify_hlo.leaf_specs import LeafSpec
from scalify_hlo.signature import ELEMENT_DTYPES, EntrySignature


def export_step(jitted: Any, examples: list[Any]) -> jax_export.Exported:
    """``jax.export`` of the jitted step; what it cannot serialize (a host callback: a
    ``jax.debug.print`` in the step) is a ScalifyError that says so, not jax's
    NotImplementedError from deep inside the export."""
    try:
        return jax_export.export(jitted)(*examples)
    except NotImplementedError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = ("; remove jax.debug.print, jax.debug.callback and io_callback from the step"
                if "callback" in first else "")
        raise ScalifyError(f"cannot export the step with jax.export: {first}{hint}") from None


def _flat_tree(count: int) -> Any:
    return jax.tree.structure((tuple(range(count)), {}))


def scaled_exported(original: jax_export.Exported, text: str, signature: EntrySignature,
                     in_specs: list[LeafSpec], out_specs: list[LeafSpec],
                     delayed_input: bool = False,
                     delayed_result: bool = False) -> jax_export.Exported:
    """An ``Exported`` for the rewritten module (``text``, whose entry signature is
    ``signature``): flat (data, scale) avals and shardings; ``delayed_input`` /
    ``delayed_result``: the module takes / returns the vector of delayed exponents last
    (``rewrites/delayed_statistics.py``), replicated as a scale is."""
    in_avals = tuple(jax.core.ShapedArray(s.shape, ELEMENT_DTYPES[s.element])
                     for s in signature.inputs)
    out_avals = tuple(jax.core.ShapedArray(s.shape, ELEMENT_DTYPES[s.element])
                      for s in signature.results)

    def split(shardings: tuple[Any, ...], specs: list[LeafSpec],
              delayed: bool) -> tuple[Any, ...]:
        flat: list[Any] = []
        for sharding, spec in zip(shardings, specs, strict=True):
            flat.append(sharding)
            if spec.scaled:
                flat.append(_replicated_like(sharding))
        if delayed:
            flat.append(_replicated_like(shardings[0]) if shardings else None)
        return tuple(flat)

    serialized = jax_mlir.serialize_portable_artifact(text, stablehlo.get_current_version())
    changes: dict[str, Any] = {
        "in_tree": _flat_tree(len(in_avals)),
        "in_avals": in_avals,
        "out_tree": jax.tree.structure(tuple(range(len(out_avals)))),
        "out_avals": out_avals,
        "in_shardings_hlo": split(original.in_shardings_hlo, in_specs, delayed_input),
        "out_shardings_hlo": split(original.out_shardings_hlo, out_specs, delayed_result),
        "module_kept_var_idx": tuple(range(len(in_avals))),
        "mlir_module_serialized": serialized,
        "_get_vjp": None,
    }
    if getattr(original, "_has_named_shardings", False):
        changes["_in_named_shardings"] = split(original._in_named_shardings, in_specs,
                                               delayed_input)
        changes["_out_named_shardings"] = split(original._out_named_shardings, out_specs,
                                                delayed_result)
    return dataclasses.replace(original, **changes)


def _replicated_like(sharding: Any) -> Any:
    """The sharding of a scale: replicated wherever its data is sharded."""
    if sharding is None:
        return None
    if hasattr(sharding, "mesh") and hasattr(sharding, "spec"):  # a NamedSharding
        return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
    if hasattr(sharding, "is_replicated"):  # an HloSharding
        return type(sharding).replicate()
    return None
