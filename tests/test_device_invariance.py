"""Which shard_map arguments every device holds in full: read from a manual computation's
``in_shardings``, with the mesh named or inline (the rewrite's behaviour on whole regions is
in testdata/golden/scalify/sharding.mlir)."""

from __future__ import annotations

import pytest
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_mlir

from scalify_hlo.rewrites.collectives import _replicated_over


@pytest.mark.parametrize(("sharding", "axes", "replicated"), [
    ('<@mesh, [{"data"}]>', {"data"}, False),
    ('<@mesh, [{"data"}]>', {"model"}, True),  # split over an axis the region does not own
    ("<@mesh, [{}, {}]>", {"data"}, True),
    ('<mesh<["d"=8]>, [{}, {"d"}]>', {"d"}, False),  # the mesh's own "d" is not a split
    ('<mesh<["d"=8]>, [{}]>', {"d"}, True),
    ('<@mesh, [{"data":(1)2}]>', {"data"}, False),  # a sub-axis of a manual axis
    ('<@mesh, [{}], replicated={"data"}>', {"data"}, True),
])
def test_replicated_over_manual_axes(sharding: str, axes: set[str], replicated: bool) -> None:
    from jax._src.lib.mlir.dialects import sdy

    with jax_mlir.make_ir_context():
        per_value = ir.Attribute.parse(f"#sdy.sharding_per_value<[{sharding}]>")
        (parsed,) = sdy.TensorShardingPerValueAttr(per_value).shardings
        assert _replicated_over(parsed, axes) is replicated
