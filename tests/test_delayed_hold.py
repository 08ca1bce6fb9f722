"""Delayed statistics over several calls: what a rescale point hands on, and where its data
lands when the exponent it is given is stale.

A fed-back call hands on, per rescale point, the exponent it measured where that is larger
than the one it was given, else the given one while the data is at most HOLD_SLACK binades
below it (``DelayedExponents.held``): a value that spiked keeps its exponent, so that its
data stays below f16's top when the spike comes back (the GPU target policy trained a
transformer to NaN from its fifth call without it). The rewritten module of
one dot with a rescale point is run as it is, given exponents chosen around the one that
the ``measure`` rewrite returns for the same data.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled, unscale_tree
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.rewrites.delayed_statistics import HOLD_DECAY, HOLD_SLACK
from scalify_hlo.runner import run_module

ONE_POINT = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
    {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
"""
F16_MAX = 65504.0


@functools.cache
def _rewritten(mode: str) -> str:
    pipeline = f"scalify{{data-dtype=f16 delayed-statistics={mode}}}"
    result = rewrite_module_source(ONE_POINT, pipeline)
    assert result.error is None and result.output is not None
    return result.output.decode()


def _inputs(magnitude: float) -> list[np.ndarray]:
    """x's data (every entry ``magnitude``) and w's (the identity), both at scale 1."""
    x = np.full((4, 8), magnitude, np.float16)
    return [x, np.float32(1.0), np.eye(8, dtype=np.float16), np.float32(1.0)]


def _measured(magnitude: float) -> int:
    """The exponent the first call (``measure``) hands on for this data."""
    *_, exponents = run_module(_rewritten("measure"), _inputs(magnitude))
    return int(exponents[0])


def _use(magnitude: float, given: int) -> tuple[np.ndarray, float, int]:
    """A fed-back call given ``given``: the result's data, its scale, what it hands on."""
    data, scale, exponents = run_module(_rewritten("use"),
                                        [*_inputs(magnitude), np.array([given], np.int32)])
    return data, float(scale), int(exponents[0])


@pytest.mark.parametrize("stale", [1, 4, HOLD_SLACK, HOLD_SLACK + 1, 20])
def test_an_exponent_given_above_the_data_is_held_then_decays(stale: int) -> None:
    """Data that shrank since the exponent was measured: the call hands on the given one
    (not what it measured, which would put the next call's data at f16's top if the old
    values came back) while the data is at most HOLD_SLACK binades below it, and the given
    one less HOLD_DECAY beyond that; applied, it leaves the data that much below unit."""
    measured = _measured(2.0 ** -10)
    data, scale, handed = _use(2.0 ** -10, measured + stale)
    want = stale if stale <= HOLD_SLACK else stale - HOLD_DECAY
    assert handed == measured + want
    np.testing.assert_allclose(data.astype(np.float32) * scale, 2.0 ** -10, rtol=0)


@pytest.mark.parametrize("stale", [1, 4, 30])
def test_an_exponent_given_below_the_data_hands_on_the_measured_one(stale: int) -> None:
    """Data that grew: the next call gets the exponent measured now, at once; this call's
    data saturates at f16's largest value (finite), as a stale exponent's has."""
    measured = _measured(1.0)
    unit, unit_scale, _ = _use(1.0, measured)  # the data at the measured exponent
    data, scale, handed = _use(1.0, measured - stale)
    assert handed == measured
    assert np.all(np.isfinite(data))
    want = np.minimum(unit.astype(np.float32) * 2.0 ** stale, F16_MAX)
    np.testing.assert_array_equal(data.astype(np.float32), want)
    assert scale == unit_scale * 2.0 ** -stale


def test_a_finite_value_a_stale_factor_takes_past_f32_saturates() -> None:
    """A given exponent of -126 multiplies the data by 2^126: 16 * 2^126 is past f32's
    range, and the product was inf; the value was finite, so it saturates like any other."""
    data, _, _ = _use(16.0, -126)
    assert np.all(data == np.float16(F16_MAX))


def test_a_non_finite_value_stays_non_finite() -> None:
    """A NaN of the data (inf times the identity's zeros) stays as it is: no clamp turns a
    real overflow into a number."""
    data, _, _ = _use(np.inf, 0)
    assert not np.any(np.isfinite(data))


@pytest.mark.parametrize("given", [-9, 0, 7])
def test_all_zero_data_hands_on_the_given_exponent(given: int) -> None:
    """All-zero data measures nothing: a fed-back call hands on the exponent it was given
    (held as it was), a first call 0, not the smallest exponent, at which the next call's
    nonzero values would sit at f16's largest."""
    assert _measured(0.0) == 0
    data, _, handed = _use(0.0, given)
    assert handed == given and not np.any(data)


def _penalized_step(params: dict, x: np.ndarray, beta: np.float32) -> tuple[dict, dict]:
    """SGD on ``mean(tanh(x @ w1)) + beta * mean((x @ w2)^2)``: w2's gradient (a backward
    dot, a rescale point) is all zero while ``beta`` is 0, as a loss term weighted 0 during
    a warm-up is."""
    def loss(params: dict) -> jax.Array:
        return (jax.numpy.mean(jax.numpy.tanh(x @ params["w1"]))
                + beta * jax.numpy.mean(jax.numpy.square(x @ params["w2"])))

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), grads


def test_a_gradient_that_was_zero_comes_back_finite() -> None:
    """Two calls with the term's weight 0, then 1: w2's gradient is finite and as jax.jit's
    (it was NaN from the third call on, and w2 with it: a first call handed on the smallest
    exponent of its all-zero gradient)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 32)).astype(np.float32)
    params = {name: (rng.normal(size=(32, 32)) * 0.2).astype(np.float32)
              for name in ("w1", "w2")}
    policy = Policy(data_dtype="float16", fp8_dots=False, statistics="delayed")
    step = compile_scaled(_penalized_step, params, x, np.float32(0.0), policy=policy)
    assert step._delayed > 0
    state, want = step.scale_args(params, x, np.float32(0.0))[0], params
    for beta in map(np.float32, (0.0, 0.0, 1.0, 1.0)):
        state, grads = step(state, *step.scale_args(params, x, beta)[1:])
        want, want_grads = jax.jit(_penalized_step)(want, x, beta)
        got = np.asarray(unscale_tree(grads)["w2"], np.float32)
        scale = float(np.max(np.abs(want_grads["w2"]))) or 1.0
        np.testing.assert_allclose(got / scale, want_grads["w2"] / scale, atol=2e-3)
    assert np.all(np.isfinite(np.asarray(unscale_tree(state)["w2"], np.float32)))
