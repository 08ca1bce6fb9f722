"""Values looked up in a constant schedule, or computed from constants, keep f32 data with
16-bit data (schedule_values.py).

A diffusion step indexes its noise schedule, alpha_bar per timestep, by each example's
timestep. Near t = 0 alpha_bar is 0.9999, which 16 bits round to 1: the noised input lost its
noise (``sqrt(1 - ab)`` was 0 where it is 0.01) and a min-SNR weight ``ab / (1 - ab)`` was inf.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled

BETAS = np.linspace(1e-4, 0.02, 1000)
ALPHA_BAR = np.cumprod(1 - BETAS).astype(np.float32)
RNG = np.random.default_rng(0)
X0 = RNG.normal(size=(4, 8)).astype(np.float32)
NOISE = RNG.normal(size=(4, 8)).astype(np.float32)
W = (RNG.normal(size=(8, 8)) / 3).astype(np.float32)
T = np.array([0, 1, 5, 500], np.int32)
POLICIES = {"f16": Policy(fp8_dots=False), "bf16": Policy(data_dtype="bfloat16", fp8_dots=False)}


def _noised(x0: jax.Array, noise: jax.Array, t: jax.Array) -> jax.Array:
    ab = jnp.asarray(ALPHA_BAR)[t][:, None]
    return jnp.sqrt(ab) * x0 + jnp.sqrt(1 - ab) * noise


def _noise_term(noise: jax.Array, t: jax.Array) -> jax.Array:
    """The noise's part of the noised input: 1% of it at t = 0, all of what is learned."""
    return jnp.sqrt(1 - jnp.asarray(ALPHA_BAR)[t][:, None]) * noise


def _weighted_loss_grad(w: jax.Array, x0: jax.Array, noise: jax.Array,
                        t: jax.Array) -> jax.Array:
    """An epsilon-prediction loss weighted by min(SNR, 5), and its gradient."""
    def loss(w: jax.Array) -> jax.Array:
        ab = jnp.asarray(ALPHA_BAR)[t]
        weight = jnp.minimum(ab / (1 - ab), 5.0)
        return jnp.mean(weight[:, None] * (_noised(x0, noise, t) @ w - noise) ** 2)
    return jax.grad(loss)(w)


def _min_snr(t: jax.Array) -> jax.Array:
    ab = jnp.asarray(ALPHA_BAR)[t]
    return ab / (1 - ab)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("fn, args", [
    (_noise_term, (NOISE, T)),
    (_noised, (X0, NOISE, T)),
    (_weighted_loss_grad, (W, X0, NOISE, T)),
])
def test_a_diffusion_step_keeps_the_noise_of_its_first_timesteps(fn, args,
                                                                  policy: str) -> None:
    want = np.asarray(jax.jit(fn)(*args))
    got = np.asarray(compile_scaled(fn, *args, policy=POLICIES[policy],
                                    return_scaled=False)(*args))
    rtol = 2e-3 if policy == "f16" else 1e-2  # the result's own rounding
    for row in range(len(T)):  # each timestep's row at its own size (t = 0's noise is 1%)
        np.testing.assert_allclose(got[row], want[row], rtol=0,
                                   atol=rtol * np.abs(want[row]).max(), err_msg=f"row {row}")


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_signal_to_noise_ratio_from_the_schedule_is_finite(policy: str) -> None:
    want = np.asarray(jax.jit(_min_snr)(T))
    got = np.asarray(compile_scaled(_min_snr, T, policy=POLICIES[policy],
                                    return_scaled=False)(T))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_learning_rate_table_read_at_a_step_keeps_its_differences() -> None:
    """A per-step table read with a scalar step (dynamic_slice) keeps the table's f32 values:
    bf16 holds 0.001 and 0.000999 as numbers 4e-6 apart, or as one number."""
    table = np.array([1e-3, 9.99e-4, 9.98e-4, 9.97e-4], np.float32)

    def decay(step: jax.Array) -> jax.Array:
        return (jnp.asarray(table)[0] - jnp.asarray(table)[step]) * jnp.ones(3)

    step = compile_scaled(decay, np.int32(1), policy=POLICIES["bf16"], return_scaled=False)
    for i in range(1, 4):
        want = np.asarray(jax.jit(decay)(np.int32(i)))
        np.testing.assert_allclose(np.asarray(step(np.int32(i)), np.float32), want, rtol=1e-2)


def _schedule_built_in_the_step(x: jax.Array) -> jax.Array:
    """alpha_bar computed in the step (``cumprod(1 - linspace(...))``, from constants alone)
    and read at timesteps 0, 500, 990 and 999, with its min-SNR weight."""
    ab = jnp.cumprod(1.0 - jnp.linspace(1e-4, 0.02, 1000))[jnp.array([0, 500, 990, 999])]
    ab = ab[:, None]
    return jnp.sqrt(ab) * x + jnp.sqrt(1 - ab) * x[::-1] + ab / (1 - ab) * jnp.sum(x)


def _cosine_schedule(x: jax.Array) -> jax.Array:
    """Improved DDPM's cosine alpha_bar of constant timesteps (divided by a computed scalar
    that bf16 rounds to 1), and its log-SNR."""
    t = jnp.array([1.0, 500.0, 990.0, 999.0]) / 1000.0
    f = jnp.cos((t + 0.008) / 1.008 * jnp.pi / 2) ** 2
    ab = (f / jnp.cos(0.008 / 1.008 * jnp.pi / 2) ** 2)[:, None]
    return jnp.sqrt(ab) * x + jnp.sqrt(1 - ab) * x[::-1] + jnp.log(ab / (1 - ab))


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("fn", [_schedule_built_in_the_step, _cosine_schedule])
def test_a_schedule_computed_in_the_step_keeps_its_values_near_one(fn, policy: str) -> None:
    """A schedule computed from constants is a schedule too: the first alpha_bar (0.9999)
    was 1 in 16 bits, and ``ab / (1 - ab)`` inf (``log`` of it NaN)."""
    want = np.asarray(jax.jit(fn)(X0))
    got = np.asarray(compile_scaled(fn, X0, policy=POLICIES[policy], return_scaled=False)(X0))
    assert np.isfinite(got).all(), got
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-2 * np.abs(want).max())


def test_a_weight_from_the_schedule_past_the_data_types_range_is_rescaled() -> None:
    """``ab / (1 - ab)`` at ``ab = 0.999999`` is 1e6, past f16's largest: its f32 data was
    converted as it is where the 16-bit product reads it (inf)."""
    table = np.cumprod(1 - np.linspace(1e-6, 0.02, 1000)).astype(np.float32)

    def weighted(x: jax.Array, t: jax.Array) -> jax.Array:
        ab = jnp.asarray(table)[t][:, None]
        return ab / (1 - ab) * x

    want = np.asarray(jax.jit(weighted)(X0, T))
    got = np.asarray(compile_scaled(weighted, X0, T, policy=POLICIES["f16"],
                                    return_scaled=False)(X0, T), np.float64)
    assert np.isfinite(got).all(), got
    # One scale for the tensor: the rows of late timesteps, 2^34 below the first, are below
    # f16's precision there (a per-tensor scale's limit), so the check is against the whole.
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-3 * np.abs(want).max())
