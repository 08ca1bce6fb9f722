"""End-to-end training in every mode, same seed and steps: MNIST MLP and char-level GPT.

For each task and mode it trains, evaluates, and records final train and validation/test
loss, test accuracy (MNIST), bytes of weights and optimizer state (scales counted) and steps
per second on this machine. Each finished run is saved at once to
``docs/results/training_<task>.json`` and ``docs/training.md`` / ``docs/figures/`` are
regenerated from all saved runs, so a long benchmark can be stopped and resumed by mode.

    python benchmarks/training.py                                # every task, all modes
    python benchmarks/training.py --tasks mnist --modes fp32 scalify-fp8
    python benchmarks/training.py --tasks gpt --gpt-steps 2000 --modes scalify-f16
    python benchmarks/training.py --tasks gpt-scan --gpt-steps 300 --modes fp32 scalify-fp8
    python benchmarks/training.py --tasks gpt --gpt-steps 1000 --no-save --modes fp32 ...

``--no-save`` prints each run's results and leaves the JSON and the docs alone: a run of
another length would replace the task's saved runs (one setup per task).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import sys
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT, environment, write_json

from scalify_hlo.examples.char_gpt import GPTConfig, gpt_task
from scalify_hlo.examples.mnist_mlp import mlp_task, steps_per_epoch
from scalify_hlo.training.data import load_images, load_text
from scalify_hlo.training.loop import RunResult, run
from scalify_hlo.training.modes import MODES, mode
from scalify_hlo.training.report import markdown_table, plot_losses

DOC = ROOT / "docs" / "training.md"
FIGURES = ROOT / "docs" / "figures"
TASKS = ("mnist", "gpt", "gpt-scan")


def results_path(task: str) -> Path:
    return RESULTS / f"training_{task}.json"


def load_runs(task: str) -> dict[str, Any]:
    path = results_path(task)
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def save_run(task: str, setup: dict[str, Any], result: RunResult) -> None:
    """Add one run to the task's JSON (locked: modes may run in parallel processes)."""
    with open(results_path(task).with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        payload = load_runs(task)
        if payload.get("setup") != setup:  # a different configuration: start the file again
            payload = {"setup": setup, "runs": {}}
        payload["environment"] = environment()
        payload["runs"][result.mode] = result.as_dict()
        write_json(results_path(task), payload)


def as_result(data: dict[str, Any]) -> RunResult:
    return RunResult(**data)


def ordered(runs: dict[str, Any]) -> list[RunResult]:
    return [as_result(runs[name]) for name in MODES if name in runs]


def _within(value: float, reference: float, fraction: float) -> bool:
    return math.isfinite(value) and abs(value - reference) <= fraction * abs(reference)


def verdict(ok: bool | None) -> str:
    return "n/a (not run)" if ok is None else ("**met**" if ok else "**missed**")


def mnist_targets(results: dict[str, RunResult]) -> list[str]:
    base, fp8 = results.get("fp32"), results.get("scalify-fp8")
    lines = []
    acc = None
    if base and fp8:
        delta = 100 * (fp8.final["test_accuracy"] - base.final["test_accuracy"])
        acc = delta >= -0.5
        lines.append(f"- scalify-fp8 test accuracy within 0.5 points of fp32: {delta:+.2f} "
                     f"points: {verdict(acc)}")
    lines += memory_targets(results, "Adam")
    lines += fp8_state_targets(results, "Adam", "test_accuracy")
    return lines


def memory_targets(results: dict[str, RunResult], optimizer: str) -> list[str]:
    """Weights + optimizer state at most 0.5x fp32, scales counted (the ratio is printed to
    4 places and compared at 3: the f32 scales add 4 bytes per tensor, never 0.5x exactly)."""
    base = results.get("fp32")
    lines = []
    for name, note in (("scalify-f16", "the default: second moment stored by its square root "
                                        "in f16"),
                       ("scalify-f16-sq16", "everything in f16"),
                       ("scalify-f16-bf16sq", "second moment in bf16")):
        r = results.get(name)
        if base and r:
            ratio = r.state_bytes / base.state_bytes
            lines.append(f"- {name} weights + {optimizer} state at most 0.5x fp32 ({note}): "
                         f"{ratio:.4f}x: {verdict(round(ratio, 3) <= 0.5)}")
    return lines


# Issue 19's FP8-state modes: f16 weights, FP8 first moment, second moment's root in 16
# bits (mu8: 5/12 of fp32's bytes) or in FP8 too (mu8-nu8: 4/12). Targets: weights + Adam
# state at most 0.375x fp32, char-GPT validation loss within 1%, MNIST within 0.5 points.
FP8_STATE_MODES = {"scalify-fp8-mu8": "first moment FP8, second moment's root f16",
                   "scalify-fp8-mu8-nu8": "first moment and second moment's root FP8"}
FP8_STATE_RATIO = 0.375


def fp8_state_targets(results: dict[str, RunResult], optimizer: str,
                      metric: str | None = None) -> list[str]:
    """The FP8-state modes' targets: memory, and MNIST accuracy (``metric``) within 0.5
    points of fp32 (the char-GPT's loss target is in ``gpt_targets``)."""
    base = results.get("fp32")
    lines = []
    for name, note in FP8_STATE_MODES.items():
        r = results.get(name)
        if not (base and r):
            continue
        if metric is not None:
            delta = 100 * (r.final[metric] - base.final[metric])
            lines.append(f"- {name} test accuracy within 0.5 points of fp32: {delta:+.2f} "
                         f"points: {verdict(delta >= -0.5 and r.finite)}")
        ratio = r.state_bytes / base.state_bytes
        lines.append(f"- {name} weights + {optimizer} state at most {FP8_STATE_RATIO}x fp32 "
                     f"({note}): {ratio:.4f}x: {verdict(round(ratio, 3) <= FP8_STATE_RATIO)}")
    return lines


def gpt_targets(results: dict[str, RunResult]) -> list[str]:
    base = results.get("fp32")
    lines = []
    for name, fraction in (("scalify-fp8", 0.02), ("scalify-f16", 0.01),
                           ("scalify-f16-sq16", 0.01), ("scalify-f16-bf16sq", 0.01),
                           *((mode_name, 0.01) for mode_name in FP8_STATE_MODES)):
        r = results.get(name)
        if base and r:
            a, b = r.final["val_loss"], base.final["val_loss"]
            ok = _within(a, b, fraction) and r.finite
            lines.append(f"- {name} validation loss within {fraction:.0%} of fp32 after "
                         f"{r.steps} steps, no NaN/Inf: {a:.4f} vs {b:.4f} "
                         f"({(a - b) / b:+.2%}), finite: {r.finite}: {verdict(ok)}")
    lines += memory_targets(results, "AdamW")
    lines += fp8_state_targets(results, "AdamW")
    return lines


TITLES = {"mnist": "MNIST MLP 784-512-512-10 (Flax, Adam)",
          "gpt": "Character-level GPT on Tiny Shakespeare (Flax, AdamW, warmup + cosine)",
          "gpt-scan": "The GPT with its layers under nn.scan (stacked weights; global-norm "
                      "clipping + AdamW)"}


def write_doc() -> None:
    sections = [
        "# Training end to end: fp32, bf16, scalify-f16, scalify-fp8",
        "",
        "Generated by `python benchmarks/training.py` (numbers from the last run of each mode; "
        "JSON in `docs/results/training_*.json`). Every mode trains the same Flax/optax train "
        "step (`examples/`) with the same seed, batches and number of steps. `fp32` is plain "
        "`jax.jit`; `bf16` is JAX mixed precision (bf16 compute, f32 master weights and Adam "
        "state); `scalify-f16` is `compile_scaled` with f16 data (weights and Adam's moments "
        "live as f16 data + f32 power-of-two scales; Adam's second moment is computed in f32 "
        "inside the step and stored by its signed square root in f16 by default, "
        "`square-encoding=auto`, see how-it-works.md); `scalify-fp8` adds FP8 dots (E4M3 "
        "forward, E5M2 gradients); `scalify-fp8-sr` rounds the stored root stochastically; "
        "`scalify-fp8-sq32` and `scalify-f16-sq32` store the second moment in f32 (the "
        "default before issue 19); `scalify-f16-sq16` is every value in f16, the second moment "
        "squared included, and `scalify-f16-bf16sq` keeps the second moment in bf16. "
        "`scalify-fp8-mu8` stores Adam's first moment in FP8 E4M3FN with a power-of-two "
        "scale from its amax, rounded stochastically (`Policy(moment_format=\"float8_e4m3fn"
        "\")`, issue 19), `scalify-fp8-mu8-nu8` the second moment's square root in FP8 E5M2 "
        "too (`square_format`, stochastic rounding). "
        "Squares in f16 diverged on MNIST (first-layer gradients of pixels that are rarely on "
        "span more than the 12 binades whose squares f16 holds; their square roots span half "
        "as many); they train since the update tail computes the second moment in f32 and "
        "stores it with its amax at the top of f16's range (which of the two did it was not "
        "isolated). On the GPT under `nn.scan` that mode diverged after step 700 until "
        "the stacks a scan fills per layer kept one exponent per layer (robustness.md). "
        "Train loss is the mean of the last 50 steps; evaluation "
        "runs the learned weights in the mode's compute dtype (f32 for the scalify modes). "
        "Steps/s are on this machine's 2-core CPU, where FP8 and bf16 are emulated (correct, "
        "not fast), with up to three runs sharing it: they show the rewrite's cost on CPU "
        "roughly, not GPU speed.",
        "",
    ]
    for task in TASKS:
        payload = load_runs(task)
        runs = ordered(payload.get("runs", {}))
        if not runs:
            continue
        by_name = {r.mode: r for r in runs}
        setup = payload.get("setup", {})
        plot = plot_losses(runs, FIGURES / f"training_{task}.png", TITLES[task])
        targets = mnist_targets(by_name) if task == "mnist" else gpt_targets(by_name)
        sections += [
            f"## {TITLES[task]}", "",
            "Setup: " + ", ".join(f"{k} {v}" for k, v in setup.items()), "",
            markdown_table(runs), "",
            f"![loss curves](figures/{plot.name})", "",
            "Targets:", "", *targets, "",
        ]
    env = load_runs("gpt").get("environment") or load_runs("mnist").get("environment") or {}
    if env:
        sections += ["Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    DOC.write_text("\n".join(sections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--mnist-data", default=None, help="digits, mnist or a directory")
    parser.add_argument("--mnist-epochs", type=int, default=5)
    parser.add_argument("--gpt-steps", type=int, default=2000)
    parser.add_argument("--gpt-batch", type=int, default=16)
    parser.add_argument("--gpt-layers", type=int, default=4)
    parser.add_argument("--gpt-width", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--doc-only", action="store_true", help="only regenerate the docs")
    parser.add_argument("--no-save", action="store_true",
                        help="print the results, write neither JSON nor docs")
    args = parser.parse_args()
    if args.doc_only:
        write_doc()
        return
    for task_name in args.tasks:
        if task_name == "mnist":
            images = load_images(args.mnist_data)
            batch = 128
            task = mlp_task(images, batch)
            per_epoch = steps_per_epoch(images, batch)
            steps, eval_every = args.mnist_epochs * per_epoch, per_epoch
            setup = {"data": images.name, "train": len(images.x_train),
                     "test": len(images.x_test), "batch": batch, "steps": steps,
                     "seed": args.seed}
        else:
            text = load_text()
            scan = task_name == "gpt-scan"
            config = GPTConfig(len(text.vocab), args.gpt_layers, args.gpt_width,
                               scan_layers=scan)
            # The scan GPT as Flax's and MaxText's large models train: clip, then AdamW.
            task = gpt_task(text, config, args.gpt_batch, clip_norm=1.0 if scan else None)
            steps, eval_every = args.gpt_steps, max(1, args.gpt_steps // 20)
            setup = {"data": text.name, "layers": config.layers, "width": config.width,
                     "heads": config.heads, "context": config.context,
                     "batch": args.gpt_batch, "steps": steps, "seed": args.seed}
            if scan:
                setup.update({"layers under": "nn.scan", "clip": 1.0})
        for name in args.modes:
            label, total = f"{task_name} {name}", steps

            def progress(step: int, loss: float, label: str = label, total: int = total) -> None:
                if step % max(1, total // 20) == 0 or not math.isfinite(loss):
                    print(f"  {label} step {step}/{total} loss {loss:.4f}", file=sys.stderr,
                          flush=True)

            result = run(task, mode(name), steps, args.seed, eval_every, progress)
            result.report = None  # the rewrite report is long; the JSON keeps the numbers
            print(f"{task_name} {name}: {result.final} train {result.final_train_loss():.4f} "
                  f"{result.steps_per_second:.2f} steps/s finite {result.finite} state "
                  f"{result.state_bytes} B", flush=True)
            if args.no_save:
                continue
            save_run(task_name, setup, result)
            with open(results_path(task_name).with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                write_doc()
    if not args.no_save:
        print(DOC.read_text())


if __name__ == "__main__":
    main()
