"""Sharded training steps on a mesh of 8 devices, shared by tests/test_sharded.py and
benchmarks/sharded.py: data parallel, FSDP, a 4x2 Megatron-style tensor-parallel mesh,
a ``shard_map`` step with ``psum`` of gradients and a ``with_sharding_constraint``.

Each setup returns ``(step, args)`` with ``args`` already placed on the mesh; the device
count must be set (``--xla_force_host_platform_device_count=8``) before JAX starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import models
import numpy as np
import optax
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

PyTree = Any
Setup = tuple[Callable[..., Any], tuple[Any, ...]]
SETUPS = ("data_parallel", "fsdp", "tensor_parallel", "shard_map", "constraint")


def _mesh(shape: tuple[int, ...], names: tuple[str, ...]) -> Mesh:
    return Mesh(np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape), names)


def _place(tree: PyTree, mesh: Mesh, spec_of: Callable[[str, Any], P]) -> PyTree:
    return jax.tree_util.tree_map_with_path(
        lambda path, x: jax.device_put(x, NamedSharding(mesh, spec_of(
            jax.tree_util.keystr(path), x))), tree)


def _fsdp_spec(size: int) -> Callable[[str, Any], P]:
    """The first dimension sharded over all devices where it divides, else replicated."""
    def spec(_: str, x: Any) -> P:
        shape = np.shape(x)
        if shape and shape[0] % size == 0:
            return P("data", *([None] * (len(shape) - 1)))
        return P()
    return spec


# Megatron: the first dot of a block is column-parallel, the second row-parallel.
_COLUMN = re.compile(r"w_qkv|w_fc|\[0\]\['w'\]")
_COLUMN_BIAS = re.compile(r"b_qkv|b_fc|\[0\]\['b'\]")
_ROW = re.compile(r"w_o\b|w_proj|\[1\]\['w'\]")


def _megatron_spec(path: str, x: Any) -> P:
    if np.ndim(x) == 2 and _COLUMN.search(path):
        return P(None, "model")
    if np.ndim(x) == 2 and _ROW.search(path):
        return P("model", None)
    if np.ndim(x) == 1 and _COLUMN_BIAS.search(path):
        return P("model")
    return P()


_GPT_OPTIMIZER = optax.adamw(1e-3)


def _gpt_loss(params: PyTree, tokens: jax.Array, targets: jax.Array) -> jax.Array:
    return models._transformer_loss(params, tokens, targets, 2)


def model(kind: str, batch: int) -> Setup:
    """``mlp`` (SGD, small: for tests) or ``gpt`` (2 layers, AdamW: the issue's benchmark)."""
    if kind == "mlp":
        return models.mlp_step(batch=batch, sizes=(16, 32, 16))
    step, (params, _, tokens, targets) = models.gpt_step(n_layers=2, d_model=32, n_heads=2,
                                                        context=16, vocab=64, batch=batch)

    def adamw_step(params: PyTree, opt_state: PyTree, tokens: jax.Array,
                   targets: jax.Array) -> tuple[PyTree, PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(_gpt_loss)(params, tokens, targets)
        updates, opt_state = _GPT_OPTIMIZER.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    del step
    return adamw_step, (params, _GPT_OPTIMIZER.init(params), tokens, targets)


def setup(name: str, kind: str = "mlp", batch: int = 16) -> Setup:
    """The step of setup ``name`` with its arguments placed on the mesh."""
    step, args = model(kind, batch)
    params, rest, data = args[0], args[1:-2], args[-2:]
    if name == "data_parallel":
        mesh = _mesh((8,), ("data",))
        placed = _place((params, *rest), mesh, lambda *_: P())
    elif name == "fsdp":
        mesh = _mesh((8,), ("data",))
        placed = _place((params, *rest), mesh, _fsdp_spec(8))
    elif name == "tensor_parallel":
        mesh = _mesh((4, 2), ("data", "model"))
        placed = _place((params, *rest), mesh, _megatron_spec)
    elif name == "shard_map":
        return shard_map_step(step, args) if kind == "mlp" else gpt_shard_map_step(args)
    elif name == "constraint":
        return constraint_step()
    else:
        raise ValueError(f"unknown setup {name!r}; one of {SETUPS}")
    batch_spec = NamedSharding(mesh, P("data"))
    return step, (*placed, *(jax.device_put(x, batch_spec) for x in data))


def shard_map_step(step: Callable[..., Any], args: tuple[Any, ...]) -> Setup:
    """Data parallel written by hand: each device takes the gradient of its batch shard, a
    ``psum`` adds them up, every device applies the same SGD update (``check_vma=False``:
    JAX would otherwise insert the sum itself, in the gradient of the replicated
    parameters)."""
    del step
    mesh = _mesh((8,), ("data",))
    params, x, y = args

    def local(params: PyTree, x: jax.Array, y: jax.Array) -> tuple[PyTree, jax.Array,
                                                                  jax.Array]:
        loss, grads = jax.value_and_grad(models.mlp_loss)(params, x, y)
        grads = jax.tree.map(lambda g: jax.lax.psum(g, "data") / 8, grads)
        # a sum of squares of small values (1e-3 times the gradients, squared: about 1e-8,
        # which f16 flushes to 0 at scale 1)
        norm = jax.lax.psum(sum(jnp.sum((1e-3 * g) ** 2) for g in jax.tree.leaves(grads)),
                            "data")
        new = jax.tree.map(lambda p, g: p - models.SGD_LR * g, params, grads)
        return new, jax.lax.pmean(loss, "data"), norm / 8

    def sharded(params: PyTree, x: jax.Array, y: jax.Array) -> tuple[PyTree, jax.Array,
                                                                    jax.Array]:
        return shard_map(local, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                         out_specs=(P(), P(), P()), check_vma=False)(params, x, y)

    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    return sharded, (jax.device_put(params, replicated), jax.device_put(x, batch),
                     jax.device_put(y, batch))


def gpt_shard_map_step(args: tuple[Any, ...]) -> Setup:
    """The GPT's AdamW step as data parallel written by hand: each device takes the
    gradient of its batch shard, a ``psum`` averages them, every device applies the same
    update to its replica of the parameters and Adam state."""
    mesh = _mesh((8,), ("data",))

    def local(params: PyTree, opt_state: PyTree, tokens: jax.Array,
              targets: jax.Array) -> tuple[PyTree, PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(_gpt_loss)(params, tokens, targets)
        grads = jax.tree.map(lambda g: jax.lax.psum(g, "data") / 8, grads)
        updates, opt_state = _GPT_OPTIMIZER.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    def sharded(params: PyTree, opt_state: PyTree, tokens: jax.Array,
                targets: jax.Array) -> tuple[PyTree, PyTree, jax.Array]:
        return shard_map(local, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")),
                         out_specs=(P(), P(), P()), check_vma=False)(
                             params, opt_state, tokens, targets)

    params, opt_state, tokens, targets = args
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    return sharded, (jax.device_put(params, replicated), jax.device_put(opt_state, replicated),
                     jax.device_put(tokens, batch), jax.device_put(targets, batch))


def constraint_step() -> Setup:
    """Small values (1e-5 .. 1e-3) through ``with_sharding_constraint``: at scale 1 f16
    flushes the smallest of them to zero."""
    mesh = _mesh((8,), ("data",))
    key = jax.random.key(3)
    x = jnp.exp(jax.random.uniform(key, (64, 16), minval=-11.5, maxval=-7.0))

    def step(x: jax.Array) -> jax.Array:
        y = jax.lax.with_sharding_constraint(x * 1e-2, NamedSharding(mesh, P("data")))
        return y * 3.0

    return step, (jax.device_put(x, NamedSharding(mesh, P())),)
