"""f16 data with power-of-two scales covers tensors from 1e-9 to 1e9, which plain f16 cannot."""

from __future__ import annotations

import numpy as np
from step_helpers import assert_close_per_tensor

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module
from scalify_hlo.signature import entry_signature, join_outputs, split_inputs

# x ~ 1e9, w ~ 1e-9, s ~ 1e-9: dot products, products, sums and a sqrt across the range.
WIDE_RANGE = """
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %s: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %y = stablehlo.multiply %h, %s : tensor<8x4xf32>
  %sq = stablehlo.multiply %x, %x : tensor<8x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %norm = stablehlo.sqrt %sum : tensor<8xf32>
  %c = stablehlo.constant dense<1.0e-3> : tensor<8x16xf32>
  %z = stablehlo.multiply %x, %c : tensor<8x16xf32>
  %y2 = stablehlo.add %y, %y : tensor<8x4xf32>
  return %y, %y2, %norm, %z : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x16xf32>
}
"""


def test_f16_data_spans_1e_minus_9_to_1e9() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 16)) * 1e9).astype(np.float32)
    w = (rng.standard_normal((16, 4)) * 1e-9).astype(np.float32)
    s = (rng.standard_normal((8, 4)) * 1e-9).astype(np.float32)
    with np.errstate(over="ignore"):  # plain f16 overflows x and flushes w
        assert np.isinf(np.float16(x)).any() and (np.float16(w) == 0).all()
    reference = run_module(WIDE_RANGE, [x, w, s])
    signature = entry_signature(WIDE_RANGE)
    scaled = rewrite_text(WIDE_RANGE, "scalify{data-dtype=f16},simplify")
    raw = run_module(scaled, split_inputs(signature, [x, w, s], data_dtype=np.float16))
    assert all(r.dtype == np.float16 for r in raw[0::2])
    got = join_outputs(signature, raw)
    # f16 keeps 11 significant bits: a few roundings of 2^-11 each, plus a 16-term dot.
    assert_close_per_tensor(reference, got, rtol=4e-3)
