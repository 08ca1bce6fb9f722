"""f32 mode on a program that already computes in 16 bits (a bf16 mixed-precision step).

``scalify{data-dtype=f32}`` promises the original's numbers: a power-of-two scale commutes
with rounding. A bf16 op's data is f32, though, so each op that makes new values rounds its
data to the op's own significand (``Trait.ROUNDS``: a bf16 -> f32 round trip, which XLA
keeps), except a result only widened to f32, which XLA keeps in f32 (its default
``xla_allow_excess_precision``). Without the rounding the rewrite computed a bf16 step in
f32: its gradients 0.4-0.7% from ``jax.jit``'s, a bf16 chain nearly every element off.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module
from scalify_hlo.signature import entry_signature, join_outputs, split_inputs
from tests.op_cases import CASES

F32_MODE = "inline,scalify{data-dtype=f32},simplify"

# Elementwise ops, a dot, a sum, a sqrt and a nonlinear op in bf16 between f32 converts:
# what a mixed-precision layer is made of.
CHAIN = """
func.func public @main(%x: tensor<4x8xf32>, %w: tensor<8x8xbf16>, %b: tensor<8xbf16>)
    -> tensor<4x8xf32> {
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
  return %yf : tensor<4x8xf32>
}
"""


def assert_same_numbers(original: str, inputs: list[np.ndarray], seed: int) -> None:
    """The f32-mode rewrite, on the inputs split at random powers of two, gives the
    original's outputs bit for bit (NaN where it has NaN)."""
    signature = entry_signature(original)
    rewritten = rewrite_text(original, F32_MODE)
    rng = np.random.default_rng(seed)
    scales = [float(2.0 ** rng.integers(-30, 31)) for _ in inputs]
    raw = run_module(rewritten, split_inputs(signature, inputs, scales))
    for index, (got, want) in enumerate(zip(join_outputs(signature, raw),
                                            run_module(original, inputs), strict=True)):
        got = np.asarray(got, np.float32).astype(want.dtype).astype(np.float64)
        want = want.astype(np.float64)
        differ = int(np.sum((got != want) & ~(np.isnan(got) & np.isnan(want))))
        assert differ == 0, f"output {index}: {differ} of {want.size} elements differ"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_bf16_chain_in_f32_data_is_the_original(seed: int):
    """Bit for bit, at input scales up to 2^+-30. (An f16 chain rounds the same way, but
    XLA:CPU contracts an f16 ``a * b + c`` into one rounding: not comparable bit for bit.)"""
    rng = np.random.default_rng(seed)
    inputs = [rng.normal(size=(4, 8)).astype(np.float32),
              (rng.normal(size=(8, 8)) * 0.4).astype(jnp.bfloat16),
              rng.normal(size=8).astype(jnp.bfloat16)]
    assert_same_numbers(CHAIN, inputs, seed)


# Cases of the op corpus whose ops reduce or combine (their regions round each partial sum),
# in bf16: among them an all-reduce, whose region must stay a plain add (XLA runs only
# simple reducers across devices: rounding inside it made the module fail to compile).
REGION_CASES = ("reduce_add", "reduce_window_add_padded_overlapping", "scatter_add",
                "select_and_scatter_overlapping", "collectives_single_replica",
                "sdy_manual_computation_collectives", "dot_general_batch", "layernorm")


@pytest.mark.parametrize("name", REGION_CASES)
def test_bf16_op_cases_in_f32_data_are_the_original(name: str):
    (case,) = [case for case in CASES if case.name == name]
    text = re.sub(r"xf32>", "xbf16>", case.mlir).replace("<f32>", "<bf16>")
    inputs = [x.astype(jnp.bfloat16) if x.dtype == np.float32 else x
              for x in map(np.asarray, case.inputs(np.random.default_rng(0)))]
    assert_same_numbers(text, inputs, seed=5)


RNG = np.random.default_rng(11)
PARAMS = {"w1": jnp.asarray(RNG.normal(size=(16, 32)) * 0.3, jnp.float32),
          "w2": jnp.asarray(RNG.normal(size=(32, 16)) * 0.2, jnp.float32)}
X = jnp.asarray(RNG.normal(size=(8, 16)), jnp.float32)
LABELS = jnp.asarray(RNG.integers(0, 16, size=8))


def cast_in_the_loss(p: dict, x: jax.Array) -> jax.Array:
    """f32 weights cast to bf16 in the loss, a bf16 forward pass, an f32 loss."""
    b = jax.tree.map(lambda a: a.astype(jnp.bfloat16), p)
    out = (jnp.tanh(x.astype(jnp.bfloat16) @ b["w1"]) @ b["w2"]).astype(jnp.float32)
    return jnp.mean(out ** 2)


def flax_style(p: dict, x: jax.Array) -> jax.Array:
    """bf16 activations with an f32 layer norm, a bf16 GELU and f32 logits (a Flax module
    with ``dtype=bfloat16``)."""
    h = jnp.dot(x.astype(jnp.bfloat16), p["w1"].astype(jnp.bfloat16)).astype(jnp.float32)
    h = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-6)
    h = jax.nn.gelu(h.astype(jnp.bfloat16))
    logits = jnp.dot(h, p["w2"].astype(jnp.bfloat16)).astype(jnp.float32)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), LABELS[:, None], 1))


@pytest.mark.parametrize("loss", [cast_in_the_loss, flax_style])
@pytest.mark.parametrize("weight_scale", [1.0, 2.0 ** -20])
def test_a_mixed_precision_step_in_f32_data_is_jits(loss, weight_scale: float):
    """The loss and gradients of a bf16 mixed-precision step, rewritten in f32 data through
    ``compile_scaled``, equal ``jax.jit``'s bit for bit (they were 0.4-0.7% off)."""
    def step(p: dict, x: jax.Array) -> tuple[jax.Array, dict]:
        return jax.value_and_grad(loss)(p, x)

    params = jax.tree.map(lambda w: w * weight_scale, PARAMS)
    scaled = compile_scaled(step, params, X, policy=Policy(data_dtype="float32",
                                                            fp8_dots=False),
                            return_scaled=False)
    for got, want in zip(jax.tree.leaves(scaled(params, X)),
                         jax.tree.leaves(jax.jit(step)(params, X)), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
