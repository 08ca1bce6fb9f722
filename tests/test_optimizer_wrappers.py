"""optax wrappers whose state is more than moments: a micro-step counter and a ``lax.cond``
(``MultiSteps``), a count of non-finite updates (``apply_if_finite``), a learning rate kept in
the state and fed back each call (``inject_hyperparams``), and a loss fed into the update
(``reduce_on_plateau``). Each trains a small MLP from tiny weights (2^-12: its gradients
start near f16's subnormals) through ``compile_scaled`` with f16 data, the scaled state fed
back step after step as a training loop does, against ``jax.jit`` in f32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, compile_scaled, unscale_tree

F16 = Policy(fp8_dots=False)
STEPS = 12
_RNG = np.random.default_rng(0)
X = jnp.asarray(_RNG.standard_normal((16, 8)), jnp.float32)
Y = jnp.asarray(np.sin(np.asarray(X) @ _RNG.standard_normal((8, 2))), jnp.float32)


def _params(scale: float) -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(jax.random.key(0))
    return {"w1": jax.random.normal(k1, (8, 16)) * 0.3 * scale, "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 2)) * 0.3 * scale, "b2": jnp.zeros(2)}


def _loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


WRAPPERS: dict[str, Callable[[], optax.GradientTransformation]] = {
    "multi_steps": lambda: optax.MultiSteps(optax.adam(1e-2), every_k_schedule=3),
    "apply_if_finite": lambda: optax.apply_if_finite(optax.adam(1e-2), 3),
    "inject_hyperparams": lambda: optax.inject_hyperparams(optax.adamw)(
        learning_rate=optax.warmup_cosine_decay_schedule(0.0, 1e-2, 4, STEPS),
        weight_decay=1e-4),
    "reduce_on_plateau": lambda: optax.chain(
        optax.adam(1e-2), optax.contrib.reduce_on_plateau(patience=2, factor=0.5)),
}


def _step(optimizer: optax.GradientTransformation) -> Callable[..., Any]:
    def step(params: Any, state: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        updates, state = optimizer.update(grads, state, params, value=loss)
        return optax.apply_updates(params, updates), state, loss
    return step


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_wrapped_optimizer_trains_as_in_f32(name: str) -> None:
    optimizer = WRAPPERS[name]()
    step = _step(optimizer)
    reference = jax.jit(step)
    params = _params(2.0 ** -12)
    state = optimizer.init(params)
    want_params, want_state = params, state
    scaled = compile_scaled(step, params, state, X, Y, policy=F16)
    got_params, got_state, x, y = scaled.scale_args(params, state, X, Y)
    for _ in range(STEPS):
        got_params, got_state, got_loss = scaled(got_params, got_state, x, y)
        want_params, want_state, want_loss = reference(want_params, want_state, X, Y)
        np.testing.assert_allclose(float(unscale_tree(got_loss)), float(want_loss), rtol=1e-2)
    got = unscale_tree(got_params)
    for key, want in want_params.items():
        size = float(jnp.max(jnp.abs(want)))
        assert size > 1e-3, f"{key} did not train"  # the reference moved off its tiny start
        assert float(jnp.max(jnp.abs(got[key] - want))) <= 1e-2 * size, key
    for got_leaf, want_leaf in zip(jax.tree.leaves(unscale_tree(got_state)),
                                   jax.tree.leaves(want_state), strict=True):
        assert np.all(np.isfinite(np.asarray(got_leaf, np.float32)))
        if np.issubdtype(np.asarray(want_leaf).dtype, np.integer):  # counters count alike
            np.testing.assert_array_equal(np.asarray(got_leaf), np.asarray(want_leaf))
