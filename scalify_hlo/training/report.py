"""Tables and loss-curve plots of training runs, shared by ``scalify-hlo demo`` and
``benchmarks/training.py`` so both report the same columns the same way."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scalify_hlo.files import atomic_write
from scalify_hlo.training.loop import RunResult


def _metric_columns(results: Sequence[RunResult]) -> list[str]:
    names: list[str] = []
    for result in results:
        for name in result.final:
            if name != "step" and name not in names:
                names.append(name)
    return names


def table_rows(results: Sequence[RunResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: final train loss (mean of the last 50 steps), the final evaluation's
    metrics, state bytes and their ratio to the first run (the fp32 baseline), steps/s."""
    metrics = _metric_columns(results)
    header = ["mode", "train loss", *[m.replace("_", " ") for m in metrics],
              "weights+opt state", "vs " + results[0].mode if results else "ratio",
              "steps/s", "finite"]
    base = results[0].state_bytes if results else 0
    rows = []
    for r in results:
        values = [f"{r.final[m]:.4f}" if m in r.final else "-" for m in metrics]
        ratio = f"{r.state_bytes / base:.3f}x" if base else "-"
        rows.append([r.mode, f"{r.final_train_loss():.4f}", *values,
                     f"{r.state_bytes / 2**20:.2f} MiB", ratio, f"{r.steps_per_second:.2f}",
                     "yes" if r.finite else "NO"])
    return header, rows


def text_table(results: Sequence[RunResult]) -> str:
    header, rows = table_rows(results)
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def markdown_table(results: Sequence[RunResult]) -> str:
    header, rows = table_rows(results)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average (NaN/Inf kept out of the mean)."""
    array = np.asarray(values, np.float64)
    if window <= 1 or len(array) < 2:
        return array
    finite = np.where(np.isfinite(array), array, 0.0)
    counts = np.cumsum(np.isfinite(array).astype(np.float64))
    sums = np.cumsum(finite)
    lo = np.maximum(np.arange(len(array)) - window, -1)
    total = sums - np.where(lo >= 0, sums[np.maximum(lo, 0)], 0.0)
    n = counts - np.where(lo >= 0, counts[np.maximum(lo, 0)], 0.0)
    return np.where(n > 0, total / np.maximum(n, 1), math.nan)


def plot_losses(results: Sequence[RunResult], path: Path, title: str) -> Path:
    """Training loss (smoothed) and evaluation loss per mode, one PNG; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for r in results:
        steps = np.arange(1, len(r.train_loss) + 1)
        window = max(1, len(r.train_loss) // 50)
        line, = ax.plot(steps, smooth(r.train_loss, window), lw=1.2, label=f"{r.mode} train")
        eval_key = next((k for k in ("val_loss", "test_loss") if r.evals and k in r.evals[0]),
                        None)
        if eval_key:
            ax.plot([e["step"] for e in r.evals], [e[eval_key] for e in r.evals], "o--",
                    color=line.get_color(), ms=3, lw=0.8,
                    label=f"{r.mode} {eval_key.split('_')[0]}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    atomic_write(path, buffer.getvalue())
    return path
