"""The update's results round stochastically to bf16 data (``update_rounding``, scalify.py).

bf16 keeps 8 significand bits: a weight of 1 moved by 1e-3 rounds back to 1, and a run of
such steps (Adam's late updates) does not move it at all. Rounded stochastically it moves by
the update in expectation: under the tpu7x policy transformer_lm's last losses went from
3.1% above jax.jit's to 0.3% (docs/robustness.md).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, compile_scaled, unscale_tree
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.errors import ScalifyError

SIZE = 4096
LR = 1e-3


def _sgd(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One SGD step on ``sum(w * x)``: the gradient is ``x``, the new weight ``w - LR * x``
    (the update tail: elementwise, after the backward pass)."""
    loss, grad = jax.value_and_grad(lambda w: jnp.sum(w * x))(w)
    return w - LR * grad, loss


def _new_weights(policy: Policy, w: np.ndarray | None = None) -> np.ndarray:
    """The weights after one SGD step from ``w`` (SIZE ones by default), gradient 1."""
    w = np.ones(SIZE, np.float32) if w is None else w
    x = np.ones_like(w)
    step = compile_scaled(_sgd, w, x, policy=policy)
    new, _ = step(*step.scale_args(w, x))
    return np.asarray(unscale_tree(new), np.float64)


@pytest.mark.parametrize("policy", [Policy(data_dtype="bfloat16", fp8_dots=False),
                                    Policy(data_dtype="bfloat16", update_rounding="stochastic"),
                                    Policy.for_target("v6e"), Policy.for_target("tpu7x")],
                         ids=["bf16-auto", "bf16-stochastic", "v6e", "tpu7x"])
def test_a_bf16_update_below_half_an_ulp_moves_the_weights_in_expectation(policy) -> None:
    """1 - 1e-3 lies between bf16's 1 - 2^-8 and 1: each weight lands on one of the two,
    on the lower one with probability 0.256, so their mean is 1 - 1e-3 (to the sampling
    error of 4096 draws, 3e-5)."""
    new = _new_weights(policy)
    assert set(np.unique(new)) == {1.0 - 2.0 ** -8, 1.0}
    assert abs(new.mean() - (1.0 - LR)) < 2e-4


def _momentum_step(decay: float) -> tuple[Any, tuple[Any, ...]]:
    """One SGD step with momentum ``decay`` on ``sum(w^2 x) / 2`` (gradient ``w x``: ``x``
    at ``w = 1``), from a trace of ones: the new trace is ``x + decay``."""
    optimizer = optax.sgd(LR, momentum=decay)

    def step(w: jax.Array, trace: Any, x: jax.Array) -> Any:
        loss, grad = jax.value_and_grad(lambda w: jnp.sum(w * w * x) / 2)(w)
        updates, trace = optimizer.update(grad, trace, w)
        return optax.apply_updates(w, updates), trace, loss

    w = np.ones(SIZE, np.float32)
    trace = jax.tree.map(jnp.ones_like, optimizer.init(w))
    # 1 - 0.999 below 1 in the new trace: a change below half of bf16's ulp there (2^-9)
    return step, (w, trace, np.full(SIZE, 1.0 - decay - 1e-3, np.float32))


def _dithered(policy: Policy, decay: float) -> tuple[int, np.ndarray]:
    """How many of the momentum step's results are rounded stochastically, and the new
    trace."""
    fn, args = _momentum_step(decay)
    text = jax.jit(fn).lower(*args).as_text(debug_info=True)
    chunk = rewrite_module_source(text, policy.pipeline(), debug_info=True)
    assert chunk.error is None, chunk.error
    step = compile_scaled(fn, *args, policy=policy)
    _, trace, _ = step(*step.scale_args(*args))
    return (chunk.context.stats.get("scalify.stochastic-updates", 0),
            np.asarray(jax.tree.leaves(unscale_tree(trace))[0], np.float64))


