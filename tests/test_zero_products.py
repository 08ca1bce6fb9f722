"""A product or square with a factor of only zeros is a zero at any scale.

optax's norms (``optax.tree.norm``, behind ``clip_by_global_norm``) square each leaf's real
and imaginary parts and add them: for a real leaf the imaginary part is a zero fill, whose
square took a static scale of 1. Added to the squares of small gradients, it raised their
common scale to 1 and flushed them: with f16 data, the global norm of gradients near 2^-70
was 0, and near 2^-60 it lost bits to f32's subnormals.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, compile_scaled

RNG = np.random.default_rng(0)
LEAVES = {"w": RNG.normal(size=(8, 16)).astype(np.float32),
          "b": RNG.normal(size=(16,)).astype(np.float32)}
POLICIES = {"f16": Policy(fp8_dots=False),
            "bf16": Policy(data_dtype="bfloat16", fp8_dots=False)}


def _value(out) -> float:
    return float(np.asarray(out.data, np.float64)) * float(out.scale)


def _squares_and_zero_products(tree):
    """Each leaf squared beside the square of its zero imaginary part and a product with
    zeros: what optax's norm adds, and the same through a multiply and a divide."""
    total = 0.0
    for leaf in jax.tree.leaves(tree):
        zeros = jnp.zeros_like(leaf)
        total = total + jnp.sum(jnp.square(leaf.real) + jnp.square(leaf.imag) + zeros * leaf
                                + zeros / (leaf * leaf + 1.0))
    return jnp.sqrt(total)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("exponent", [-70, -60, -30, 0, 40])
@pytest.mark.parametrize("norm", [optax.tree.norm, _squares_and_zero_products],
                         ids=["optax", "products"])
def test_a_norm_of_small_values_keeps_its_bits(norm, exponent: int, policy: str) -> None:
    scaled = jax.tree.map(lambda x: x * np.float32(2.0 ** exponent), LEAVES)
    want = float(jax.jit(norm)(LEAVES)) * 2.0 ** exponent  # exact: a power-of-two factor
    got = _value(compile_scaled(norm, scaled, policy=POLICIES[policy])(scaled))
    tolerance = 1e-4 if policy == "f16" else 1e-2  # f16 rounds the leaves to 11 bits
    assert abs(got / want - 1) < tolerance, (got, want)
