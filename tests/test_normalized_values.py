"""A norm's output narrows from the wide type at scale 1 (rewrites/normalized_values.py).

With f16 data, a layer norm's ``(x - m) * rsqrt(var + eps)`` is computed in f32 (its
variance is a sum of squares) and was narrowed to f16 by an amax of the whole output, a
reduction per norm (a delayed statistic on the GPU targets) that XLA:GPU could not fuse
into the norm's kernel. The output is bounded by ``sqrt(n)`` whatever its input's scale.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled, module_io
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites import PassContext, parse_pipeline, run_pipeline
from scalify_hlo.rewrites import scalify as scalify_pass
from scalify_hlo.rewrites.normalized_values import normalized_products
from scalify_hlo.symbols import entry_function

EPS = 1e-5
X = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)


def layer_norm(x: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPS)


def rms_norm(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def rms_norm_dropped_dims(x: jax.Array) -> jax.Array:
    """The sum reshaped away from its row's dimension and broadcast back."""
    return x * jax.lax.rsqrt(jnp.sum(jnp.square(x), axis=-1) / x.shape[-1] + EPS)[:, None]


def fast_variance_norm(x: jax.Array) -> jax.Array:
    """Flax's fast variance, ``mean(x^2) - mean(x)^2``: not a bound (cancellation)."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x), axis=-1, keepdims=True) - jnp.square(mean)
    return (x - mean) * jax.lax.rsqrt(var + EPS)


def other_rows(x: jax.Array) -> jax.Array:
    """A row's elements times the sum of another axis: not bounded."""
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=0, keepdims=True) + EPS)[:, :1]


def other_value(x: jax.Array) -> jax.Array:
    """x times the RMS of 2x - 1: not bounded (x large where 2x - 1 is not)."""
    y = 2.0 * x - 1.0
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(y), axis=-1, keepdims=True) + EPS)


def negative_coefficient(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(EPS - jnp.mean(jnp.square(x), axis=-1, keepdims=True) * -1.0)


def _bounds(fn: Callable[[jax.Array], jax.Array]) -> list[float]:
    text = jax.jit(fn).lower(X).as_text()
    with module_io.ir_context():
        module = module_io.parse_module(text)
        run_pipeline(module, parse_pipeline("inline"), PassContext(), lambda *_: None)
        return sorted(normalized_products(entry_function(module)).values())


@pytest.mark.parametrize("fn", [layer_norm, rms_norm, rms_norm_dropped_dims])
def test_a_norm_is_bounded_by_the_root_of_its_row_length(fn) -> None:
    assert _bounds(fn) == pytest.approx([4.0])  # sqrt(16)


@pytest.mark.parametrize("fn", [fast_variance_norm, other_rows, other_value])
def test_a_product_the_sum_does_not_bound_is_not_a_norm(fn) -> None:
    assert _bounds(fn) == []


def test_a_coefficient_read_through_its_sign_is_not_trusted() -> None:
    """``eps - c * s`` with c < 0 is ``eps + |c| s``: a subtract is not one of the steps,
    so the chain is not read (no guess at what it bounds)."""
    assert _bounds(negative_coefficient) == []


def _amax_reductions(fn: Callable[[jax.Array], jax.Array]) -> int:
    chunk = rewrite_module_source(jax.jit(fn).lower(X).as_text(), DEFAULT_PIPELINE)
    assert chunk.error is None
    return chunk.output.decode().count("applies stablehlo.maximum")


@pytest.mark.parametrize("fn", [layer_norm, rms_norm])
def test_a_norm_narrows_with_no_statistic(fn, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _amax_reductions(fn) == 0
    monkeypatch.setattr(scalify_pass, "normalized_products", lambda _: {})
    assert _amax_reductions(fn) > 0  # the narrowing amax it no longer needs


@pytest.mark.parametrize("exponent", [-30, 0, 30])
@pytest.mark.parametrize("fn", [layer_norm, rms_norm])
def test_a_norm_of_a_far_scaled_input_matches_f32(fn, exponent: int) -> None:
    x = X * np.float32(2.0 ** exponent)
    step = compile_scaled(fn, x, policy=Policy(fp8_dots=False), return_scaled=False)
    got = np.asarray(step(x), np.float64)
    want = np.asarray(jax.jit(fn)(x), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_under_delayed_statistics_a_norm_keeps_its_statistic() -> None:
    """The GPU targets' mode: there XLA:GPU took more kernels without it (the module doc)."""
    pipeline = Policy(statistics="delayed", fp8_dots=False).pipeline()
    chunk = rewrite_module_source(jax.jit(layer_norm).lower(X).as_text(), pipeline)
    assert chunk.error is None
    assert chunk.output.decode().count("applies stablehlo.maximum") > 0
