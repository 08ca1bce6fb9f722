"""The values a loop's condition is computed from keep f32 data (``rewrites/
trip_count_values.py``): in 16-bit data a float counter stopped counting and a series never
converged (``gammainc`` near 2^20 did not return in bf16 data, and came back 0 or inf in
f16). The tests use loops that end either way: a regression must fail, not hang."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_text

SIXTEEN_BIT = {"f16": Policy(data_dtype="float16", fp8_dots=False),
               "bf16": Policy(data_dtype="bfloat16", fp8_dots=False)}


def count_to(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A float counter per element, stepped until the largest reaches 3000 (at most 4000
    trips), and a value decayed once per trip."""
    def unfinished(state: tuple) -> jax.Array:
        r, i, _ = state
        return (jnp.max(r) < 3000.0) & (i < 4000)

    def step(state: tuple) -> tuple:
        r, i, y = state
        return r + 1.0, i + 1, y * 0.999

    r, _, y = jax.lax.while_loop(unfinished, step, (x, 0, x))
    return r, y


def regularized_gamma(x: jax.Array) -> jax.Array:
    """``gammainc(a, x)`` with ``a = |x| + 1``: JAX's series and continued-fraction loops,
    which stop when the next term is below 2^-23 of the sum."""
    return jax.scipy.special.gammainc(jnp.abs(x) + 1, jnp.abs(x))


@pytest.mark.parametrize("mode", list(SIXTEEN_BIT))
def test_a_float_counter_counts_to_its_bound(mode: str) -> None:
    x = np.zeros((4,), np.float32)
    r, _ = compile_scaled(count_to, x, policy=SIXTEEN_BIT[mode], return_scaled=False)(x)
    want_r, _ = jax.jit(count_to)(x)
    np.testing.assert_array_equal(np.asarray(r), np.asarray(want_r))  # 256 in bf16 before
    assert np.asarray(want_r).max() == 3000.0


def test_a_converging_series_of_large_arguments_converges() -> None:
    x = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32) * np.float32(2**20)
    want = np.asarray(jax.jit(regularized_gamma)(x), np.float64)
    got = compile_scaled(regularized_gamma, x, policy=SIXTEEN_BIT["f16"],
                         return_scaled=False)(x)
    got = np.asarray(got, np.float64)
    assert np.isfinite(got).all(), got  # 0 and inf before
    np.testing.assert_allclose(got, want, atol=1e-2)


def test_a_counted_loop_keeps_its_data_type() -> None:
    """A ``fori_loop``'s condition reads its integer counter alone: no float changes type."""
    x = np.ones((4,), np.float32)
    text = jax.jit(lambda v: jax.lax.fori_loop(0, 5, lambda i, y: y * 0.5 + 1.0, v)).lower(
        x).as_text()
    rewritten = rewrite_text(text, "scalify{data-dtype=f16}")
    loop = next(line for line in rewritten.splitlines() if "stablehlo.while" in line)
    assert "tensor<4xf16>" in loop and "tensor<4xf32>" not in loop
