"""Rank-0 values keep f32 data with 16-bit data (rewrites/scalar_values.py).

An optimizer update jitted apart from the gradient (optax's ``update`` on its own, Flax's
``apply_gradients``) has no backward pass, so it runs scaled like any other op; bf16 held
Adam's 0.999 as 1.0, its second-moment correction ``1 - 0.999^t`` was 0, and every update
came back 0 (or, with weight decay, the decay alone).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled

_RNG = np.random.default_rng(0)
PARAMS = {"w": jnp.asarray(_RNG.normal(size=(4, 8)) * 0.3, jnp.float32),
          "b": jnp.asarray(_RNG.normal(size=(8,)) * 0.1, jnp.float32)}
GRADS = {"w": jnp.asarray(_RNG.normal(size=(4, 8)), jnp.float32),
         "b": jnp.asarray(_RNG.normal(size=(8,)) * 1e-3, jnp.float32)}
OPTIMIZERS = {
    "adam": lambda: optax.adam(1e-3),
    "adamw": lambda: optax.adamw(1e-3, weight_decay=0.01),
    "lamb": lambda: optax.lamb(1e-3, weight_decay=0.01),
    "adam_warmup_cosine": lambda: optax.adam(optax.warmup_cosine_decay_schedule(
        1e-4, 1e-3, warmup_steps=10, decay_steps=100)),
}
# The data type's own rounding of an update near the learning rate, with room.
POLICIES = {"bf16": (Policy(data_dtype="bfloat16", fp8_dots=False), 3e-2),
            "f16": (Policy(fp8_dots=False), 5e-3)}


def _relative_error(got: dict, want: dict) -> float:
    return max(float(np.max(np.abs(np.asarray(got[k], np.float64) - np.asarray(want[k]))))
               / float(np.max(np.abs(np.asarray(want[k])))) for k in want)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_update_jitted_alone_moves_the_weights(name: str, policy: str) -> None:
    tx = OPTIMIZERS[name]()

    def update(grads: dict, state: optax.OptState, params: dict) -> tuple:
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), updates, state

    state = tx.init(PARAMS)
    chosen, tolerance = POLICIES[policy]
    step = compile_scaled(update, GRADS, state, PARAMS, policy=chosen, return_scaled=False)
    want_state, got_state = state, state
    for _ in range(3):  # the count the corrections read moves on each call
        _, want, want_state = jax.jit(update)(GRADS, want_state, PARAMS)
        _, got, got_state = step(GRADS, got_state, PARAMS)
        assert _relative_error(got, want) < tolerance


def test_rank0_values_hold_f32_data() -> None:
    """The step's scalar argument and result come back as f32 data in bf16 data mode."""
    def step(lr: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        loss = jnp.sum(w * w)
        return w - lr * w, loss

    lr, w = jnp.float32(1e-3), jnp.ones((4,), jnp.float32)
    scaled = compile_scaled(step, lr, w, policy=Policy(data_dtype="bfloat16", fp8_dots=False))
    new_w, loss = scaled(lr, w)
    assert new_w.data.dtype == jnp.bfloat16
    assert loss.data.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(loss.data * loss.scale), 4.0, rtol=1e-6)


# Scalars that a nonlinear op takes past f16's normal range, then carried on by products,
# sums and differences: at t = 1000 exp(-20) is 2e-9 and exp(20) 5e8; at t = 1 a bias
# correction with b = 0.999999 is 1e-6, where f16 keeps 4 bits.
FAR_SCALARS = {
    "exp_decay": (lambda x, t: x * jnp.exp(-t / 50.0), 1000.0),
    "power_decay": (lambda x, t: x * 0.98 ** t, 1000.0),
    "exp_growth_times_a_constant": (lambda x, t: x * (jnp.exp(t / 50.0) * 1e-3), 1000.0),
    "sigmoid": (lambda x, t: x * jax.nn.sigmoid(-t / 50.0), 1000.0),  # 1 / (1 + exp(20))
    "tanh_of_a_small_value": (lambda x, t: x * jnp.tanh(t * 1e-12), 1000.0),
    "bias_correction": (lambda x, t: x * (1.0 - 0.999999 ** t), 1.0),
    "picked_by_where": (lambda x, t: x * jnp.where(t > 5, jnp.exp(-t / 40.0), 1.0), 1000.0),
    "a_maximum": (lambda x, t: x * jnp.maximum(jnp.exp(-t / 40.0), 1e-12), 1000.0),
    "returned_by_a_branch": (
        lambda x, t: x * jax.lax.cond(t > 5, lambda: jnp.exp(-t / 40.0), lambda: t), 1000.0),
}


@pytest.mark.parametrize("name", sorted(FAR_SCALARS))
def test_a_scalar_from_a_nonlinear_op_past_f16s_range_is_read_rescaled(name: str) -> None:
    """Converted raw, these were 0 in f16 data (inf for the growth, 1.2% off for the bias
    correction)."""
    fn, step = FAR_SCALARS[name]
    x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    t = np.float32(step)
    want = np.asarray(jax.jit(fn)(x, t), np.float64)
    got = np.asarray(compile_scaled(fn, x, t, policy=POLICIES["f16"][0],
                                    return_scaled=False)(x, t), np.float64)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))


def _clip_by_norm(x: jax.Array) -> jax.Array:
    norm = jnp.sqrt(jnp.sum(x * x))
    return x * jnp.minimum(1.0, 1.0 / jnp.maximum(norm, 1e-6))


def _rate_capped_by_a_constant(x: jax.Array) -> jax.Array:
    return x * jnp.minimum(1e-3, 1e-3 * jnp.sum(x) / 100.0)


# A pick between a scalar at a runtime scale and a nonzero constant runs in f32 at the midpoint
# of their scales, so its data sits half their spread from 1: max(norm, 1e-6) of a norm near
# 2^19 had data 2^19, its reciprocal 2^-19, which a raw convert made an f16 subnormal (the
# clip kept 2 bits of x at 2^16: 15% off); min(1e-3, sum(x) * 1e-5) of x at 2^-40 was 0.
@pytest.mark.parametrize("fn", [_clip_by_norm, _rate_capped_by_a_constant])
def test_a_scalar_picked_beside_a_constant_is_read_rescaled(fn: Any) -> None:
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    step = compile_scaled(fn, x, policy=POLICIES["f16"][0], return_scaled=False)
    for k in (-40, 0, 16):
        scale = np.float32(2.0 ** k)
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale), np.float64)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)), np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-3, err_msg=f"x at 2^{k}")
