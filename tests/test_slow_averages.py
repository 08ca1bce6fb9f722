"""Slow moving averages of step state keep f32 data with 16-bit data (slow_averages.py).

An EMA of the weights with decay 0.9999 moves by 1e-4 of its distance to them per step, which
16 bits round away: over 200 calls the f16 average was 60% off the f32 one, the bf16 average
did not move at all.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.signature import entry_signature

POLICIES = {"f16": Policy(fp8_dots=False), "bf16": Policy(data_dtype="bfloat16", fp8_dots=False)}
RNG = np.random.default_rng(0)
WEIGHTS = RNG.normal(size=(64,)).astype(np.float32)


def _ema(ema: jax.Array, weights: jax.Array) -> jax.Array:
    return optax.incremental_update(weights, ema, step_size=1e-4)


def _ema_as_a_step(ema: jax.Array, weights: jax.Array) -> jax.Array:
    return ema + 1e-4 * (weights - ema)  # PyTorch's ema.lerp_(w, 1 - decay), in JAX


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("update", [_ema, _ema_as_a_step])
def test_an_ema_of_the_weights_moves_as_in_f32(update, policy: str) -> None:
    ema0 = np.full(64, 0.5, np.float32)
    step = compile_scaled(update, ema0, WEIGHTS, policy=POLICIES[policy])
    got, want = step.scale_args(ema0, WEIGHTS)[0], ema0
    reference = jax.jit(update)
    for _ in range(100):
        got, want = step(got, WEIGHTS), reference(want, WEIGHTS)
    moved, want_moved = np.asarray(got.unscale()) - ema0, np.asarray(want) - ema0
    np.testing.assert_allclose(moved, want_moved, rtol=0, atol=1e-2 * np.abs(want_moved).max())


def _train_step(w: jax.Array, ema: jax.Array, mu: jax.Array, x: jax.Array, y: jax.Array
                ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """SGD with momentum on a linear model, and an EMA of the weights (decay 0.999)."""
    g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    mu = 0.9 * mu + g
    w = w - 1e-2 * mu
    return w, 0.999 * ema + 0.001 * w, mu


def test_a_train_step_keeps_its_ema_in_f32_and_its_momentum_in_f16() -> None:
    x = RNG.normal(size=(32, 16)).astype(np.float32)
    y = (x @ RNG.normal(size=(16,))).astype(np.float32)
    w, mu = np.zeros(16, np.float32), np.zeros(16, np.float32)
    ema = np.full(16, 0.25, np.float32)
    step = compile_scaled(_train_step, w, ema, mu, x, y, policy=POLICIES["f16"])
    dtypes = [spec.dtype for spec in entry_signature(step.stage("simplify")).inputs]
    assert dtypes[:6:2] == [np.float16, np.float32, np.float16], dtypes  # w, ema, mu data
    got, want = step.scale_args(w, ema, mu, x, y)[:3], (w, ema, mu)
    reference = jax.jit(_train_step)
    for _ in range(30):
        got, want = step(*got, x, y), reference(*want, x, y)
    moved, want_moved = np.asarray(got[1].unscale()) - 0.25, np.asarray(want[1]) - 0.25
    np.testing.assert_allclose(moved, want_moved, rtol=0, atol=2e-2 * np.abs(want_moved).max())

