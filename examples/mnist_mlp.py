"""MNIST MLP (784-512-512-10) as a Flax module, softmax cross-entropy, optax Adam.

The train step is plain Flax/optax; ``scalify_hlo.training`` runs it as is in each mode
(``compile_scaled`` for the scalify modes). Data: the 10,000 MNIST images in
``../shared/data/mnist`` (8,000 train / 2,000 test) when present, else scikit-learn's digits.

    python examples/mnist_mlp.py --mode scalify-fp8 --epochs 3
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from scalify_hlo.training.data import ImageData, load_images
from scalify_hlo.training.loop import Batch, Task

HIDDEN = (512, 512)
LEARNING_RATE = 1e-3


class MLP(nn.Module):
    """Dense-ReLU stack; ``dtype`` is the compute dtype, parameters are always f32."""

    hidden: tuple[int, ...] = HIDDEN
    classes: int = 10
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.astype(self.dtype)
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, dtype=self.dtype)(x))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def mlp_task(data: ImageData, batch_size: int = 128, hidden: tuple[int, ...] = HIDDEN,
             learning_rate: float = LEARNING_RATE) -> Task:
    """The task ``scalify_hlo.training.run`` trains: shuffled epochs of ``batch_size``."""

    def loss_fn(dtype: Any):
        model = MLP(hidden, dtype=dtype)

        def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
            return cross_entropy(model.apply({"params": params}, x), y)

        return loss

    def init(key: jax.Array) -> Any:
        return MLP(hidden).init(key, data.x_train[:1])["params"]

    def batches(seed: int) -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        n = len(data.x_train)
        if n < batch_size:
            raise ValueError(f"{n} training examples is fewer than a batch of {batch_size}")
        while True:
            order = rng.permutation(n)
            for start in range(0, n - batch_size + 1, batch_size):
                index = order[start:start + batch_size]
                yield data.x_train[index], data.y_train[index]

    def evaluate(params: Any, dtype: Any) -> dict[str, float]:
        logits = _apply(hidden, dtype, params, data.x_test)
        return {"test_loss": float(cross_entropy(logits, data.y_test)),
                "test_accuracy": float(jnp.mean(jnp.argmax(logits, -1) == data.y_test))}

    return Task(f"{data.name}-mlp", init, loss_fn, lambda steps: optax.adam(learning_rate),
                batches, evaluate)


@jax.jit(static_argnums=(0, 1))
def _apply(hidden: tuple[int, ...], dtype: Any, params: Any, x: jax.Array) -> jax.Array:
    return MLP(hidden, dtype=dtype).apply({"params": params}, x)


def steps_per_epoch(data: ImageData, batch_size: int) -> int:
    return len(data.x_train) // batch_size


def main(argv: list[str] | None = None) -> None:
    from scalify_hlo.training.loop import run
    from scalify_hlo.training.modes import MODES, mode

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=list(MODES), default="scalify-fp8")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--data", default=None, help="digits, mnist or a directory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load_images(args.data)
    task = mlp_task(data, args.batch_size)
    steps = args.epochs * steps_per_epoch(data, args.batch_size)
    result = run(task, mode(args.mode), steps, args.seed, eval_every=steps_per_epoch(
        data, args.batch_size))
    for point in result.evals:
        print(f"step {point['step']:5d}  test loss {point['test_loss']:.4f}  "
              f"accuracy {point['test_accuracy']:.4f}")
    print(f"{args.mode}: final train loss {result.final_train_loss():.4f}, "
          f"{result.steps_per_second:.1f} steps/s, state {result.state_bytes / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
