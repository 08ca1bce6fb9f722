"""f32 mode on a program that already computes in 16 bits (a bf16 mixed-precision step).

``scalify{data-dtype=f32}`` promises the original's numbers: a power-of-two scale commutes
with rounding. A bf16 op's data is f32, though, so each op that makes new values rounds its
data to the op's own significand (``Trait.ROUNDS``), with a reduce_precision that XLA keeps.
Without it the rewrite computed a bf16 step in f32: its gradients 0.5% from the original's.

Both programs are compiled with ``xla_allow_excess_precision=false``: by default XLA:CPU may
drop a bf16 round trip (it keeps a bf16 dot's f32 result where an f32 convert follows), in
the original and the rewrite alike, but not at the same places.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module
from scalify_hlo.signature import entry_signature, join_outputs, split_inputs
from testdata import models

F32_MODE = "inline,scalify{data-dtype=f32},simplify"

# Elementwise ops, a dot, a sum, a sqrt and a nonlinear op in bf16 (and in f16 below),
# between f32 converts: what a mixed-precision layer is made of.
CHAIN = """
func.func public @main(%x: tensor<4x8xf32>, %w: tensor<8x8xbf16>, %b: tensor<8xbf16>)
    -> (tensor<4x8xf32>, tensor<4xbf16>) {
  %xb = stablehlo.convert %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %d = stablehlo.dot_general %xb, %w, contracting_dims = [1] x [0]
      : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<8xbf16>) -> tensor<4x8xbf16>
  %s = stablehlo.add %d, %bb : tensor<4x8xbf16>
  %t = stablehlo.tanh %s : tensor<4x8xbf16>
  %m = stablehlo.multiply %t, %s : tensor<4x8xbf16>
  %q = stablehlo.multiply %m, %m : tensor<4x8xbf16>
  %z = stablehlo.constant dense<0.0> : tensor<bf16>
  %r = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4xbf16>
  %n = stablehlo.sqrt %r : tensor<4xbf16>
  %nb = stablehlo.broadcast_in_dim %n, dims = [0] : (tensor<4xbf16>) -> tensor<4x8xbf16>
  %y = stablehlo.divide %m, %nb : tensor<4x8xbf16>
  %yf = stablehlo.convert %y : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  return %yf, %n : tensor<4x8xf32>, tensor<4xbf16>
}
"""


def run_strict(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``text`` with every bf16/f16 rounding kept (no excess precision)."""
    return run_module(text, inputs, {"xla_allow_excess_precision": False})


def assert_same_numbers(original: str, inputs: list[np.ndarray], seed: int,
                        tiny: float = 0.0, rtol: float = 0.0) -> None:
    """The f32-mode rewrite, on the inputs split at random powers of two, gives the
    original's outputs: bit for bit where their magnitude is at least ``tiny`` (the smallest
    normal of an f16 original, below which its subnormals keep fewer bits than the data;
    there within ``tiny``), or within ``rtol`` of each output's largest magnitude (f32
    outputs of a step, which XLA fuses differently in the two programs: a few ulps)."""
    signature = entry_signature(original)
    rewritten = rewrite_text(original, F32_MODE)
    rng = np.random.default_rng(seed)
    scales = [float(2.0 ** rng.integers(-30, 31)) for _ in inputs]
    raw = run_strict(rewritten, split_inputs(signature, inputs, scales))
    for index, (got, want) in enumerate(zip(join_outputs(signature, raw),
                                            run_strict(original, inputs), strict=True)):
        got = np.asarray(got, np.float32).astype(want.dtype).astype(np.float64)
        want = want.astype(np.float64)
        if rtol:
            error = np.max(np.abs(got - want)) / np.max(np.abs(want))
            assert error <= rtol, f"output {index}: {error:.2e} of its largest magnitude"
            continue
        normal = np.abs(want) >= tiny
        differ = int(np.sum(got[normal] != want[normal]))
        assert differ == 0, f"output {index}: {differ} of {want.size} elements differ"
        assert np.all(np.abs(got - want)[~normal] <= tiny), f"output {index}: subnormals"


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_a_16_bit_chain_in_f32_data_is_the_original(dtype: str, seed: int):
    text = CHAIN.replace("bf16", dtype)
    rng = np.random.default_rng(seed)
    narrow = {"bf16": jnp.bfloat16, "f16": np.float16}[dtype]
    inputs = [rng.normal(size=(4, 8)).astype(np.float32),
              (rng.normal(size=(8, 8)) * 0.4).astype(narrow),
              rng.normal(size=8).astype(narrow)]
    assert_same_numbers(text, inputs, seed, tiny=float(np.finfo(np.float16).tiny)
                        if dtype == "f16" else 0.0)


@functools.cache
def bf16_gpt() -> tuple[str, list[np.ndarray]]:
    step, args = models.gpt_step(1, 32, 2, 8, compute_dtype=jnp.bfloat16)
    return models.export_text(step, args), [np.asarray(a) for a in jax.tree.leaves(args)]


def test_a_bf16_mixed_precision_gpt_step_in_f32_data_is_the_original():
    """The whole step (bf16 forward and backward, f32 Adam and loss): every output within a
    few f32 ulps (it was 0.5% off: every bf16 op computed in f32)."""
    text, inputs = bf16_gpt()
    assert "bf16" in text
    assert_same_numbers(text, inputs, seed=3, rtol=1e-6)
