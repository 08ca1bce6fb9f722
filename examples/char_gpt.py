"""Character-level GPT in the nanoGPT style, as Flax modules, on Tiny Shakespeare.

Learned token and position embeddings, pre-layernorm blocks with causal multi-head attention
and a GELU MLP, a final layernorm; AdamW with linear warmup and cosine decay. The corpus is
``../shared/data/tinyshakespeare.txt`` split 90/10.

With ``--scan-layers`` the blocks' weights are stacked on a leading axis and the blocks run
under ``nn.scan`` (one ``lax.scan``, the layout of Flax's and MaxText's large models), each
block rematerialized in the backward pass with ``--remat``.

    python examples/char_gpt.py --mode scalify-fp8 --steps 2000
    python examples/char_gpt.py --mode scalify-fp8 --steps 2000 --scan-layers
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from scalify_hlo.training.data import TextData, load_text
from scalify_hlo.training.loop import Batch, Task


@dataclass(frozen=True)
class GPTConfig:
    vocab: int
    layers: int = 4
    width: int = 128
    heads: int = 4
    context: int = 128
    scan_layers: bool = False  # blocks under nn.scan, weights stacked on a leading axis
    remat: bool = False  # with scan_layers: each block recomputed in the backward pass
    # With remat: what the backward pass keeps instead of recomputing, as the name of one of
    # jax.checkpoint_policies (e.g. "dots_saveable"); None keeps nothing.
    remat_policy: str | None = None


class Block(nn.Module):
    config: GPTConfig
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        c = self.config
        batch, length, width = x.shape
        head = width // c.heads
        h = nn.LayerNorm(dtype=self.dtype)(x)
        q, k, v = jnp.split(nn.Dense(3 * width, dtype=self.dtype)(h), 3, axis=-1)
        q, k, v = (t.reshape(batch, length, c.heads, head) for t in (q, k, v))
        logits = jnp.einsum("bthd,bshd->bhts", q, k).astype(jnp.float32) / np.sqrt(head)
        causal = np.tril(np.ones((length, length), bool))
        weights = jax.nn.softmax(jnp.where(causal, logits, -1e9), axis=-1).astype(self.dtype)
        y = jnp.einsum("bhts,bshd->bthd", weights, v).reshape(batch, length, width)
        x = x + nn.Dense(width, dtype=self.dtype)(y)
        h = nn.LayerNorm(dtype=self.dtype)(x)
        return x + nn.Dense(width, dtype=self.dtype)(
            nn.gelu(nn.Dense(4 * width, dtype=self.dtype)(h)))


class ScannedBlock(nn.Module):
    """``Block`` in the (carry, x) -> (carry, y) form that ``nn.scan`` takes."""

    config: GPTConfig
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, _: None) -> tuple[jax.Array, None]:
        return Block(self.config, self.dtype)(x), None


def _blocks(config: GPTConfig, dtype: Any, x: jax.Array) -> jax.Array:
    """The blocks, unrolled or (``scan_layers``) under one ``nn.scan`` over stacked weights."""
    if not config.scan_layers:
        for _ in range(config.layers):
            x = Block(config, dtype)(x)
        return x
    policy = (getattr(jax.checkpoint_policies, config.remat_policy)
              if config.remat_policy else None)
    block = nn.remat(ScannedBlock, policy=policy) if config.remat else ScannedBlock
    stack = nn.scan(block, variable_axes={"params": 0}, split_rngs={"params": True},
                    length=config.layers)
    return stack(config, dtype, name="blocks")(x, None)[0]


class GPT(nn.Module):
    config: GPTConfig
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        c = self.config
        x = nn.Embed(c.vocab, c.width, dtype=self.dtype)(tokens)
        position = self.param("position", nn.initializers.normal(0.02), (c.context, c.width))
        x = x + position[: tokens.shape[1]].astype(self.dtype)
        x = _blocks(c, self.dtype, x)
        return nn.Dense(c.vocab, dtype=self.dtype)(nn.LayerNorm(dtype=self.dtype)(x))


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def schedule(steps: int, peak: float = 1e-3, warmup: int = 100) -> optax.Schedule:
    warmup = max(1, min(warmup, steps // 10))
    return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, max(steps, warmup + 1),
                                              peak / 10)


def gpt_task(data: TextData, config: GPTConfig | None = None, batch_size: int = 16,
             eval_batches: int = 8, learning_rate: float = 1e-3,
             weight_decay: float = 0.1, clip_norm: float | None = None) -> Task:
    """The GPT as a training task; ``clip_norm``: AdamW after global-norm clipping."""
    config = config or GPTConfig(vocab=len(data.vocab))
    length = config.context

    def windows(ids: np.ndarray, starts: np.ndarray) -> Batch:
        x = np.stack([ids[s:s + length] for s in starts])
        y = np.stack([ids[s + 1:s + length + 1] for s in starts])
        return x, y

    def loss_fn(dtype: Any):
        model = GPT(config, dtype)

        def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
            return cross_entropy(model.apply({"params": params}, x), y)

        return loss

    def init(key: jax.Array) -> Any:
        return GPT(config).init(key, data.train[None, :length])["params"]

    def batches(seed: int) -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            yield windows(data.train, rng.integers(0, len(data.train) - length - 1, batch_size))

    # A fixed validation set: the same windows for every mode and every evaluation.
    val_starts = np.random.default_rng(1234).integers(
        0, len(data.val) - length - 1, (eval_batches, batch_size))

    def evaluate(params: Any, dtype: Any) -> dict[str, float]:
        losses = [float(_loss(config, dtype, params, *windows(data.val, starts)))
                  for starts in val_starts]
        return {"val_loss": float(np.mean(losses))}

    def optimizer(steps: int) -> optax.GradientTransformation:
        adamw = optax.adamw(schedule(steps, learning_rate), weight_decay=weight_decay)
        if clip_norm is None:
            return adamw
        return optax.chain(optax.clip_by_global_norm(clip_norm), adamw)

    name = f"{data.name}-gpt" + ("-scan" if config.scan_layers else "")
    return Task(name, init, loss_fn, optimizer, batches, evaluate)


@jax.jit(static_argnums=(0, 1))
def _loss(config: GPTConfig, dtype: Any, params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    return cross_entropy(GPT(config, dtype).apply({"params": params}, x), y)


def main(argv: list[str] | None = None) -> None:
    from scalify_hlo.training.loop import run
    from scalify_hlo.training.modes import MODES, mode

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=list(MODES), default="scalify-fp8")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--scan-layers", action="store_true",
                        help="stack the blocks' weights and run the blocks under nn.scan")
    parser.add_argument("--remat", action="store_true",
                        help="with --scan-layers: recompute each block in the backward pass")
    parser.add_argument("--remat-policy", default=None,
                        choices=[name for name in dir(jax.checkpoint_policies)
                                 if name.endswith("saveable")],
                        help="with --remat: what the backward pass keeps (a "
                             "jax.checkpoint_policies name; default: nothing)")
    parser.add_argument("--text", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load_text(args.text)
    config = GPTConfig(len(data.vocab), args.layers, args.width,
                       scan_layers=args.scan_layers, remat=args.remat,
                       remat_policy=args.remat_policy)
    task = gpt_task(data, config, args.batch_size)
    result = run(task, mode(args.mode), args.steps, args.seed,
                 eval_every=max(1, args.steps // 10),
                 progress=lambda s, loss: print(f"step {s:5d}  loss {loss:.4f}", flush=True)
                 if s % 50 == 0 else None)
    for point in result.evals:
        print(f"step {point['step']:5d}  val loss {point['val_loss']:.4f}")
    print(f"{args.mode}: final train loss {result.final_train_loss():.4f}, "
          f"{result.steps_per_second:.2f} steps/s, finite {result.finite}")


if __name__ == "__main__":
    main()
