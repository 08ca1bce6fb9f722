"""select, max, min, clamp and compare of operands whose scales are far apart.

Their result is one of their operands (or a boolean), so it must not depend on how far apart
the operands' scales are: with f16 data the largest scale flushed the other operand to 0
(``jnp.minimum(SA([-1, 2], 4), SA([1, 1], 2**30))`` was ``[0, 0]``), and a compare of an
operand 2^60 above the other gave a wrong boolean in every data type. Each module is
rewritten once per data type and run with several scale assignments.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import compile_module, run_executable

# a is negative and b positive, so min picks a and max picks b at every scale: a result made
# of one operand, which one scale per tensor holds exactly in any data type.
MODULE = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<i1>, %z: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %0 = stablehlo.minimum %a, %b : tensor<4xf32>
  %1 = stablehlo.maximum %a, %b : tensor<4xf32>
  %nb = stablehlo.negate %b : tensor<4xf32>
  %2 = stablehlo.clamp %nb, %a, %b : tensor<4xf32>
  %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %3 = stablehlo.select %lt, %a, %b : tensor<4xi1>, tensor<4xf32>
  %4 = stablehlo.select %p, %a, %b : tensor<i1>, tensor<4xf32>
  %5 = stablehlo.compare GT, %a, %z, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %6 = stablehlo.compare GE, %z, %a, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %7 = stablehlo.compare EQ, %b, %z, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
      tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}
"""
A = np.array([-1.0, -2.0, -0.75, -3.0])
B = np.array([1.0, 2.0, 3.0, 0.5])
Z = np.array([0.0, 0.0, 1.0, 0.0])  # a runtime tensor: its zeros are not scale-free
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
# (k_a, k_b, k_z): operands 2^120 apart, 2^28 apart (the reported case), and equal.
EXPONENTS = ((-60, 60, 0), (60, -60, -60), (2, 30, 30), (0, 0, 0))


def _reference(ka: int, kb: int, kz: int, p: bool) -> list[np.ndarray]:
    a, b, z = A * 2.0 ** ka, B * 2.0 ** kb, Z * 2.0 ** kz
    return [np.minimum(a, b), np.maximum(a, b), np.clip(a, -b, b), np.where(a < b, a, b),
            a if p else b, a > z, z >= a, b == z]


@pytest.mark.parametrize("dtype", DTYPES)
def test_picked_operand_and_compare_are_exact_far_apart(dtype: str) -> None:
    data_type = DTYPES[dtype]
    scaled = compile_module(rewrite_text(MODULE, f"scalify{{data-dtype={dtype}}},simplify"))
    for ka, kb, kz in EXPONENTS:
        for p in (True, False):
            feed = [A.astype(data_type), np.float32(2.0 ** ka), B.astype(data_type),
                    np.float32(2.0 ** kb), np.array(p), Z.astype(data_type),
                    np.float32(2.0 ** kz)]
            out = run_executable(scaled, feed)
            got = [out[2 * i].astype(np.float64) * np.float64(out[2 * i + 1])
                   for i in range(5)] + out[10:]
            for index, (want, have) in enumerate(zip(_reference(ka, kb, kz, p), got,
                                                     strict=True)):
                np.testing.assert_array_equal(
                    have, want, err_msg=f"{dtype}, scales 2^{ka}, 2^{kb}, 2^{kz}, p={p}, "
                                        f"result {index}")