@pytest.mark.parametrize("policy", [Policy(data_dtype="bfloat16", fp8_dots=False),
                                    Policy.for_target("v6e")], ids=["bf16-auto", "v6e"])
def test_a_fast_first_moment_rounds_to_nearest(policy: Policy) -> None:
    """Momentum 0.9 moves the trace by a tenth of the way to the gradient each step: nearest
    rounding drops a change only while the gradient is within 2^-8 / 0.1 of the trace, and
    then it lags by that much at most; its hash is saved (the weight alone is dithered)."""
    dithered, trace = _dithered(policy, 0.9)
    assert dithered == 1
    assert np.all(trace == 1.0)  # 0.999 rounds to 1, every element


def test_a_slow_first_moment_and_an_explicit_stochastic_rounding_keep_the_dither() -> None:
    """Momentum 0.99 can lag the gradient by 2^-8 / 0.01 = 39% rounded to nearest: it stays
    dithered under ``auto``, and ``update_rounding="stochastic"`` dithers every result."""
    for policy, decay in ((Policy(data_dtype="bfloat16", fp8_dots=False), 0.99),
                          (Policy(data_dtype="bfloat16", update_rounding="stochastic"), 0.9)):
        dithered, trace = _dithered(policy, decay)
        assert dithered == 2
        assert set(np.unique(trace)) == {1.0 - 2.0 ** -8, 1.0}
        assert abs(trace.mean() - 0.999) < 2e-4


def test_a_matrix_update_is_unbiased_in_every_row_and_column() -> None:
    """The hash mixes each index in turn: the rows and the columns of a 64x64 weight both
    draw their own noise (a hash of one index alone would round whole rows alike)."""
    new = _new_weights(Policy(data_dtype="bfloat16", fp8_dots=False),
                       np.ones((64, 64), np.float32))
    assert abs(new.mean() - (1.0 - LR)) < 2e-4
    lower = new < 1.0  # each row and column of 64 draws rounds down some, never all
    assert lower.any(axis=0).all() and lower.any(axis=1).all()
    assert not lower.all(axis=0).any() and not lower.all(axis=1).any()


def test_non_finite_results_stay_non_finite() -> None:
    """inf, -inf and NaN come out as they went in, beside a weight that is dithered."""
    new = _new_weights(Policy(data_dtype="bfloat16", fp8_dots=False),
                       np.array([np.inf, -np.inf, np.nan, 1.0], np.float32))
    assert new[0] == np.inf and new[1] == -np.inf and np.isnan(new[2])
    assert new[3] in (1.0 - 2.0 ** -8, 1.0)


def test_nearest_rounding_drops_the_update() -> None:
    """What the default did before: every weight rounds back to 1."""
    new = _new_weights(Policy(data_dtype="bfloat16", fp8_dots=False, update_rounding="nearest"))
    assert np.all(new == 1.0)


@pytest.mark.parametrize("data_dtype", ["float16", "float32"])
def test_other_data_types_are_not_dithered(data_dtype: str) -> None:
    """f16 keeps 11 bits (1 - 1e-3 is held to half an ulp, 2^-12) and f32 is exact: their
    results round to nearest under ``auto``, every weight the same."""
    new = _new_weights(Policy(data_dtype=data_dtype, fp8_dots=False))
    assert np.unique(new).size == 1
    assert abs(new[0] - (1.0 - LR)) <= 2.0 ** -12  # half an f16 ulp below 1


def test_an_unknown_update_rounding_is_refused() -> None:
    with pytest.raises(ScalifyError, match="unknown update_rounding 'up'"):
        Policy(update_rounding="up")


def test_stochastic_update_rounding_needs_bf16_data() -> None:
    """f16 results are stored at unit RMS by a rescale, not converted: the option would do
    nothing there, so it is refused rather than ignored."""
    with pytest.raises(ScalifyError, match="update-rounding=stochastic rounds the update's "
                                           "results to bf16 data: data-dtype is f16"):
        Policy(update_rounding="stochastic")
