"""Complex constants, resource constants and empty tensors in the rewrite (the first two
found by the fourth sweep, docs/robustness.md; the resource blob by a review of the integer-
constant convert).

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
from scalify_hlo.api import rewrite_module_source


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


# A ``dense_resource`` blob (how large constants are stored) is no DenseElementsAttr: reading
# it as one raises a ValueError, which the integer-constant convert (rule_convert) and the
# clamp between constants (rules_bounds) let out as an internal error.
_RESOURCE = """
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %c = stablehlo.constant dense_resource<blob1> : tensor<2xi32>
  %f = stablehlo.convert %c : (tensor<2xi32>) -> tensor<2xf32>
  %m = stablehlo.maximum %arg0, %f : tensor<2xf32>
  %n = stablehlo.minimum %m, %f : tensor<2xf32>
  return %n : tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000100000002000000"
    }
  }
#-}
"""


def test_a_resource_constant_converted_and_clamped_against_rewrites() -> None:
    result = rewrite_module_source(_RESOURCE, "scalify{data-dtype=f16},simplify")
    assert result.error is None, result.error
    assert "stablehlo.clamp" in result.output.decode()
