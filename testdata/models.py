"""Sample JAX training steps that tests and benchmarks export to StableHLO.

Pure JAX + optax, no project imports: tests import it as ``from testdata import models``
(pytest puts the repository root on the path) and benchmarks load it by path. Each factory returns
``(step_fn, example_args)``: ``example_args`` is a tuple of pytrees of concrete
float32/int32 arrays, deterministic in ``seed``, and ``step_fn(*example_args)``
returns the updated state followed by the scalar loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

PyTree = Any
StepFn = Callable[..., Any]
Factory = tuple[StepFn, tuple[PyTree, ...]]

SGD_LR = 0.1
ADAM_LR = 1e-3
# Finite rather than -inf so masked logits stay finite under scaling/casting.
MASK_VALUE = -1e9


def export_text(step_fn: StepFn, example_args: tuple[PyTree, ...]) -> str:
    """StableHLO text of ``step_fn``, keeping debug locations.

    The locations carry JAX's name stack, which is how the rewrite pipeline tells
    forward ops from backward ones (``transpose(jvp(...))``).
    """
    return jax.jit(step_fn).lower(*example_args).as_text(debug_info=True)


def _dense_init(key: jax.Array, fan_in: int, fan_out: int) -> jax.Array:
    """Normal init scaled by 1/sqrt(fan_in) so activations stay O(1)."""
    return jax.random.normal(key, (fan_in, fan_out), jnp.float32) / jnp.sqrt(jnp.float32(fan_in))


def _softmax_xent_onehot(logits: jax.Array, onehot: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy; log_softmax gives JAX's private func.call."""
    return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits, axis=-1), axis=-1))


def _sgd(params: PyTree, grads: PyTree, lr: float = SGD_LR) -> PyTree:
    """Plain SGD, written out so the update is a visible multiply-subtract."""
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


# ---------------------------------------------------------------------------- MLP


def mlp_loss(params: PyTree, x: jax.Array, y: jax.Array) -> jax.Array:
    """The MLP's loss: ReLU between dense layers, softmax cross-entropy on one-hot labels."""
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return _softmax_xent_onehot(h, y)


