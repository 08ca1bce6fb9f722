"""Additive attention masks: ``scores + bias`` where the bias is zeros and a sentinel.

The add's common scale was the larger one, the bias's (2^29 for -1e9, 2^127 for
``finfo(f32).min``), and f16 data at that scale flushed every score to 0: the softmax over
the unmasked keys came out uniform where the original's is not (0.49 off, scores at scale
1). Each form below is how a real model builds the bias. One row is masked entirely: where
the scores are below the rounding step of the sentinel (64 for -1e9) the original gives a
uniform row over the least masked keys, which the rewrite must match; above it, the
original's row is rounding noise, and the rewrite's must only be a finite distribution. So
too for T5's position bias plus a mask at every scale: its sentinel saturates at the bias's
scale, 2^-3, and is no longer far below the scores once they are brought to theirs.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled

RNG = np.random.default_rng(0)
SCORES = RNG.normal(size=(4, 8)).astype(np.float32)
MASK = RNG.random(size=(4, 8)) > 0.3
MASK[2] = False  # a row with every key masked
CAUSAL = np.tril(np.ones((4, 8), bool))
POSITION_BIAS = (0.1 * RNG.normal(size=(4, 8))).astype(np.float32)


def _where_bias(scores: jax.Array, mask: jax.Array) -> jax.Array:
    return jax.nn.softmax(scores + jnp.where(mask, 0.0, -1e9), -1)


def _finfo_min_bias(scores: jax.Array, mask: jax.Array) -> jax.Array:
    bias = (1.0 - mask.astype(jnp.float32)) * jnp.finfo(jnp.float32).min
    return jax.nn.softmax(scores + bias, -1)


def _causal_and_padding(scores: jax.Array, mask: jax.Array) -> jax.Array:
    causal = jnp.where(CAUSAL, 0.0, -1e9)  # a constant of the program
    return jax.nn.softmax(scores + causal + jnp.where(mask, 0.0, -1e9), -1)


def _open_keys(fn: Any) -> np.ndarray:
    return MASK & CAUSAL if fn is _causal_and_padding else MASK


def _position_bias_then_mask(scores: jax.Array, mask: jax.Array) -> jax.Array:
    bias = POSITION_BIAS + jnp.where(mask, 0.0, jnp.finfo(jnp.float32).min)  # T5's
    return jax.nn.softmax(scores + bias, -1)


@pytest.mark.parametrize("data_dtype", ["float32", "float16"])
@pytest.mark.parametrize("fn", [_where_bias, _finfo_min_bias, _causal_and_padding,
                                _position_bias_then_mask])
def test_an_additive_mask_keeps_the_scores_of_the_unmasked_keys(data_dtype: str,
                                                                fn: Any) -> None:
    step = compile_scaled(fn, SCORES, MASK, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    atol = 1e-6 if data_dtype == "float32" else 3e-3
    for k in (-8, 0, 8):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(SCORES), scale), MASK))
        want = np.asarray(jax.jit(fn)(jnp.asarray(SCORES) * scale, MASK))
        rows = _open_keys(fn).any(-1) if k > 0 or fn is _position_bias_then_mask else ...
        np.testing.assert_allclose(got[rows], want[rows], rtol=0, atol=atol,
                                   err_msg=f"scale 2^{k}")
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-3)


def _int_mask_bias(scores: jax.Array, mask: jax.Array) -> jax.Array:
    bias = (1.0 - mask.astype(jnp.float32)) * jnp.finfo(jnp.float32).min  # HF's
    return jax.nn.softmax(scores + bias, -1)


# A tokenizer's attention mask is int32: its values are unknown at rewrite time, but a float
# made from integers times finfo(f32).min is 0 or a sentinel whatever they are.
@pytest.mark.parametrize("data_dtype", ["float32", "float16"])
def test_an_int_mask_bias_keeps_the_scores_of_the_unmasked_keys(data_dtype: str) -> None:
    mask = MASK.astype(np.int32)
    step = compile_scaled(_int_mask_bias, SCORES, mask, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    for k in (-8, 0, 8):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(SCORES), scale), mask))
        want = np.asarray(jax.jit(_int_mask_bias)(jnp.asarray(SCORES) * scale, mask))
        np.testing.assert_allclose(got, want, rtol=0, atol=3e-3, err_msg=f"scale 2^{k}")


def test_the_gradient_through_a_masked_softmax_matches() -> None:
    def grad(scores: jax.Array, mask: jax.Array) -> jax.Array:
        return jax.grad(lambda s: jnp.sum(_where_bias(s, mask) * SCORES))(scores)

    step = compile_scaled(grad, SCORES, MASK, return_scaled=False,
                          policy=Policy(fp8_dots=False))
    want = np.asarray(jax.jit(grad)(SCORES, MASK))
    np.testing.assert_allclose(np.asarray(step(SCORES, MASK)), want, rtol=0,
                               atol=3e-3 * np.abs(want).max())


def _offset_where_masked(scores: jax.Array, mask: jax.Array) -> jax.Array:
    return scores + jnp.where(mask, 0.0, 1.0)  # zeros and an ordinary constant: no sentinel


# The bias follows the scores' scale only down to where its ordinary constants keep their
# values: f32 data at 2^-110 saturated the 1.0 at 2^100 of that scale (2^-10).
@pytest.mark.parametrize("data_dtype, scales", [("float32", (-110, 0, 20)),
                                                ("float16", (-5, 0, 20))])
def test_a_bias_of_ordinary_constants_keeps_its_values(data_dtype: str,
                                                       scales: tuple[int, ...]) -> None:
    step = compile_scaled(_offset_where_masked, SCORES, MASK, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    rtol = 1e-6 if data_dtype == "float32" else 2e-3
    for k in scales:
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(SCORES), scale), MASK))
        want = np.asarray(jax.jit(_offset_where_masked)(jnp.asarray(SCORES) * scale, MASK))
        atol = 0 if data_dtype == "float32" else rtol * np.abs(want).max()  # f16: x + 1 ~ 0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"scale 2^{k}")


def _where_select(scores: jax.Array, mask: jax.Array) -> jax.Array:
    return jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(jnp.float32).min), -1)  # Flax's


def _where_select_causal(scores: jax.Array, mask: jax.Array) -> jax.Array:
    return jax.nn.softmax(jnp.where(CAUSAL & mask, scores, -1e9), -1)


# Scores far below 1 (a muP model's zero-initialized queries give exactly 0): the sentinel
# saturated at the scores' scale, -2^-22 at 2^-38, and exp of it is 1: the masked keys took
# as much weight as the open ones (0.75 off). A saturated sentinel now keeps 2^7 or more.
@pytest.mark.parametrize("fn", [_where_select, _where_select_causal, _where_bias,
                                _finfo_min_bias, _causal_and_padding])
def test_a_mask_keeps_its_keys_out_of_a_softmax_of_scores_far_below_one(fn: Any) -> None:
    step = compile_scaled(fn, SCORES, MASK, return_scaled=False,
                          policy=Policy(data_dtype="float16", fp8_dots=False))
    open_keys = MASK & CAUSAL if fn in (_causal_and_padding, _where_select_causal) else MASK
    rows = open_keys.any(-1)
    for k in (-40, -20, -12):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(SCORES), scale), MASK))
        want = np.asarray(jax.jit(fn)(jnp.asarray(SCORES) * scale, MASK))
        np.testing.assert_allclose(got[rows], want[rows], rtol=0, atol=3e-3,
                                   err_msg=f"scale 2^{k}")
        assert np.all(got[rows][~open_keys[rows]] < 1e-6), f"masked keys weighed, 2^{k}"


def test_attention_with_zero_initialized_queries_keeps_its_causal_mask() -> None:
    """muP initializes the query projection to zero: every score is 0 at first, and the
    causal mask alone decides the weights (each position averages the values up to it)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 16)).astype(np.float32)
    wq = np.zeros((16, 16), np.float32)
    wk, wv = ((rng.normal(size=(16, 16)) / 4).astype(np.float32) for _ in range(2))

    def loss(wq: jax.Array, wk: jax.Array, wv: jax.Array) -> jax.Array:
        scores = (x @ wq) @ (x @ wk).T / 4.0
        scores = jnp.where(np.tril(np.ones((8, 8), bool)), scores, jnp.finfo(jnp.float32).min)
        return jnp.sum((jax.nn.softmax(scores, -1) @ (x @ wv)) ** 2)

    grads = jax.grad(loss, argnums=(0, 2))
    step = compile_scaled(grads, wq, wk, wv, return_scaled=False,
                          policy=Policy(fp8_dots=False))
    for got, want in zip(step(wq, wk, wv), jax.jit(grads)(wq, wk, wv), strict=True):
        want = np.asarray(want)
        np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=2e-3 * np.abs(want).max())
