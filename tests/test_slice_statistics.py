"""``slice-statistics``: the statistics of a tensor's pieces from one reduction.

The golden file shows the IR; these run it: a max is exact in any order, so each piece's
amax from the split reduction is bit-identical to the one it replaces, whatever dimension
is cut and however the pieces are laid out; sums regroup their terms (equal to rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module


def _pieces_module(shape: list[int], dimension: int, pieces: int, combiner: str) -> str:
    """Statistics of ``pieces`` equal slices of the argument along ``dimension``, listed
    last piece first, each through convert (bf16 -> f32) and abs (max) or a square (sum)."""
    size = shape[dimension] // pieces
    piece_shape = list(shape)
    piece_shape[dimension] = size
    whole = "x".join(map(str, shape))
    part = "x".join(map(str, piece_shape))
    dims = ", ".join(map(str, range(len(shape))))
    lines, results = [], []
    for k in reversed(range(pieces)):
        bounds = ", ".join(f"{k * size}:{(k + 1) * size}" if d == dimension else f"0:{n}"
                           for d, n in enumerate(shape))
        lines += [f"%s{k} = stablehlo.slice %arg0 [{bounds}] : (tensor<{whole}xbf16>) "
                  f"-> tensor<{part}xbf16>",
                  f"%f{k} = stablehlo.convert %s{k} : (tensor<{part}xbf16>) "
                  f"-> tensor<{part}xf32>",
                  f"%a{k} = stablehlo.abs %f{k} : tensor<{part}xf32>",
                  f"%m{k} = stablehlo.reduce(%a{k} init: %zero) applies stablehlo.{combiner} "
                  f"across dimensions = [{dims}] : (tensor<{part}xf32>, tensor<f32>) "
                  "-> tensor<f32>"]
        results.append(f"%m{k}")
    types = ", ".join(["tensor<f32>"] * pieces)
    body = "\n    ".join(lines)
    return (f"func.func public @main(%arg0: tensor<{whole}xbf16>) -> ({types}) {{\n"
            "    %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"    {body}\n    return {', '.join(results)} : {types}\n}}\n")


def _bf16(shape: list[int], seed: int) -> np.ndarray:
    import ml_dtypes

    values = np.random.default_rng(seed).standard_normal(shape) * np.exp2(
        np.random.default_rng(seed + 1).integers(-20, 20, shape))
    return values.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize(("shape", "dimension", "pieces"), [
    ([2, 8, 24], 2, 3),  # a qkv projection's thirds
    ([6, 5], 0, 3),  # rows
    ([4, 6, 3], 1, 2),  # a middle dimension
])
def test_each_piece_keeps_its_maximum(shape: list[int], dimension: int, pieces: int) -> None:
    original = _pieces_module(shape, dimension, pieces, "maximum")
    merged = rewrite_text(original, "slice-statistics")
    assert merged.count("stablehlo.reduce(") == 1, merged
    x = _bf16(shape, sum(shape))
    for want, got in zip(run_module(original, [x]), run_module(merged, [x]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_sums_of_pieces_are_regrouped_not_changed() -> None:
    original = _pieces_module([4, 64], 1, 4, "add")
    merged = rewrite_text(original, "slice-statistics")
    assert merged.count("stablehlo.reduce(") == 1, merged
    x = _bf16([4, 64], 7)
    for want, got in zip(run_module(original, [x]), run_module(merged, [x]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_simplify_merges_pieces_only_where_it_does_not_group() -> None:
    """Grouping takes each piece's statistic in its rows: slice-statistics is what TPU
    targets (``group-statistics=false``) run instead."""
    original = _pieces_module([2, 8, 24], 2, 3, "maximum")
    split = "across dimensions = [0, 1, 3]"  # the pieces' reduction of the split tensor
    assert split in rewrite_text(original, "simplify{group-statistics=false}")
    grouped = rewrite_text(original, "simplify")
    assert split not in grouped and "stablehlo.concatenate" in grouped
