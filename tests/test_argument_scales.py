"""Folding the scales a step is given into its data (``scalify{argument-scales=fold}``,
``Policy.argument_scales``): exact where the data has f32's exponent range, and the run-time
exponent arithmetic and the unit-scaling shifts are gone from the module."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled
from scalify_hlo.api import rewrite_text
from scalify_hlo.errors import ScalifyError
from scalify_hlo.signature import entry_signature
from testdata import models
from tests.step_helpers import assert_close_per_tensor, run_both

FOLD = "inline,scalify{data-dtype=f32 argument-scales=fold},simplify"
KEEP = "inline,scalify{data-dtype=f32},simplify"
# What reads an exponent from an f32 scale and builds 2^e from one at run time (a
# bitcast_convert alone may be a packed f32 scalar: Adam's bias correction).
EXPONENT_OPS = ("stablehlo.shift_left", "stablehlo.shift_right_logical")


@pytest.fixture(scope="module")
def gpt_text() -> str:
    return models.export_text(*models.gpt_step(n_layers=1, d_model=32, n_heads=2, context=8,
                                               vocab=32, batch=2))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_folded_f32_step_is_the_original(gpt_text: str, seed: int) -> None:
    """Scales from 2^-30 to 2^30 on every argument: the folded GPT step (Adam) gives the
    original's outputs, as the step that keeps its scales does."""
    reference, got, _ = run_both(gpt_text, FOLD, seed=seed, lo=-30, hi=30)
    assert_close_per_tensor(reference, got, rtol=1e-5)


def test_folding_leaves_no_exponent_arithmetic(gpt_text: str) -> None:
    """No exponent is read or built, and no unit-scaling shift is left: the folded step's
    multiplies are the original's and one per argument (its scale, on entry)."""
    folded, kept = rewrite_text(gpt_text, FOLD), rewrite_text(gpt_text, KEEP)
    for name in EXPONENT_OPS:
        assert name not in folded, name
    assert sum(kept.count(name) for name in EXPONENT_OPS) > 20
    multiplies = gpt_text.count("stablehlo.multiply")
    assert folded.count("stablehlo.multiply") <= multiplies + len(
        entry_signature(gpt_text).inputs) < kept.count("stablehlo.multiply")


def test_compile_scaled_with_folded_scales_over_fed_back_calls() -> None:
    """Two calls of an MLP training step, the outputs fed back: the same parameters and
    losses under the f32 policy with its scales folded and kept, and under ``jax.jit``."""
    step, example = models.mlp_step()
    policies = {mode: Policy(data_dtype="float32", fp8_dots=False, argument_scales=mode)
                for mode in ("fold", "keep")}
    results = {}
    for mode, policy in policies.items():
        scaled = compile_scaled(step, *example, policy=policy)
        state = scaled.scale_args(*example)
        for _ in range(2):
            params, loss = scaled(*state)
            state = (params, *state[1:])
        results[mode] = [np.asarray(leaf.unscale() if isinstance(leaf, ScaledArray) else leaf)
                         for leaf in jax.tree.leaves((params, loss), is_leaf=lambda x:
                                                     isinstance(x, ScaledArray))]
    plain = jax.jit(step)
    state = example
    for _ in range(2):
        params, loss = plain(*state)
        state = (params, *state[1:])
    reference = [np.asarray(leaf) for leaf in jax.tree.leaves((params, loss))]
    assert_close_per_tensor(reference, results["fold"], rtol=1e-5)
    assert_close_per_tensor(results["keep"], results["fold"], rtol=1e-6)


def test_a_value_below_f32s_range_flushes_once_folded_as_in_the_original() -> None:
    """The price of folding: ``data * scale`` under 2^-126 is subnormal in the data, and
    XLA flushes it as the original step does, where a kept scale holds it."""
    x = np.array([1.0, -0.5], np.float32)
    given = ScaledArray(jnp.asarray(x), 2.0 ** -140)

    def double(v: jax.Array) -> jax.Array:
        return v * 2.0

    folded = compile_scaled(double, x, policy=Policy(data_dtype="float32", fp8_dots=False,
                                                     argument_scales="fold"))(given)
    kept = compile_scaled(double, x, policy=Policy(data_dtype="float32", fp8_dots=False))(given)
    original = jax.jit(double)(jnp.asarray(x * np.float32(2.0 ** -140)))
    np.testing.assert_array_equal(np.asarray(folded.unscale()), np.asarray(original))
    np.testing.assert_array_equal(
        np.asarray(kept.data, np.float64) * float(kept.scale), x.astype(np.float64) * 2.0 ** -139)


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ScalifyError, match="unknown argument_scales 'all'"):
        Policy(argument_scales="all")
