"""Short end-to-end training runs: the Flax MLP and the char-GPT train in scalify-fp8 (loss
goes down, stays finite, stays close to fp32), and ``scalify-hlo demo`` runs end to end.

The long runs with the targets are ``benchmarks/training.py`` (numbers in docs/training.md).
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from scalify_hlo.cli.commands_demo import StepEta
from scalify_hlo.examples.char_gpt import GPTConfig, gpt_task
from scalify_hlo.examples.mnist_mlp import mlp_task
from scalify_hlo.training.data import SHARED_DATA, load_digits, load_text
from scalify_hlo.training.loop import RunResult, run
from scalify_hlo.training.modes import mode, state_bytes
from scalify_hlo.training.report import smooth, text_table
from tests.helpers import run_cli

STEPS = 40


def _mean(values: list[float]) -> float:
    return float(np.mean(values))


def _assert_trains_like_fp32(base: RunResult, fp8: RunResult, window: int, rel: float) -> None:
    assert fp8.finite and all(math.isfinite(v) for v in fp8.train_loss), fp8.train_loss
    first, last = _mean(fp8.train_loss[:window]), _mean(fp8.train_loss[-window:])
    assert last < 0.8 * first, (first, last)
    base_last = _mean(base.train_loss[-window:])
    assert abs(last - base_last) <= rel * base_last, (last, base_last)


@pytest.fixture(scope="module")
def mlp_runs() -> dict[str, RunResult]:
    task = mlp_task(load_digits(), batch_size=64, hidden=(128, 128))
    return {name: run(task, mode(name), STEPS, seed=0, eval_every=20)
            for name in ("fp32", "scalify-fp8")}


def test_mlp_scalify_fp8_trains_like_fp32(mlp_runs: dict[str, RunResult]) -> None:
    _assert_trains_like_fp32(mlp_runs["fp32"], mlp_runs["scalify-fp8"], window=5, rel=0.15)
    acc = {k: r.final["test_accuracy"] for k, r in mlp_runs.items()}
    assert acc["scalify-fp8"] > 0.8 and abs(acc["scalify-fp8"] - acc["fp32"]) < 0.05, acc


def test_mlp_scaled_state_bytes(mlp_runs: dict[str, RunResult]) -> None:
    """f16 weights and first moment, the second moment by its square root in f16 (issue 19):
    half of fp32, scales included."""
    ratio = mlp_runs["scalify-fp8"].state_bytes / mlp_runs["fp32"].state_bytes
    assert 0.5 <= ratio < 0.501, ratio
    assert [e["step"] for e in mlp_runs["fp32"].evals] == [20, 40]


def _text(tmp_path: Path) -> Path:
    path = SHARED_DATA / "tinyshakespeare.txt"
    if path.exists():
        return path
    # Without ../shared: a small corpus with structure to learn.
    lines = [f"{w} the {v} of {n}.\n" for w in ("First", "Second", "Third")
             for v in ("king", "queen", "duke") for n in ("york", "kent", "rome")]
    target = tmp_path / "corpus.txt"
    target.write_text("".join(lines) * 40)
    return target


def test_char_gpt_scalify_fp8_trains_like_fp32(tmp_path: Path) -> None:
    data = load_text(_text(tmp_path))
    config = GPTConfig(len(data.vocab), layers=2, width=64, heads=4, context=32)
    task = gpt_task(data, config, batch_size=8, eval_batches=2, learning_rate=3e-3)
    runs = {name: run(task, mode(name), STEPS, seed=0) for name in ("fp32", "scalify-fp8")}
    _assert_trains_like_fp32(runs["fp32"], runs["scalify-fp8"], window=5, rel=0.05)
    val = {k: r.final["val_loss"] for k, r in runs.items()}
    assert abs(val["scalify-fp8"] - val["fp32"]) <= 0.05 * val["fp32"], val
    assert "fp8 dots: " in (runs["scalify-fp8"].report or "")


def test_state_bytes_count_scales() -> None:
    import jax.numpy as jnp

    from scalify_hlo.scaled_array import ScaledArray

    plain = {"w": jnp.zeros((4, 4), jnp.float32)}
    scaled = {"w": ScaledArray(jnp.zeros((4, 4), jnp.float16), jnp.float32(1))}
    assert state_bytes(plain) == 64 and state_bytes(scaled) == 32 + 4


def test_smooth_ignores_non_finite() -> None:
    out = smooth([1.0, float("nan"), 3.0, 5.0], window=2)
    assert out[0] == 1.0 and out[2] == 3.0 and out[3] == 4.0


def test_text_table_has_every_mode(mlp_runs: dict[str, RunResult]) -> None:
    table = text_table(list(mlp_runs.values()))
    assert "fp32" in table and "scalify-fp8" in table and "0.500x" in table


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo out"
    proc = run_cli("demo", "--epochs", "1", "--hidden", "32", "--batch-size", "128", "--out", out,
                   cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "scalify-fp8" in proc.stdout and "fp32" in proc.stdout
    assert f"loss plot: {out / 'demo_loss.png'}" in proc.stdout
    assert (out / "demo_loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "demo_results.json").read_text())
    assert [r["mode"] for r in results] == ["fp32", "scalify-fp8"]
    assert "Traceback" not in proc.stderr
    # Both files as open() would make them (the plot was 0600: written through mkstemp).
    modes = {stat.S_IMODE((out / name).stat().st_mode)
             for name in ("demo_loss.png", "demo_results.json")}
    assert modes == {0o666 & ~_umask()}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_demo_eta_leaves_out_the_compiling_first_step() -> None:
    ticks = iter([10.0, 10.5, 11.0])  # step 1 ends after a 10 s compile, then 0.5 s a step
    eta = StepEta(101, clock=lambda: next(ticks))
    assert eta.update(1) == "--:--"
    assert eta.update(2) == "00:50"  # 99 steps left at 0.5 s, not at (10.5 / 2) s
    assert eta.update(3) == "00:49"


@pytest.mark.parametrize("args, message", [
    (["--modes", "fp64"], "unknown mode 'fp64'"),
    (["--hidden", "12,x"], "--hidden"),
    (["--data", "/nonexistent/mnist"], "no such directory"),
    (["--batch-size", "100000"], "larger than the"),
])
def test_demo_bad_options_are_one_line_errors(tmp_path: Path, args: list[str],
                                              message: str) -> None:
    proc = run_cli("demo", *args, "--out", tmp_path / "out", cwd=tmp_path, timeout=600)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