def mlp_step(seed: int = 0, batch: int = 8, sizes: Sequence[int] = (32, 64, 64, 10)) -> Factory:
    """ReLU MLP, softmax cross-entropy on float one-hot labels, SGD.

    Signature: ``step(params, x, labels_onehot) -> (params, loss)``.
    """
    sizes = tuple(sizes)
    key = jax.random.key(seed)
    kx, ky, *kl = jax.random.split(key, 2 + len(sizes) - 1)
    params = [
        {"w": _dense_init(k, n_in, n_out), "b": jnp.zeros((n_out,), jnp.float32)}
        for k, n_in, n_out in zip(kl, sizes[:-1], sizes[1:], strict=True)
    ]
    x = jax.random.normal(kx, (batch, sizes[0]), jnp.float32)
    labels = jax.random.randint(ky, (batch,), 0, sizes[-1])
    y = jax.nn.one_hot(labels, sizes[-1], dtype=jnp.float32)

    def step(params: PyTree, x: jax.Array, y: jax.Array) -> tuple[PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        return _sgd(params, grads), loss

    return step, (params, x, y)


# -------------------------------------------------------------------- transformer


def _layernorm(x: jax.Array, p: PyTree, eps: float = 1e-5) -> jax.Array:
    """Hand-written layernorm so mean/var/rsqrt appear as plain StableHLO ops."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def _ln_init(d: int) -> PyTree:
    return {"scale": jnp.ones((d,), jnp.float32), "bias": jnp.zeros((d,), jnp.float32)}


def _init_transformer(
    key: jax.Array, n_layers: int, d_model: int, vocab: int, context: int
) -> PyTree:
    """GPT-2-like init: N(0, 0.02) embeddings, 1/sqrt(fan_in) dense weights."""
    k_wte, k_wpe, *k_layers = jax.random.split(key, 2 + n_layers)
    layers = []
    for k in k_layers:
        kq, ko, k1, k2 = jax.random.split(k, 4)
        layers.append(
            {
                "ln1": _ln_init(d_model),
                "w_qkv": _dense_init(kq, d_model, 3 * d_model),
                "b_qkv": jnp.zeros((3 * d_model,), jnp.float32),
                "w_o": _dense_init(ko, d_model, d_model),
                "b_o": jnp.zeros((d_model,), jnp.float32),
                "ln2": _ln_init(d_model),
                "w_fc": _dense_init(k1, d_model, 4 * d_model),
                "b_fc": jnp.zeros((4 * d_model,), jnp.float32),
                "w_proj": _dense_init(k2, 4 * d_model, d_model),
                "b_proj": jnp.zeros((d_model,), jnp.float32),
            }
        )
    return {
        "wte": 0.02 * jax.random.normal(k_wte, (vocab, d_model), jnp.float32),
        "wpe": 0.02 * jax.random.normal(k_wpe, (context, d_model), jnp.float32),
        "layers": layers,
        "ln_f": _ln_init(d_model),
    }


def _attention(x: jax.Array, p: PyTree, n_heads: int) -> jax.Array:
    """Causal multi-head self-attention with an explicit tril mask and softmax."""
    b, t, d = x.shape
    hd = d // n_heads
    qkv = x @ p["w_qkv"] + p["b_qkv"]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (a.reshape(b, t, n_heads, hd) for a in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd)).astype(q.dtype)
    mask = jnp.tril(jnp.ones((t, t), jnp.bool_))
    logits = jnp.where(mask, logits, MASK_VALUE)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, t, d)
    return out @ p["w_o"] + p["b_o"]


def _mlp_block(x: jax.Array, p: PyTree) -> jax.Array:
    """GELU MLP; exact (erf) GELU so chlo.erf shows up in the module."""
    h = jax.nn.gelu(x @ p["w_fc"] + p["b_fc"], approximate=False)
    return h @ p["w_proj"] + p["b_proj"]


def _transformer_loss(
    params: PyTree, tokens: jax.Array, targets: jax.Array, n_heads: int
) -> jax.Array:
    """Pre-LN decoder with tied embeddings; mean next-token cross-entropy."""
    t = tokens.shape[1]
    x = params["wte"][tokens] + params["wpe"][:t]
    for layer in params["layers"]:
        x = x + _attention(_layernorm(x, layer["ln1"]), layer, n_heads)
        x = x + _mlp_block(_layernorm(x, layer["ln2"]), layer)
    x = _layernorm(x, params["ln_f"])
    logits = x @ params["wte"].T
    onehot = jax.nn.one_hot(targets, params["wte"].shape[0], dtype=logits.dtype)
    return _softmax_xent_onehot(logits, onehot)


def gpt_step(
    n_layers: int,
    d_model: int,
    n_heads: int,
    context: int,
    vocab: int = 256,
    batch: int = 8,
    seed: int = 0,
    compute_dtype: Any = None,
    clip_norm: float | None = None,
) -> Factory:
    """GPT-style decoder trained with optax Adam, sized by the caller.

    Signature: ``step(params, opt_state, tokens, targets) -> (params, opt_state, loss)``
    with int32 ``tokens``/``targets`` of shape ``(batch, context)``. ``compute_dtype``
    (bf16, say) gives the usual mixed-precision step: f32 parameters and Adam state, the
    forward and backward pass on parameters cast to that dtype (every dot in it), an f32 loss.
    ``clip_norm`` clips the gradients to that global norm first (``optax.clip_by_global_norm``,
    as most language-model recipes do).
    """
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} not divisible by n_heads={n_heads}")
    k_params, k_tok = jax.random.split(jax.random.key(seed))
    params = _init_transformer(k_params, n_layers, d_model, vocab, context)
    optimizer = optax.adam(ADAM_LR)
    if clip_norm is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(clip_norm), optimizer)
    opt_state = optimizer.init(params)
    # targets are tokens shifted by one, as in next-token language modelling
    seq = jax.random.randint(k_tok, (batch, context + 1), 0, vocab, jnp.int32)
    tokens, targets = seq[:, :-1], seq[:, 1:]

    def mixed_precision_loss(
        params: PyTree, tokens: jax.Array, targets: jax.Array, n_heads: int
    ) -> jax.Array:
        cast = jax.tree.map(lambda p: p.astype(compute_dtype), params)
        return _transformer_loss(cast, tokens, targets, n_heads).astype(jnp.float32)

    loss_fn = _transformer_loss if compute_dtype is None else mixed_precision_loss

    def step(
        params: PyTree, opt_state: PyTree, tokens: jax.Array, targets: jax.Array
    ) -> tuple[PyTree, PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets, n_heads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, (params, opt_state, tokens, targets)


def transformer_step(
    seed: int = 0,
    n_layers: int = 2,
    d_model: int = 32,
    n_heads: int = 2,
    vocab: int = 64,
    context: int = 16,
    batch: int = 4,
) -> Factory:
    """Small GPT-style step for tests; see :func:`gpt_step`."""
    return gpt_step(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        context=context,
        vocab=vocab,
        batch=batch,
        seed=seed,
    )


# --------------------------------------------------------------------------- scan


def scan_step(seed: int = 0, n_layers: int = 3, width: int = 16, batch: int = 4) -> Factory:
    """Residual tanh MLP over stacked layers via lax.scan (a stablehlo.while), MSE, SGD.

    Signature: ``step(params, x, y) -> (params, loss)``.
    """
    kw, kx, ky = jax.random.split(jax.random.key(seed), 3)
    params = {
        "w": jax.random.normal(kw, (n_layers, width, width), jnp.float32)
        / jnp.sqrt(jnp.float32(width)),
        "b": jnp.zeros((n_layers, width), jnp.float32),
    }
    x = jax.random.normal(kx, (batch, width), jnp.float32)
    y = jax.random.normal(ky, (batch, width), jnp.float32)

    def loss_fn(params: PyTree, x: jax.Array, y: jax.Array) -> jax.Array:
        def layer(h: jax.Array, p: PyTree) -> tuple[jax.Array, None]:
            return h + jnp.tanh(h @ p["w"] + p["b"]), None

        h, _ = jax.lax.scan(layer, x, params)
        return jnp.mean(jnp.square(h - y))

    def step(params: PyTree, x: jax.Array, y: jax.Array) -> tuple[PyTree, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return _sgd(params, grads), loss

    return step, (params, x, y)


# Default-sized factories exported to testdata/steps/ by export_steps.py.
STEPS: dict[str, Callable[[], Factory]] = {
    "mlp_step": mlp_step,
    "transformer_step": transformer_step,
    "scan_step": scan_step,
}
