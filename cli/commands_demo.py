"""``scalify-hlo demo``: the README's main job. Trains the MNIST-style MLP in fp32 and in
scalify-fp8 on the same data with the same seed, and prints the comparison table and the path
of a loss plot. Defaults to scikit-learn's digits, which ship with the ``demo`` extra, so it
runs on a fresh machine with nothing else present."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import click

from scalify_hlo.cli.common import UserError, write_output

DEFAULT_MODES = ("fp32", "scalify-fp8")


class StepEta:
    """Time left in a run of ``steps`` steps, estimated from the steps after the first (which
    compiles the step and would dominate any average that includes it)."""

    def __init__(self, steps: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.steps, self.clock = steps, clock
        self.first_done: float | None = None

    def update(self, step: int) -> str:
        """Call after step ``step`` (1-based) finishes; returns ``mm:ss`` or ``--:--``."""
        now = self.clock()
        if self.first_done is None or step <= 1:
            self.first_done = now
            return "--:--"
        left = (now - self.first_done) / (step - 1) * (self.steps - step)
        minutes, seconds = divmod(int(round(left)), 60)
        return f"{minutes:02d}:{seconds:02d}"


def _import_training():
    """The training stack needs the demo extra (flax, optax, scikit-learn, matplotlib)."""
    try:
        from scalify_hlo.examples import mnist_mlp
        from scalify_hlo.training import data, loop, modes, report
    except ImportError as exc:
        raise UserError(f"the demo needs {exc.name or 'its dependencies'}: "
                        f"pip install 'scalify-hlo[demo]'") from None
    return mnist_mlp, data, loop, modes, report


@click.command()
@click.option("--data", "data_source", default="digits", show_default=True,
              help="digits (bundled with scikit-learn), mnist (../shared/data/mnist) or a "
                   "directory of MNIST idx files.")
@click.option("--epochs", type=click.IntRange(1, 1000), default=12, show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 100000), default=64, show_default=True)
@click.option("--hidden", default="512,512", show_default=True,
              help="Hidden layer widths, comma-separated.")
@click.option("--modes", "mode_names", default=",".join(DEFAULT_MODES), show_default=True,
              help="Comma-separated modes: fp32, bf16, scalify-f16, scalify-fp8.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("scalify-demo"), show_default=True,
              help="Where the loss plot and the results (JSON) go.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def demo(data_source: str, epochs: int, batch_size: int, hidden: str, mode_names: str,
         seed: int, out_dir: Path, no_progress: bool) -> None:
    """Train an MLP in fp32 and in scalify-fp8 side by side; print the comparison."""
    mnist_mlp, data, loop, modes, report = _import_training()
    try:
        widths = tuple(int(w) for w in hidden.split(","))
        if not widths or min(widths) < 1:
            raise ValueError
    except ValueError:
        raise UserError(f"--hidden: expected comma-separated positive widths, got "
                        f"'{hidden}'") from None
    selected = [modes.mode(name.strip()) for name in mode_names.split(",") if name.strip()]
    if not selected:
        raise UserError("--modes: no mode given")
    images = data.load_images(data_source)
    if len(images.x_train) < batch_size:
        raise UserError(f"--batch-size {batch_size} is larger than the {len(images.x_train)} "
                        f"training images")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out_dir}: cannot create the output directory "
                        f"({exc.strerror})") from None
    task = mnist_mlp.mlp_task(images, batch_size, widths)
    per_epoch = mnist_mlp.steps_per_epoch(images, batch_size)
    steps = epochs * per_epoch
    click.echo(f"{images.name}: {len(images.x_train)} train / {len(images.x_test)} test "
               f"images, MLP {images.features}-{'-'.join(map(str, widths))}-10, Adam, "
               f"{epochs} epochs of {per_epoch} steps", err=True)
    results = []
    live = click.get_text_stream("stderr").isatty()  # else a changing label is reprinted
    for mode in selected:
        stream = click.get_text_stream("stderr")
        # click's own ETA averages from the start, so the first step's XLA compile (seconds,
        # against milliseconds per step after it) made a 1 s run read 00:16:48 at the start.
        eta = StepEta(steps)
        with click.progressbar(length=steps, label=f"{mode.name:<12}", file=stream,
                               hidden=no_progress) as bar:
            def progress(step: int, loss: float, bar=bar, name=mode.name, eta=eta) -> None:
                if live:
                    bar.label = f"{name:<12} loss {loss:7.4f}  eta {eta.update(step)}"
                bar.update(1)

            results.append(loop.run(task, mode, steps, seed, eval_every=per_epoch,
                                    progress=progress))
    click.echo(report.text_table(results))
    plot = report.plot_losses(results, out_dir / "demo_loss.png",
                              f"{images.name} MLP: " + " vs ".join(r.mode for r in results))
    write_output(str(out_dir / "demo_results.json"),
                 json.dumps([r.as_dict() for r in results], indent=1).encode())
    if len(results) > 1 and "test_accuracy" in results[0].final:
        base = results[0].final["test_accuracy"]
        for r in results[1:]:
            delta = 100 * (r.final["test_accuracy"] - base)
            click.echo(f"{r.mode}: test accuracy {delta:+.2f} points vs {results[0].mode}, "
                       f"weights+optimizer state {r.state_bytes / results[0].state_bytes:.2f}x")
    click.echo(f"loss plot: {plot}")


COMMANDS = [demo]
