"""fence-fp8-casts on a whole step: a partitioned transformer step's weights cast to FP8 for
their forward and backward dots are fenced once each, activations never, and one device is
left alone (the pass's own cases are in testdata/golden/fence-fp8-casts)."""

from __future__ import annotations

import re

import pytest

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.policy import DEFAULT_PIPELINE
from tests.helpers import TESTDATA

_PARTITIONS = re.compile(r"mhlo\.num_partitions = \d+")
_BARRIER_OF_CAST = re.compile(
    r"(%\S+) = stablehlo\.convert (%\S+) : \(tensor<[^>]*>\) -> tensor<[^>]*xf8E[^>]*>\n"
    r"\s*%\S+ = stablehlo\.optimization_barrier \1 ")


def _rewritten(partitions: int) -> tuple[str, dict[str, int]]:
    text = (TESTDATA / "steps" / "transformer_step.mlir").read_text()
    text = _PARTITIONS.sub(f"mhlo.num_partitions = {partitions}", text)
    result = rewrite_module_source(text, DEFAULT_PIPELINE)
    assert result.error is None, result.error
    return result.output.decode(), result.context.stats


@pytest.mark.parametrize("partitions", [1, 2])
def test_weight_casts_are_fenced_in_partitioned_steps_only(partitions: int) -> None:
    text, stats = _rewritten(partitions)
    fenced = _BARRIER_OF_CAST.findall(text)
    assert stats.get("simplify.fp8-casts-fenced", 0) == len(fenced)
    if partitions == 1:
        assert not fenced
        return
    assert fenced
    for cast, _ in fenced:  # read by nothing but its barrier
        assert len(re.findall(re.escape(cast) + r"\b(?![#:])", text)) == 2
