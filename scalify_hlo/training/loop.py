"""One training run of a task in a mode: the loop, the timing and what is recorded.

A ``Task`` is what differs between the examples (model, data, optimizer, evaluation); the
loop is shared, so every mode of every task is measured the same way: same seed, same
batches, same number of steps, the first (compiling) step timed separately.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import jax
import numpy as np
import optax

from scalify_hlo.training.modes import (
    Mode,
    all_finite,
    loss_value,
    make_train_step,
    prepare,
    state_bytes,
)

Batch = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Task:
    """A model, its data and its optimizer, independent of the precision mode.

    loss_fn(dtype) builds the loss ``(params, x, y) -> scalar`` with the model computing in
    ``dtype``; evaluate(params, dtype) returns metrics of f32 weights (e.g. ``val_loss``,
    ``accuracy``); batches(seed) yields training batches forever.
    """

    name: str
    init: Callable[[jax.Array], Any]
    loss_fn: Callable[[Any], Callable[[Any, Any, Any], jax.Array]]
    optimizer: Callable[[int], optax.GradientTransformation]
    batches: Callable[[int], Iterator[Batch]]
    evaluate: Callable[[Any, Any], dict[str, float]]


@dataclass
class RunResult:
    task: str
    mode: str
    steps: int
    seed: int
    train_loss: list[float] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)  # each with its "step"
    state_bytes: int = 0
    compile_seconds: float = 0.0
    steps_per_second: float = 0.0
    finite: bool = True
    report: str | None = None

    @property
    def final(self) -> dict[str, float]:
        return self.evals[-1] if self.evals else {}

    def final_train_loss(self, window: int = 50) -> float:
        """Mean of the last ``window`` training losses (one batch's loss is noisy)."""
        tail = self.train_loss[-window:]
        return float(np.mean(tail)) if tail else math.nan

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run(task: Task, mode: Mode, steps: int, seed: int = 0, eval_every: int = 0,
        progress: Callable[[int, float], None] | None = None) -> RunResult:
    """Train ``task`` for ``steps`` steps in ``mode``; evaluate every ``eval_every`` steps
    (and at the end). ``progress(step, loss)`` is called after every step."""
    optimizer = task.optimizer(steps)
    params = task.init(jax.random.key(seed))
    opt_state = optimizer.init(params)
    batches = task.batches(seed)
    first = next(batches)
    train_step = make_train_step(task.loss_fn(mode.compute_dtype), optimizer)
    start = time.perf_counter()
    prepared = prepare(mode, train_step, params, opt_state, *first)
    result = RunResult(task.name, mode.name, steps, seed, report=prepared.report,
                       state_bytes=state_bytes(prepared.state))

    eval_seconds = 0.0

    def evaluate(step: int) -> None:
        nonlocal eval_seconds
        began = time.perf_counter()
        metrics = task.evaluate(prepared.params_f32(), mode.compute_dtype)
        result.evals.append({"step": step, **metrics})
        eval_seconds += time.perf_counter() - began

    batch = first
    timed_from = None
    for index in range(steps):
        params_, opt_state_, loss = prepared.step(*prepared.state, *batch)
        prepared.state = (params_, opt_state_)
        value = loss_value(loss)
        result.train_loss.append(value)
        if index == 0:
            result.compile_seconds = time.perf_counter() - start
            timed_from = time.perf_counter()
            eval_seconds = 0.0
        if not math.isfinite(value):
            result.finite = False
        if progress is not None:
            progress(index + 1, value)
        if eval_every and (index + 1) % eval_every == 0 and index + 1 < steps:
            evaluate(index + 1)
        batch = next(batches)
    if timed_from is not None and steps > 1:
        training = time.perf_counter() - timed_from - eval_seconds
        result.steps_per_second = (steps - 1) / max(training, 1e-9)
    result.finite = result.finite and all_finite(prepared.state)
    evaluate(steps)
    return result
