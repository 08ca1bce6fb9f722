"""Flax-style training steps that used to fail silently in f16 data or the default policy.

Each test is a minimal reproduction of one model family's failure (issue 22, section 2),
small enough to run in seconds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from scalify_hlo import Policy, ScaledArray, compile_scaled

# ----- VAE: samplers computed inside the step ---------------------------------------------
SAMPLERS = {
    "normal": jax.random.normal,
    "exponential": jax.random.exponential,
    "gumbel": jax.random.gumbel,
}


@pytest.mark.parametrize("data_dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_random_samplers_inside_the_step_stay_finite(data_dtype: str, sampler: str) -> None:
    """jax.random's uniforms are f32 values made from 23 random bits; rounded to f16 or
    bf16 data, the largest become 1, and the sampler's erf_inv or log of them is inf (92
    normal samples in 100,000 with f16 data, 780 with bf16)."""
    draw = SAMPLERS[sampler]

    def step(key: jax.Array, shift: jax.Array) -> jax.Array:
        return shift + draw(jax.random.wrap_key_data(key), (100_000,))

    key, shift = jax.random.key_data(jax.random.key(0)), jnp.zeros(())
    scaled = compile_scaled(step, key, shift, policy=Policy(data_dtype=data_dtype),
                            return_scaled=False)
    got, want = np.asarray(scaled(key, shift)), np.asarray(step(key, shift))
    assert np.isfinite(got).all(), f"{(~np.isfinite(got)).sum()} non-finite samples"
    # The samples go on in the data type (rounded once); gumbel's inner log of u near 1 is
    # an f16 subnormal at scale 1, which rounds a few tail samples more coarsely.
    tolerance = 2.0 ** -7 if data_dtype == "bfloat16" else 2.0 ** -10
    close = np.isclose(got, want, rtol=tolerance, atol=tolerance)
    assert close.mean() > 0.9999, f"{(~close).sum()} samples off by more than {tolerance}"


# ----- moving averages returned by the step (BatchNorm's running statistics) ---------------
def _running_variance(v: jax.Array, x: jax.Array) -> jax.Array:
    return 0.99 * v + 0.01 * jnp.mean(x * x, axis=0)


@pytest.mark.parametrize("policy", [Policy(), Policy(data_dtype="float16", fp8_dots=False),
                                    Policy(data_dtype="float32", fp8_dots=False,
                                           rescale_at=("drifting-outputs",))],
                         ids=["default", "f16", "f32-drifting-outputs"])
def test_moving_average_fed_back_keeps_its_scale(policy: Policy) -> None:
    """0.99 is 1.98 * 2^-1 as a constant, so ``0.99 * v`` is at half v's scale; where the
    other term is far smaller (a mean of squares of values at 2^-6), the sum takes that
    scale and returns v at half its scale, twice its data, on every call: inf from about
    step 20 in f16 data. The step's drifting results take their scale from their data."""
    x = jax.random.normal(jax.random.key(0), (32, 8)) * 2.0 ** -6
    v = jnp.ones((8,))
    step = compile_scaled(_running_variance, v, x, policy=policy)
    scaled, _ = step.scale_args(v, x)
    reference = v
    for _ in range(30):
        scaled = step(scaled, x)
        reference = _running_variance(reference, x)
    assert float(scaled.scale) >= 0.25, f"scale drifted to {float(scaled.scale)}"
    np.testing.assert_allclose(np.asarray(scaled.unscale()), np.asarray(reference),
                               rtol=2e-2)


