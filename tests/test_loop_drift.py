"""Loop carries that a constant factor moves on every trip (``rewrites/loop_drift.py``): the
data of ``y = 0.99 * y`` grew by the constant's mantissa (1.98) per trip and overflowed,
NaN after 300 trips in f32 mode and inf after 100 trips of ``* 0.9`` in f16."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_text

X = np.linspace(0.5, 1.5, 4).astype(np.float32)
POLICIES = {
    "f32": (Policy(data_dtype="float32", fp8_dots=False), 1e-6),
    "f16": (Policy(data_dtype="float16", fp8_dots=False), 1e-2),
    # bf16 rounds each trip's product to 8 bits: 300 trips of 0.99 drift 18% (plain bf16,
    # which rounds 0.99 itself, 40%); the bug was NaN.
    "bf16": (Policy(data_dtype="bfloat16", fp8_dots=False), 0.25),
}


def decay(x: jax.Array) -> jax.Array:
    """``fori_loop`` of ``y * 0.99``: 300 trips, a static trip count."""
    return jax.lax.fori_loop(0, 300, lambda i, y: y * 0.99, x)


def decay_until(x: jax.Array, trips: jax.Array) -> jax.Array:
    """``while_loop`` of ``y * 0.9`` for a trip count known only at run time."""
    return jax.lax.while_loop(lambda s: s[0] < trips, lambda s: (s[0] + 1, s[1] * 0.9),
                              (0, x))[1]


def masked_momentum(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """SGD with momentum over 300 steps in a ``fori_loop``, the gradient masked to zero
    after step 5: the momentum decays as ``0.9 * m + 0``."""
    def step(i: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        w, m = state
        m = 0.9 * m + jnp.where(i < 5, jnp.tanh(w), jnp.zeros_like(w))
        return w - 0.01 * m, m
    return jax.lax.fori_loop(0, 300, step, (x, jnp.zeros_like(x)))


def _errors(fn, *args, policy: Policy) -> list[float]:
    want = jax.jit(fn)(*args)
    got = compile_scaled(fn, *args, policy=policy, return_scaled=False)(*args)
    errors = []
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.isfinite(g).all(), g
        errors.append(float(np.max(np.abs(g - w) / np.abs(w))))
    return errors


@pytest.mark.parametrize("mode", list(POLICIES))
def test_a_constant_decay_over_many_trips_stays_finite_and_right(mode: str) -> None:
    policy, tolerance = POLICIES[mode]
    assert max(_errors(decay, X, policy=policy)) <= tolerance


def test_a_decay_with_a_run_time_trip_count_stays_in_f16s_range() -> None:
    policy, tolerance = POLICIES["f16"]
    assert max(_errors(decay_until, X, np.int32(100), policy=policy)) <= tolerance


@pytest.mark.parametrize("mode", ["f32", "bf16"])
def test_a_momentum_decaying_beside_a_zero_gradient_stays_finite(mode: str) -> None:
    """The zero gradient's addend does not bound the momentum's scale (common-scale=first
    follows the first operand): NaN in f32 mode and bf16 before."""
    policy, tolerance = POLICIES[mode]
    weights, momentum = _errors(masked_momentum, X, policy=policy)
    assert weights <= tolerance
    assert momentum <= tolerance


def _rescaled_ops(fn, *args) -> int:
    text = rewrite_text(jax.jit(fn).lower(*args).as_text(), "scalify{data-dtype=f32}")
    return text.count("stablehlo.reduce")


def test_only_drifting_carries_of_long_loops_are_rescaled() -> None:
    """A power-of-two factor does not move the data, nor does a decay over few trips
    (a scan over layers); 300 trips of 0.99 do: an amax per trip."""
    assert _rescaled_ops(lambda x: jax.lax.fori_loop(0, 300, lambda i, y: y * 0.5, x), X) == 0
    assert _rescaled_ops(lambda x: jax.lax.fori_loop(0, 12, lambda i, y: y * 0.99, x), X) == 0
    assert _rescaled_ops(decay, X) > 0


# Products with a loop-invariant value of unknown data (2026-11-30): a runtime scale leaves
# that data within 2^(+-1/2), so 40 trips of it moved the carry's data up to 2^20: inf in f16
# where f32 holds 2e6.
INVARIANT_FACTORS = {
    "argument": (lambda x, s: jax.lax.fori_loop(0, 40, lambda i, y: y * s, x), 1.4),
    "computed_in_the_body": (
        lambda x, s: jax.lax.fori_loop(0, 40, lambda i, y: y * jnp.sqrt(s), x), 1.96),
    "broadcast_in_the_body": (
        lambda x, s: jax.lax.fori_loop(0, 40, lambda i, y: y * (s * jnp.ones_like(y)), x),
        1.4),
    "a_decay_to_f32_underflow": (  # 0 in f32: was NaN (exp(-10)'s data rescaled to 1.47)
        lambda x, s: jax.lax.fori_loop(0, 40, lambda i, y: y * jnp.exp(-s / 100.0), x),
        1000.0),
}


@pytest.mark.parametrize("name", sorted(INVARIANT_FACTORS))
def test_a_product_with_a_loop_invariant_value_over_many_trips_stays_in_f16s_range(
        name: str) -> None:
    fn, factor = INVARIANT_FACTORS[name]
    s = np.float32(factor)
    want = np.asarray(jax.jit(fn)(X, s), np.float64)
    got = np.asarray(compile_scaled(fn, X, s, policy=POLICIES["f16"][0],
                                    return_scaled=False)(X, s), np.float64)
    assert np.isfinite(got).all(), got
    # 40 roundings of the product to f16 (plain f16 rounds as many times).
    assert np.max(np.abs(got - want)) <= 2e-2 * max(np.max(np.abs(want)), 1e-30)


def test_a_product_with_a_loop_invariant_value_over_few_trips_is_not_rescaled() -> None:
    """Within f16's margin (12 trips, half a binade each: a scan over layers) no amax; 40
    trips in f16 one per trip; f32's margin holds them."""
    def rescaled(trips: int, dtype: str) -> int:
        step = jax.jit(lambda x, s: jax.lax.fori_loop(0, trips, lambda i, y: y * s, x))
        text = step.lower(X, np.float32(1.4)).as_text()
        return rewrite_text(text, f"scalify{{data-dtype={dtype}}}").count("stablehlo.reduce")
    assert rescaled(12, "f16") == rescaled(40, "f32") == 0
    assert rescaled(40, "f16") > 0
