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


def richardson_solve(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``A v = b`` by Richardson steps until the residual ``b - A v`` is 1e-5 of ``b``
    (at most 400 trips): the condition reads products (``A @ v``, ``r @ r``)."""
    a = x.T @ x / 4.0 + jnp.eye(8)
    b = jnp.sum(x, 0)

    def unconverged(state: tuple) -> jax.Array:
        v, k = state
        r = b - a @ v
        return (r @ r > 1e-10 * (b @ b)) & (k < 400)

    def step(state: tuple) -> tuple:
        v, k = state
        return v + 0.2 * (b - a @ v), k + 1

    return jax.lax.while_loop(unconverged, step, (jnp.zeros(8), 0))


def conjugate_gradient(x: jax.Array) -> jax.Array:
    """``jax.scipy.sparse.linalg.cg`` to a relative residual of 1e-6: its step size
    ``gamma / (p @ A p)`` is a value of the condition's cone that the 16-bit update of the
    solution reads."""
    a = x.T @ x + 8.0 * jnp.eye(8) * jnp.mean(x * x)
    return jax.scipy.sparse.linalg.cg(a, jnp.sum(x, 0), tol=1e-6, maxiter=50)[0]


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


@pytest.mark.parametrize("mode", list(SIXTEEN_BIT))
def test_a_residual_of_products_converges_in_as_many_trips(mode: str) -> None:
    """The products the condition reads keep f32 data: in 16 bits the residual stalled near
    2^-11 of ``b`` and the loop never returned (bounded here at 400 trips)."""
    x = np.random.default_rng(2).normal(size=(4, 8)).astype(np.float32)
    v, trips = compile_scaled(richardson_solve, x, policy=SIXTEEN_BIT[mode],
                              return_scaled=False)(x)
    want_v, want_trips = jax.jit(richardson_solve)(x)
    assert int(trips) == int(want_trips) < 400
    np.testing.assert_allclose(np.asarray(v, np.float64), np.asarray(want_v), rtol=0,
                               atol=1e-2 * float(np.max(np.abs(want_v))))


@pytest.mark.parametrize("exponent", [0, 20])
def test_conjugate_gradient_solves_in_f16_data(exponent: int) -> None:
    """NaN before: the 16-bit residual stalled and the solve ran on past its breakdown;
    then inf: the f32 step size's data narrowed to f16 without its scale."""
    x = np.random.default_rng(2).normal(size=(4, 8)).astype(np.float32) * np.float32(
        2.0**exponent)
    want = np.asarray(jax.jit(conjugate_gradient)(x), np.float64)
    got = np.asarray(compile_scaled(conjugate_gradient, x, policy=SIXTEEN_BIT["f16"],
                                    return_scaled=False)(x), np.float64)
    assert np.isfinite(got).all(), got
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-2 * np.max(np.abs(want)))