@pytest.mark.parametrize("data_dtype,rtol", [("float32", 1e-5), ("bfloat16", 0.1)])
def test_moving_average_fed_back_keeps_its_scale_without_rescale(data_dtype: str,
                                                                 rtol: float) -> None:
    """f32 and bf16 data have no rescale point by default: ``0.99 * v`` at half v's scale
    made v's scale halve on every call, saturate at 2^-126 after ~126 calls and the data
    overflow at call ~130 (v near 4; fp32 gives finite values for ever). The result is
    handed back at v's own scale by the static power instead: the same scale on every call,
    exact in f32 data."""
    x = jax.random.normal(jax.random.key(0), (32, 8)) * 2.0 ** -6
    v = jnp.full((8,), 13.0)
    step = compile_scaled(_running_variance, v, x,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    scaled, _ = step.scale_args(v, x)
    first_scale, reference = float(scaled.scale), v
    for _ in range(150):
        scaled = step(scaled, x)
        reference = _running_variance(reference, x)
    assert float(scaled.scale) == first_scale
    np.testing.assert_allclose(np.asarray(scaled.unscale()), np.asarray(reference), rtol=rtol)


def _exponential_average(momentum: float):
    def update(v: jax.Array, x: jax.Array) -> jax.Array:
        return momentum * v + (1.0 - momentum) * x

    return update


@pytest.mark.parametrize("momentum", [0.9, 0.99])
@pytest.mark.parametrize("policy,steps,tolerance", [
    (Policy(), 40, 2.5e-4), (Policy(data_dtype="float16", fp8_dots=False), 40, 2.5e-4),
    (Policy(data_dtype="bfloat16", fp8_dots=False), 10, 2e-3)], ids=["default", "f16", "bf16"])
def test_moving_average_constants_are_not_rounded(momentum: float, policy: Policy, steps: int,
                                                  tolerance: float) -> None:
    """An exponential moving average (BatchNorm's running statistics, SGD's momentum) fed
    back: its constants rounded to the data type (0.99 is 0.99023 in f16, 0.98828 in bf16;
    0.9 is 0.8999 and 0.89844) bias every element the same way, at 0.99 by 0.3% after 40
    steps in f16 and 0.7% after 10 in bf16, where one rounding per product leaves the mean
    of 4096 elements unbiased. (bf16 runs 10 steps: later, increments below half an ulp of
    the average are lost, a bias of 16-bit storage whatever the constants.)"""
    update = _exponential_average(momentum)
    x = jax.random.uniform(jax.random.key(0), (4096,), minval=0.5, maxval=1.5)
    v = jnp.zeros((4096,))
    step = compile_scaled(update, v, x, policy=policy)
    scaled, _ = step.scale_args(v, x)
    reference = v
    for _ in range(steps):
        scaled = step(scaled, x)
        reference = update(reference, x)
    got, want = np.asarray(scaled.unscale(), np.float64), np.asarray(reference, np.float64)
    bias = float(np.mean((got - want) / want))
    assert abs(bias) < tolerance, f"mean relative error {bias:+.2e}"


# ----- LSTM classifier: gradients that are zero for many steps of a scan -------------------
class _LastStepOfReversedLSTM(nn.Module):
    """A reversed LSTM whose loss reads the output of the step it runs first (Flax's
    Bidirectional backward half, read at the last position): in the backward scan the
    gradients are zero for every step but the last one it runs."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        rnn = nn.RNN(nn.OptimizedLSTMCell(32), reverse=True, keep_order=True)
        return jnp.sum(rnn(x)[:, -1] ** 2)


def test_scan_gradients_after_zero_steps_are_not_flushed() -> None:
    """A rescale of all-zero data kept the scale the zeros came with; in the backward scan
    that scale grows by the dots' 2^k every step (2^40 after 20), and the max common scale
    of the carried gradient then flushed the first nonzero one to 0: every LSTM weight's
    gradient was 0 (a classifier's embedding and LSTM weights zeroed by Adam). All-zero
    data takes the scale of an all-zero argument instead."""
    model = _LastStepOfReversedLSTM()
    x = jax.random.normal(jax.random.key(1), (2, 20, 32))
    params = model.init(jax.random.key(0), x)

    def grads(params: dict, x: jax.Array) -> dict:
        return jax.grad(lambda p: model.apply(p, x))(params)

    step = compile_scaled(grads, params, x,
                          policy=Policy(data_dtype="float16", fp8_dots=False))
    got = step(*step.scale_args(params, x))
    want = grads(params, x)
    is_leaf = lambda v: isinstance(v, ScaledArray)  # noqa: E731
    for (path, g), w in zip(jax.tree_util.tree_flatten_with_path(got, is_leaf=is_leaf)[0],
                            jax.tree.leaves(want), strict=True):
        value, w = np.asarray(g.unscale()), np.asarray(w)
        error = np.abs(value - w).max() / max(np.abs(w).max(), 1e-30)
        assert error < 1e-2, f"{jax.tree_util.keystr(path)}: relative error {error:.3g}"


# ----- ResNet: BatchNorm of a channel that is constant over the batch ----------------------
def test_batchnorm_of_a_constant_channel_has_finite_gradients() -> None:
    """Flax's BatchNorm squares with lax.square (chlo.square), which the square classes did
    not know: var + eps ran in f16, and where a channel is constant over the batch (a
    ResNet's last stage at 1x1 on MNIST, 0 padding) var is 0 at its mean's squared scale,
    next to which f16 flushes eps: rsqrt(0) is inf and 58 of 62 gradients were NaN."""
    model = nn.BatchNorm(use_running_average=False)
    x = jax.random.normal(jax.random.key(0), (16, 4)).at[:, 0].set(64.0)
    variables = model.init(jax.random.key(1), x)

    def grads(params: dict, stats: dict, x: jax.Array) -> tuple[dict, jax.Array]:
        def loss(p: dict, x: jax.Array) -> jax.Array:
            y, _ = model.apply({"params": p, "batch_stats": stats}, x,
                               mutable=["batch_stats"])
            return jnp.sum(y * jnp.arange(4.0))
        return jax.grad(loss, argnums=(0, 1))(params, x)

    args = (variables["params"], variables["batch_stats"], x)
    step = compile_scaled(grads, *args, return_scaled=False)
    got, want = step(*args), grads(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.isfinite(np.asarray(g)).all()
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-2, atol=2e-2)
