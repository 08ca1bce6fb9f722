"""Dots that iterate a linear map are rescaled with f16 data (rewrites/dot_groups.py).

Muon's Newton-Schulz iteration is 15 dots in a row with nothing that measures the data;
unit scaling's estimates left f16's range within three steps and the orthogonalized update
came back 0. A transformer's dots must stay as they are (its longest chain is three).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_mlir

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.rewrites.dot_groups import mark_iterated_dots
from scalify_hlo.rewrites.inline import inline_calls
from scalify_hlo.symbols import entry_function
from testdata import models

_RNG = np.random.default_rng(0)
WEIGHT = jnp.asarray(_RNG.normal(size=(16, 8)) * 0.3, jnp.float32)
GRADIENT = jnp.asarray(_RNG.normal(size=(16, 8)) * 0.05, jnp.float32)


def _newton_schulz(x: jax.Array, steps: int = 5) -> jax.Array:
    a, b, c = 3.4445, -4.7750, 2.0315
    x = x / (jnp.linalg.norm(x) + 1e-8)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x


def _muon_update(g: jax.Array) -> jax.Array:
    tx = optax.contrib.muon(1e-2)
    updates, _ = tx.update({"w": g}, tx.init({"w": WEIGHT}), {"w": WEIGHT})
    return updates["w"]


@pytest.mark.parametrize("fn", [_newton_schulz, _muon_update], ids=["newton_schulz", "muon"])
def test_an_iterated_linear_map_keeps_its_values_in_f16(fn) -> None:  # noqa: ANN001
    want = np.asarray(jax.jit(fn)(GRADIENT))
    got = compile_scaled(fn, GRADIENT, policy=Policy(fp8_dots=False), return_scaled=False)(
        GRADIENT)
    assert np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)) < 0.03


def _marked(text: str) -> int:
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        inline_calls(module)
        return mark_iterated_dots(entry_function(module))


def test_a_transformer_step_has_no_iterated_dots() -> None:
    step, example = models.gpt_step(n_layers=2, d_model=32, n_heads=2, context=16, vocab=64,
                                    batch=2)
    assert _marked(models.export_text(step, example)) == 0


def test_newton_schulz_dots_are_marked() -> None:
    text = jax.jit(_newton_schulz).lower(GRADIENT).as_text(debug_info=True)
    assert _marked(text) == 15
