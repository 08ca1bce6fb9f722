"""Angles (the operands of sin, cos, tan) hold f32 data with f16 data: RoPE's position times
inverse frequency and a diffusion timestep's embedding reach 1000s, which f16 holds to 0.5,
and the rotary embedding of a 2048-token context was 2.7 off (values near 3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_module_source

LENGTH, WIDTH = 4096, 8


def _inverse_frequencies() -> jax.Array:
    return 1.0 / (10000 ** (jnp.arange(0, WIDTH, 2, dtype=jnp.float32) / WIDTH))


def _rotate(q: jax.Array, angles: jax.Array) -> jax.Array:
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    q1, q2 = q[:, : WIDTH // 2], q[:, WIDTH // 2:]
    return jnp.concatenate([q1 * cos - q2 * sin, q1 * sin + q2 * cos], -1)


def rope_of_iota(q: jax.Array, _: jax.Array) -> jax.Array:
    """Positions from an iota, as a model computes them for a training batch."""
    positions = jnp.arange(LENGTH, dtype=jnp.float32)
    return _rotate(q, positions[:, None] * _inverse_frequencies()[None])


def rope_of_position_ids(q: jax.Array, positions: jax.Array) -> jax.Array:
    """Positions passed in as int32 (HF's ``position_ids``): above 2048 not even integers
    are exact in f16."""
    return _rotate(q, positions.astype(jnp.float32)[:, None] * _inverse_frequencies()[None])


def timestep_embedding(q: jax.Array, t: jax.Array) -> jax.Array:
    """A diffusion model's sinusoidal embedding of f32 timesteps up to 1000."""
    freqs = jnp.exp(-jnp.log(10000.0) * jnp.arange(WIDTH // 2) / (WIDTH // 2))
    angles = t[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], -1) * q


def rope_in_a_scan(q: jax.Array, positions: jax.Array) -> jax.Array:
    """The angles computed once and read by each layer of a ``lax.scan``: the loop carries
    them, so its operand, block arguments and result must all hold f32 data."""
    angles = positions.astype(jnp.float32)[:, None] * _inverse_frequencies()[None]

    def layer(x: jax.Array, _: None) -> tuple[jax.Array, None]:
        return x + 0.5 * _rotate(x, angles), None

    return jax.lax.scan(layer, q, None, length=2)[0]


CASES = {
    "rope of an iota": (rope_of_iota, np.zeros(LENGTH, np.int32)),
    "rope of position ids": (rope_of_position_ids, np.arange(LENGTH, dtype=np.int32)[::-1]),
    "rope in a scan": (rope_in_a_scan, np.arange(LENGTH, dtype=np.int32)),
    "timestep embedding": (timestep_embedding,
                           np.random.default_rng(1).uniform(0, 1000, LENGTH).astype(np.float32)),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("policy", [Policy(fp8_dots=False), Policy()], ids=["f16", "default"])
def test_an_angle_keeps_f32_precision(name: str, policy: Policy) -> None:
    fn, second = CASES[name]
    q = np.random.default_rng(0).normal(size=(LENGTH, WIDTH)).astype(np.float32)
    want = np.asarray(jax.jit(fn)(q, second))
    got = np.asarray(compile_scaled(fn, q, second, policy=policy, return_scaled=False)(q, second))
    # f16 rounding of the products (|q| up to 4, 9 after the scan): 2^-11 relative, a few
    # times over.
    assert np.max(np.abs(got - want)) <= 4e-3 * max(1.0, np.max(np.abs(want)) / 4)


def test_only_the_angles_cone_is_wide() -> None:
    """The angles and what they are computed from hold f32 data; q and the rotated values,
    which the angles' sines multiply, stay f16."""
    q = np.zeros((LENGTH, WIDTH), np.float32)
    text = jax.jit(rope_of_position_ids).lower(q, np.zeros(LENGTH, np.int32)).as_text()
    result = rewrite_module_source(text, "inline,scalify{data-dtype=f16},simplify")
    assert result.error is None, result.error
    assert result.context.stats.get("scalify.angle-values", 0) > 0
    (signature,) = [line for line in result.output.decode().splitlines()
                    if "func.func public @main" in line]
    assert "(%arg0: tensor<4096x8xf16>, %arg1: tensor<f32>, %arg2: tensor<4096xi32>)" in signature
    assert "-> (tensor<4096x8xf16>" in signature
    assert "stablehlo.multiply" in text and "tensor<4096x4xf16>" in result.output.decode()
