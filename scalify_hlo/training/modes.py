"""Training modes: how one plain JAX/optax train step becomes the step each mode runs.

``fp32`` and ``bf16`` are the baselines users have today (``bf16`` is JAX mixed precision:
the model computes in bf16, master weights and Adam state stay f32); the ``scalify-*`` modes
run the *fp32* train step through ``compile_scaled``, so the model code is the same for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from scalify_hlo.compile import compile_scaled
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import Policy
from scalify_hlo.scaled_array import ScaledArray, is_scaled_leaf, unscale_tree

LossFn = Callable[[Any, Any, Any], jax.Array]
TrainStep = Callable[..., tuple[Any, Any, jax.Array]]


@dataclass(frozen=True)
class Mode:
    """One way of running the same train step."""

    name: str
    description: str
    compute_dtype: Any  # what the model computes in (the loss function is built for it)
    policy: Policy | None  # None: plain ``jax.jit``


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("fp32", "plain JAX, f32 everywhere", jnp.float32, None),
    Mode("bf16", "JAX mixed precision: bf16 compute, f32 master weights and Adam state",
         jnp.bfloat16, None),
    Mode("scalify-f16", "scalify-hlo: f16 data (weights, Adam's moments; the second stored by "
         "its square root, computed in f32), f16 dots",
         jnp.float32, Policy(fp8_dots=False)),
    Mode("scalify-fp8", "scalify-hlo: FP8 dots (E4M3 forward, E5M2 gradients), f16 elsewhere "
         "(Adam's second moment stored by its square root in f16)",
         jnp.float32, Policy()),
    Mode("scalify-fp8-sr", "scalify-fp8 with Adam's second moment's square root rounded "
         "stochastically to f16 (square_rounding=stochastic)",
         jnp.float32, Policy(square_rounding="stochastic")),
    Mode("scalify-fp8-sq32", "scalify-fp8 with Adam's second moment stored in f32 (the "
         "default before issue 19: square_dtype=float32)",
         jnp.float32, Policy(square_dtype="float32")),
    Mode("scalify-f16-sq32", "scalify-f16 with Adam's second moment stored in f32 "
         "(square_dtype=float32)",
         jnp.float32, Policy(fp8_dots=False, square_dtype="float32")),
    Mode("scalify-f16-sq16", "scalify-f16 with every value in f16, Adam's second moment "
         "included, stored with its amax at the top of f16's range (16-bit state)",
         jnp.float32, Policy(fp8_dots=False, square_dtype="float16")),
    Mode("scalify-f16-bf16sq", "scalify-f16 with Adam's second moment in bf16 (16-bit state; "
         "the default keeps it in f32)", jnp.float32,
         Policy(fp8_dots=False, square_dtype="bfloat16")),
    Mode("scalify-fp8-mu8", "scalify-fp8 with Adam's first moment stored in FP8 E4M3FN, amax "
         "scale, stochastic rounding (moment_format; the second moment's root in f16)",
         jnp.float32, Policy(moment_format="float8_e4m3fn")),
    Mode("scalify-fp8-mu8-nu8", "scalify-fp8-mu8 with the second moment's square root in FP8 "
         "E5M2 too, stochastic rounding (square_format)", jnp.float32,
         Policy(moment_format="float8_e4m3fn", square_format="float8_e5m2",
                square_rounding="stochastic")),
    # The alternatives measured against them (how-it-works.md, "First moments in FP8").
    Mode("scalify-fp8-mu8-nearest", "scalify-fp8-mu8 rounding the first moment to nearest",
         jnp.float32, Policy(moment_format="float8_e4m3fn", moment_rounding="nearest")),
    Mode("scalify-fp8-mu8-nu8e4", "scalify-fp8-mu8-nu8 with the root in E4M3FN", jnp.float32,
         Policy(moment_format="float8_e4m3fn", square_format="float8_e4m3fn",
                square_rounding="stochastic")),
)}


def mode(name: str) -> Mode:
    if name not in MODES:
        raise ScalifyError(f"unknown mode '{name}' (use {', '.join(MODES)})")
    return MODES[name]


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation) -> TrainStep:
    """The train step as a JAX user writes it: value_and_grad, optax update, apply."""

    def train_step(params: Any, opt_state: Any, x: Any, y: Any) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


@dataclass
class PreparedStep:
    """A mode's compiled step and its initial state; ``params_f32`` reads the weights back."""

    step: Callable[..., tuple[Any, Any, Any]]
    state: tuple[Any, Any]
    report: str | None

    def params_f32(self) -> Any:
        return unscale_tree(self.state[0], jnp.float32)


def prepare(mode_: Mode, train_step: TrainStep, params: Any, opt_state: Any,
            x: Any, y: Any) -> PreparedStep:
    """Compile ``train_step`` for ``mode_`` on example inputs and build its initial state.

    The state is put on the device first: the step's outputs come back committed to it, and
    ``jax.jit`` compiles again when committed arrays replace the uncommitted ones of the
    first call (a second 10-20 s XLA compile for a small GPT on CPU)."""
    device = jax.devices()[0]
    params, opt_state = jax.device_put((params, opt_state), device)
    if mode_.policy is None:
        return PreparedStep(jax.jit(train_step, donate_argnums=(0, 1)), (params, opt_state),
                            None)
    step = compile_scaled(train_step, params, opt_state, x, y, policy=mode_.policy)
    # Not device_put again: the arguments are on the device already, and device_put would
    # take the scales out of their bank (see ScaledStep), a layout the step compiles for anew.
    scaled_params, scaled_opt_state, _, _ = step.scale_args(params, opt_state, x, y)
    return PreparedStep(step, (scaled_params, scaled_opt_state), str(step.report()))


def loss_value(loss: Any) -> float:
    return float(loss.unscale() if isinstance(loss, ScaledArray) else loss)


def _arrays(state: Any) -> Iterator[np.ndarray]:
    """Every array of a state tree, a ``ScaledArray`` giving its data and its scale."""
    for leaf in jax.tree.leaves(state, is_leaf=is_scaled_leaf):
        parts = (leaf.data, leaf.scale) if isinstance(leaf, ScaledArray) else (leaf,)
        yield from (np.asarray(p) for p in parts if p is not None)


def state_bytes(state: Any) -> int:
    """Bytes of weights and optimizer state as they live between steps, scales included."""
    return sum(int(array.nbytes) for array in _arrays(state))


def all_finite(state: Any) -> bool:
    """No NaN or Inf in any floating array (FP8 arrays, numpy kind "V", too)."""
    return all(np.all(np.isfinite(a.astype(np.float32))) for a in _arrays(state)
               if jnp.issubdtype(a.dtype, jnp.floating))
