"""A Flax ``TrainState`` training loop through ``compile_scaled`` (issue 22, section 2).

``TrainState.create`` sets ``step=0``, a Python int: the step took it (``jax.jit`` converts
it), but ``ScaledStep.scale_args`` refused it (``args[0].step: a int where the step takes an
array``), which hit nearly every Flax training loop; and a numpy float64 leaf, which
``jax.jit`` takes as float32 without x64, made ``compile_scaled`` count it unscaled and refuse
its own rewrite. Python and numpy scalars are now taken wherever the step takes them,
converted as ``jax.jit`` converts them.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from scalify_hlo import Policy, ScaledArray, ScaledStep, compile_scaled, unscale_tree
from scalify_hlo.scaled_array import is_scaled_leaf

F32 = Policy(data_dtype="float32", fp8_dots=False)


class _Mlp(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(2)(nn.relu(nn.Dense(8)(x)))


def _train_step(state: train_state.TrainState, batch: dict[str, Any]
                ) -> tuple[train_state.TrainState, jax.Array]:
    def loss_fn(params: Any) -> jax.Array:
        out = state.apply_fn({"params": params}, batch["x"]) * batch["gain"]
        return jnp.mean((out - batch["y"]) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


def _setup() -> tuple[train_state.TrainState, dict[str, Any]]:
    model = _Mlp()
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), jnp.float32)
    params = model.init(jax.random.key(0), x)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=optax.adam(1e-2))
    # a Python float and a numpy float64 scalar beside the arrays
    batch = {"x": x, "y": jnp.ones((4, 2)), "gain": 1.5, "eps": np.float64(0.0)}
    return state, batch


def _close(got: Any, want: Any) -> None:
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


Setup = tuple[ScaledStep, train_state.TrainState, dict[str, Any]]


@pytest.fixture(scope="module")
def setup() -> Setup:
    """The compiled step and the arguments it was compiled at (the state's optimizer is part
    of its tree structure: a step takes states of that optimizer object only)."""
    state, batch = _setup()
    return compile_scaled(_train_step, state, batch, policy=F32), state, batch


def test_a_train_state_loop_starts_from_scale_args(setup: Setup) -> None:
    step, state, batch = setup
    assert type(state.step) is int
    args = step.scale_args(state, batch)
    assert args[0].step.dtype == jnp.int32 and not args[0].step.weak_type
    assert isinstance(args[1]["gain"], ScaledArray) and args[1]["gain"].dtype == jnp.float32
    want = (state, batch)
    for _ in range(3):  # feed the outputs back, as a training loop does
        new_state, loss = step(*args)
        want_state, want_loss = jax.jit(_train_step)(*want)
        _close(unscale_tree((new_state.params, new_state.opt_state, loss)),
               (want_state.params, want_state.opt_state, want_loss))
        args, want = (new_state, args[1]), (want_state, batch)
    assert int(new_state.step) == 3
    assert all(isinstance(leaf, ScaledArray) for leaf in jax.tree.leaves(
        new_state.params, is_leaf=is_scaled_leaf))


def test_scale_args_takes_numpy_scalars_and_scalar_data(setup: Setup) -> None:
    """A numpy int where the step took a Python int, and a ScaledArray of a Python float."""
    step, state, batch = setup
    args = step.scale_args(state.replace(step=np.int64(5)),
                           {**batch, "gain": ScaledArray(0.75, 2.0)})
    assert args[0].step.dtype == jnp.int32 and int(args[0].step) == 5
    assert float(args[1]["gain"].unscale()) == 1.5
    new_state, _ = step(*args)
    assert int(new_state.step) == 6
