"""Complex constants and empty tensors in the default pipeline (found by the fourth sweep,
docs/robustness.md).

Reading the ``value`` of a complex constant raises a TypeError in jaxlib's MLIR bindings:
the analysis of guarded divisors (``square_values``) read every constant that way, and the
gradient of ``abs(rfft(v))`` failed with a Python traceback. The gradient of ``cummax``
takes statistics of empty slices (``tensor<4x0xf16>``), which have no row to group: the
grouped reduction read past its vector (an invalid module).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from scalify_hlo import compile_scaled, unscale_tree


def _weighted(fn: Any) -> Any:
    def loss(x: jax.Array) -> jax.Array:
        out = fn(x)
        return jnp.sum(out * jnp.sin(jnp.arange(out.size, dtype=jnp.float32)).reshape(out.shape))
    return jax.grad(loss)


CASES = {
    "rfft_abs": (lambda v: jnp.abs(jnp.fft.rfft(v, axis=-1)), 0.1),
    "complex_square": (lambda v: jnp.abs(lax.complex(v, 2.0 * v) ** 2), 0.1),
    "cummax": (lambda v: lax.cummax(v, 1), 0.0),
    "cumlogsumexp": (lambda v: lax.cumlogsumexp(v, 1), 0.1),
    "associative_max": (lambda v: lax.associative_scan(jnp.maximum, v, axis=1), 0.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_default_policy_rewrites_and_matches(name: str) -> None:
    fn, rtol = CASES[name]
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 10)), jnp.float32)
    grad = _weighted(fn)
    got = np.asarray(unscale_tree(compile_scaled(grad, x)(x)))
    want = np.asarray(jax.jit(grad)(x))
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=max(rtol, 2e-3) * scale)
