"""``group-statistics``: the same maxima from fewer reductions.

The golden file shows one group's IR; these tests run groups: a max is exact in any order,
so every statistic taken together is bit-identical to the one it replaces.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module

WIDTH = 4100  # a row of the argument: up to three rows of 2048 per statistic


def _maxima_module(count: int, lengths: list[int]) -> str:
    """``count`` max-magnitude statistics of leading pieces of the argument's rows, all
    returned (so all are taken at one point, the return)."""
    lines, results = [], []
    for i in range(count):
        length = lengths[i % len(lengths)]
        lines += [f"%r{i} = stablehlo.slice %arg0 [{i}:{i + 1}, 0:{length}] "
                  f": (tensor<{count}x{WIDTH}xf32>) -> tensor<1x{length}xf32>",
                  f"%a{i} = stablehlo.abs %r{i} : tensor<1x{length}xf32>",
                  f"%m{i} = stablehlo.reduce(%a{i} init: %zero) applies stablehlo.maximum "
                  f"across dimensions = [0, 1] : (tensor<1x{length}xf32>, tensor<f32>) "
                  "-> tensor<f32>"]
        results.append(f"%m{i}")
    types = ", ".join(["tensor<f32>"] * count)
    body = "\n    ".join(lines)
    return (f"func.func public @main(%arg0: tensor<{count}x{WIDTH}xf32>) -> ({types}) {{\n"
            "    %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"    {body}\n    return {', '.join(results)} : {types}\n}}\n")


@pytest.mark.parametrize(("count", "lengths", "reduces"), [
    # two groups (64 + 6): rows each, then one masked reduce for both (taken at one point)
    (70, [1000, 2048, 3000, 4100], 3),
    (70, [1000, 2000], 2),  # every statistic one row: two row reductions, no second stage
    (10, [5, 4100], 2),  # one group: its rows, then its masked reduce
])
def test_grouped_maxima_are_the_maxima(count: int, lengths: list[int], reduces: int) -> None:
    """Up to ``GROUP`` statistics a group, a row reduce each and one masked reduce for the
    groups of one point (none where every tensor is one row), and every maximum
    bit-identical."""
    original = _maxima_module(count, lengths)
    grouped = rewrite_text(original, "group-statistics")
    assert grouped.count("stablehlo.reduce") == reduces, grouped
    x = np.random.default_rng(count).standard_normal((count, WIDTH)).astype(np.float32)
    for want, got in zip(run_module(original, [x]), run_module(grouped, [x]), strict=True):
        np.testing.assert_array_equal(got, want)
