"""Per-call overhead of a ``compile_scaled`` step against ``jax.jit(fn)``, on XLA:CPU.

Why this script exists: ``compile_scaled`` wraps the rewritten module in a pytree-level step
(argument check, ``ScaledArray`` inputs and outputs, plain arrays split into (data, scale) in
the program). For a small model on CPU, where a step is a few hundred microseconds, that
wrapper could cost more than the scales themselves. This script measures it.

Method: MLP training steps of ``testdata/models.py`` (``mlp_step`` at its default size, whose
call is mostly dispatch, and a larger one where compute counts; ``--mlp`` to choose) compiled
with ``compile_scaled`` in f32 mode (``Policy(data_dtype="float32", fp8_dots=False)``: the same
numbers as the original) and with ``jax.jit``, on device-resident arguments. A training loop
calls the step, feeds the new state back and reads the loss, so one call is
``f(*args)`` then waiting for the loss (every output of one XLA execution is ready at once):

* ``jax.jit(fn)``: the baseline, plain arrays;
* ``compile_scaled, ScaledArray args``: the training state as a step returns it (its scales in
  one bank, see ``ScaledStep``), x and y ``ScaledArray``s (``scale_tree``);
* ``compile_scaled, plain args``: plain arrays, split in the program by their RMS;
* ``rewritten module only``: ``jax.jit(step.exported.call)`` on the flat (data, scale) arrays,
  one buffer per scale, no pytrees and no argument check: what the rewritten program costs;
* ``compile_scaled's program only``: the jitted program that ``compile_scaled, ScaledArray
  args`` runs (scales in a bank), called on its flat arguments: the step without its Python
  (flattening the arguments, making the output ScaledArrays);
* ``compile_scaled, common-scale=max``: ScaledArray args under the other common-scale rule;
* ``..., all outputs``: ``jax.block_until_ready`` of every output, for ``jax.jit(fn)`` and
  ``compile_scaled``: flattening a ``ScaledArray`` reads its scale, so this also reads the
  bank's elements (one more dispatch per call).

Each round times a block of calls of every variant (order reversed on odd rounds); a block is
as many calls as fill ``--block-ms``. Overhead is the median over rounds of the per-round
ratio to its baseline (``jax.jit(fn)``, or its all-outputs form), in wall time and in process
CPU time (less sensitive to other people's load on a shared machine). Also measured: the
argument check (``ScaledStep._check_leaves``, which runs when ``jax.jit`` traces the step, not
per call), the kernels XLA runs per call (optimized HLO), and what one more XLA:CPU kernel
costs on this machine.

Target: ``compile_scaled`` with ScaledArray arguments at most 5% slower than ``jax.jit(fn)``.

    python benchmarks/overhead.py            # writes docs/results/overhead.json and docs
    python benchmarks/overhead.py --quick    # 5 rounds, 10 ms blocks, no doc

Results: ``docs/results/overhead.json`` and the "compile_scaled call overhead" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    RESULTS,
    environment,
    format_table,
    hlo_counts,
    interleaved,
    load_average,
    load_models,
    markdown_table,
    output_path,
    paired_ratio,
    publish,
    summary,
    verdict,
)

from scalify_hlo import Policy, ScaledArray, compile_scaled, scale_tree, unscale_tree
from scalify_hlo.scaled_array import is_scaled_leaf

MAX_RATIO = 1.05
POLICY = Policy(data_dtype="float32", fp8_dots=False)
SECTION = "compile_scaled call overhead"
# The sample MLP step of testdata/ (a step is mostly dispatch), and one where compute counts.
DEFAULT_MLPS = ("8:32,64,64,10", "256:256,1024,1024,10")
BASELINE = "jax.jit(fn)"
SCALED = "compile_scaled, ScaledArray args"
PLAIN = "compile_scaled, plain args"
MODULE = "rewritten module only"
PROGRAM = "compile_scaled's program only"
MAX = "compile_scaled, common-scale=max"
ALL_SUFFIX = ", all outputs"
BASELINE_ALL = BASELINE + ALL_SUFFIX
SCALED_ALL = SCALED + ALL_SUFFIX
MAX_PIPELINE = "inline,scalify{data-dtype=f32 common-scale=max},simplify"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlp", action="append", default=None, metavar="BATCH:SIZES",
                        help="an MLP to measure, e.g. 8:32,64,64,10 (repeatable; default: "
                             f"{' and '.join(DEFAULT_MLPS)})")
    parser.add_argument("--rounds", type=int, default=41,
                        help="interleaved rounds (%(default)s)")
    parser.add_argument("--block-ms", type=float, default=50.0,
                        help="length of one timed block of calls (%(default)s ms)")
    parser.add_argument("--quick", action="store_true", help="5 rounds, 10 ms blocks, no doc")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/overhead.json; a --quick "
                        "run's goes to the temporary directory)")
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.block_ms, args.no_doc = 5, 10.0, True
    if args.rounds < 1 or args.block_ms <= 0:
        parser.error("--rounds must be >= 1 and --block-ms > 0")
    try:
        args.mlps = [(int(b), tuple(int(n) for n in sizes.split(",")))
                     for b, sizes in (m.split(":") for m in (args.mlp or DEFAULT_MLPS))]
    except ValueError:
        parser.error("--mlp takes BATCH:SIZES, e.g. 8:32,64,64,10")
    args.out = output_path(args.out, RESULTS / "overhead.json", args.quick)
    return args


def calls_per_block(call: Callable[[], Any], block_s: float) -> int:
    """How many calls fill ``block_s`` seconds (at least one), from a short calibration."""
    call()
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < block_s / 4 or count < 2:
        call()
        count += 1
    return max(1, round(block_s / ((time.perf_counter() - start) / count)))


def per_call_us(fn: Callable[[], Any], repeats: int = 5, calls: int = 200) -> float:
    """Best-of-``repeats`` microseconds of one ``fn()`` (for the pure-Python check)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def flat_inputs(args: tuple[Any, ...]) -> list[Any]:
    """ScaledArray leaves as consecutive (data, scale): the rewritten module's signature."""
    flat: list[Any] = []
    for leaf in jax.tree.leaves(args, is_leaf=is_scaled_leaf):
        flat += [leaf.data, leaf.scale] if isinstance(leaf, ScaledArray) else [leaf]
    return flat


def max_rel_diff(got: Any, want: Any) -> float:
    """Largest |got - want| / max|want| over the leaves (per-leaf relative error)."""
    worst = 0.0
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        worst = max(worst, float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)))
    return worst


Samples = dict[str, list[float]]


def timed_interleaved(calls: dict[str, Callable[[], Any]], rounds: int,
                      block_ms: float) -> tuple[int, Samples, Samples]:
    """Calls per block, and per-call wall and process CPU seconds of each call per round."""
    n = max(calls_per_block(call, block_ms / 1e3) for call in calls.values())
    cpu: dict[str, list[float]] = {name: [] for name in calls}

    def block(name: str) -> Callable[[], None]:
        def run() -> None:
            start = time.process_time()
            for _ in range(n):
                calls[name]()
            cpu[name].append((time.process_time() - start) / n)
        return run

    samples = interleaved({name: block(name) for name in calls}, rounds)
    wall = {name: [s / n for s in v] for name, v in samples.items()}
    return n, wall, {name: v[-rounds:] for name, v in cpu.items()}  # without the warm-up


def kernel_launch_us(args: argparse.Namespace) -> float:
    """What one more XLA:CPU kernel costs per call on this machine: a jitted function with
    eleven extra scalar kernels against one with a single kernel."""
    x = jnp.ones((8, 64))
    scales = [jnp.float32(2.0 ** i) for i in range(12)]

    def one_kernel(x: jax.Array, *s: jax.Array) -> jax.Array:
        return x * 2.0

    def twelve_kernels(x: jax.Array, *s: jax.Array) -> jax.Array:
        out = x * 2.0
        for i in range(len(s) - 1):
            out = out + s[i] * s[i + 1] / s[0]
        return out

    one, twelve = jax.jit(one_kernel), jax.jit(twelve_kernels)
    _, wall, _ = timed_interleaved(
        {"one": lambda: jax.block_until_ready(one(x, *scales)),
         "twelve": lambda: jax.block_until_ready(twelve(x, *scales))},
        args.rounds, args.block_ms / 2)
    extra = hlo_counts(twelve.lower(x, *scales).compile().as_text()).executed - hlo_counts(
        one.lower(x, *scales).compile().as_text()).executed
    return (statistics.median(wall["twelve"]) - statistics.median(wall["one"])) / extra * 1e6


def python_in_loop_us(step: Any, state: tuple[Any, ...], calls: int = 2000) -> float:
    """Microseconds of the wrapper's Python per call (flattening the arguments, making the
    output ScaledArrays) timed where a training loop runs it, between steps: after XLA:CPU
    has run a step on the same cores, the same code takes several times as long as in a
    tight loop of its own (``wrapper_python_us``)."""
    clock, total = time.perf_counter, 0.0
    for _ in range(calls):
        start = clock()
        flat, banks, layout = step._flatten(state)
        middle = clock()
        outputs, vector = step._programs[layout](flat, banks)
        resumed = clock()
        tree = step._out_tree.unflatten(step._in_bank(outputs, vector))
        total += middle - start + clock() - resumed
        loss_of(tree).block_until_ready()
    return total / calls * 1e6


def loss_of(tree: Any) -> jax.Array:
    """The last leaf of a step's outputs (the loss) as an array: a ScaledArray's data."""
    leaf = jax.tree.leaves(tree, is_leaf=is_scaled_leaf)[-1]
    return leaf.data if isinstance(leaf, ScaledArray) else leaf


def measure(batch: int, sizes: tuple[int, ...], args: argparse.Namespace) -> dict[str, Any]:
    fn, example = load_models().mlp_step(batch=batch, sizes=sizes)
    plain = jax.device_put(example)
    scaled = jax.device_put(scale_tree(example, jnp.float32))
    baseline = jax.jit(fn)
    start = time.perf_counter()
    step = compile_scaled(fn, *plain, policy=POLICY)
    compile_s = time.perf_counter() - start
    module = jax.jit(step.exported.call)
    flat = flat_inputs(scaled)
    with_max = compile_scaled(fn, *plain, pipeline=MAX_PIPELINE)
    # the state as the step hands it back in a training loop: its scales in one bank
    state = (step(*scaled)[0], *scaled[1:])
    max_state = (with_max(*scaled)[0], *scaled[1:])
    flat_state, banks, layout = step._flatten(state)
    program = step._program(layout)

    reference = baseline(*plain)
    error = max(max_rel_diff(unscale_tree(step(*scaled)), reference),
                max_rel_diff(unscale_tree(step(*plain)), reference),
                max_rel_diff(unscale_tree(step(*state)), baseline(
                    unscale_tree(state[0]), *plain[1:])))
    calls: dict[str, Callable[[], Any]] = {
        BASELINE: lambda: loss_of(baseline(*plain)).block_until_ready(),
        SCALED: lambda: loss_of(step(*state)).block_until_ready(),
        PLAIN: lambda: loss_of(step(*plain)).block_until_ready(),
        MODULE: lambda: module(*flat)[-1].block_until_ready(),
        PROGRAM: lambda: program(flat_state, banks)[0][-1].block_until_ready(),
        MAX: lambda: loss_of(with_max(*max_state)).block_until_ready(),
        BASELINE_ALL: lambda: jax.block_until_ready(baseline(*plain)),
        SCALED_ALL: lambda: jax.block_until_ready(step(*state)),
    }
    n, wall, cpu = timed_interleaved(calls, args.rounds, args.block_ms)

    def base_of(name: str) -> str:
        return BASELINE_ALL if name.endswith(ALL_SUFFIX) else BASELINE

    variants = [{
        "variant": name, "baseline": base_of(name), **summary(wall[name]),
        "ratio": paired_ratio(wall[name], wall[base_of(name)]),
        "ratio_of_medians": statistics.median(wall[name]) / statistics.median(
            wall[base_of(name)]),
        "cpu": summary(cpu[name]), "cpu_ratio": paired_ratio(cpu[name], cpu[base_of(name)]),
    } for name in calls]
    compiled = {BASELINE: baseline.lower(*plain), SCALED: step.lower(*state),
                PLAIN: step.lower(*plain), MODULE: module.lower(*flat),
                PROGRAM: program.lower(flat_state, banks),
                MAX: with_max.lower(*max_state)}
    compiled[BASELINE_ALL], compiled[SCALED_ALL] = compiled[BASELINE], compiled[SCALED]
    hlo = {name: hlo_counts(lowered.compile().as_text()).as_dict()
           for name, lowered in compiled.items()}
    scaled_ratio = next(v["ratio"] for v in variants if v["variant"] == SCALED)
    outputs, vector = program(flat_state, banks)
    python_us = (per_call_us(lambda: step._flatten(state)) + per_call_us(
        lambda: step._out_tree.unflatten(step._in_bank(list(outputs), vector))))
    return {
        "model": f"mlp b{batch} {'-'.join(map(str, sizes))}", "batch": batch,
        "sizes": list(sizes), "calls_per_block": n, "compile_scaled_s": compile_s,
        "max_relative_difference": error,
        "check_us": per_call_us(lambda: step._check_leaves(flat_state, layout)),
        # the wrapper's Python per call: flatten the arguments, make the output ScaledArrays
        "wrapper_python_us": python_us,
        # the same Python timed inside a training loop, between one step and the next
        "wrapper_python_in_loop_us": python_in_loop_us(step, state),
        "variants": variants, "hlo": hlo, "target_met": scaled_ratio <= MAX_RATIO,
        # what compile_scaled adds on top of the rewritten program (pytrees, check, scales)
        "wrapper_ratio": paired_ratio(wall[SCALED], wall[MODULE]),
        "wrapper_cpu_ratio": paired_ratio(cpu[SCALED], cpu[MODULE]),
    }


HEADERS = ["model", "variant", "per call us", "ratio", "CPU us", "CPU ratio", "executed ops"]


def table_rows(result: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for model in result["models"]:
        for v in model["variants"]:
            rows.append([model["model"], v["variant"], f"{v['median_s'] * 1e6:.1f}",
                         f"{v['ratio']:.3f}", f"{v['cpu']['median_s'] * 1e6:.1f}",
                         f"{v['cpu_ratio']:.3f}", model["hlo"][v["variant"]]["executed"]])
    return rows


def doc_section(result: dict[str, Any]) -> str:
    first = result["models"][0]
    failed = [m["model"] for m in result["models"] if not m["target_met"]]

    def ratio(model: dict[str, Any], name: str) -> float:
        return next(v["ratio"] for v in model["variants"] if v["variant"] == name)

    return "\n".join([
        "`python benchmarks/overhead.py`. Per-call time on XLA:CPU of MLP training steps "
        "(`mlp_step` of `testdata/models.py`; the first is its default size) compiled by "
        "`compile_scaled` with `Policy(data_dtype=\"float32\", fp8_dots=False)` against "
        "`jax.jit(fn)`, on device-resident arguments. One call is what a training loop does: "
        "call the step and wait for its loss (all outputs of one XLA execution are ready at "
        "once); the *all outputs* rows wait with `jax.block_until_ready` on every output. The "
        "ScaledArray state is what the step returned the step before. Medians over "
        f"{result['rounds']} rounds (variants interleaved, order alternating); *ratio* is the "
        "median of the per-round ratios to `jax.jit(fn)` (to its *all outputs* row for the "
        "other *all outputs* row), in wall time and in process CPU time (less sensitive to "
        "other load on a shared machine). *Executed ops*: kernels and unfused ops XLA runs "
        f"per call. Load average at the start: {result['load_average_start']}, at the end: "
        f"{result['load_average_end']}.",
        "", markdown_table(HEADERS, table_rows(result)), "",
        "Where the time goes:",
        "",
        "* Scales travel as one f32 vector per call in each direction (a *bank*): a step "
        "returns all its scales in one, its `ScaledArray` outputs hold the bank and an index, "
        "and a call with them passes the vector (the indices are static: XLA fuses each "
        "slice into the kernels that use the scale). The step builds the vector inside the "
        "program, in groups of 8 scales per kernel. With one "
        "buffer per scale (*rewritten module only*) the host-side cost of the extra buffers, "
        "about 2 us per output on this machine, is most of the overhead of a 100 us step.",
        "* Waiting on every output (*all outputs*) flattens the `ScaledArray`s, which reads "
        "each scale out of its bank: one more dispatch per call for all of them: "
        + "; ".join(f"{m['model']}: {ratio(m, SCALED_ALL):.3f}" for m in result["models"])
        + ". A training loop that feeds the state back never reads them.",
        "* `compile_scaled` itself (ScaledArray args against *rewritten module only*, "
        "paired per round): " + "; ".join(
            f"{m['model']}: {m['wrapper_ratio']:.3f} wall, {m['wrapper_cpu_ratio']:.3f} CPU"
            for m in result["models"]) + ".",
        f"* The argument check (paths in its messages) costs {first['check_us']:.0f} us: it "
        "runs when `jax.jit` traces the step, once per argument layout, shapes and dtypes, "
        "not on every call.",
        "* Plain-array arguments are split in the program (an RMS reduction per floating "
        "argument: the *executed ops* column). Keep the training state as `ScaledArray`s "
        "(`scale_args` once, then feed the step's outputs back) to avoid it.",
        "* The program that `compile_scaled` runs, called on its flat arguments without the "
        "wrapper (*compile_scaled's program only*): " + "; ".join(
            f"{m['model']}: {ratio(m, PROGRAM):.3f}" for m in result["models"])
        + f". It runs {first['hlo'][SCALED]['executed'] - first['hlo'][BASELINE]['executed']} "
        f"more kernel(s) on the small MLP ({first['hlo'][SCALED]['executed']} against "
        f"{first['hlo'][BASELINE]['executed']}: the one that builds the bank, with the loss's "
        "scale); a jitted function with eleven extra scalar kernels against one with a single "
        f"kernel costs {result['kernel_launch_us']:.1f} us per kernel on this machine. The "
        "scale arithmetic itself is i32 exponent arithmetic that XLA fuses into the kernels "
        "that use it.",
        "* On top of that program, *compile_scaled, ScaledArray args* runs the wrapper's "
        f"Python (flattening the arguments, making the output ScaledArrays): "
        f"{first['wrapper_python_us']:.1f} us on the small MLP in a tight loop of its own, "
        f"{first['wrapper_python_in_loop_us']:.1f} us where a training loop runs it, between "
        "steps, after XLA:CPU has run a step on the same cores (on the large MLP the "
        "same code runs while XLA computes: "
        + "; ".join(f"{m['model']}: {m['wrapper_python_in_loop_us']:.1f} us"
                    for m in result["models"][1:]) + ", hidden behind the step).",
        "* *common-scale=max* (exact even for operands more than 2^126 apart) computes each "
        "weight's new scale where the default keeps it; those go into the same bank kernel: "
        f"{first['hlo'][MAX]['executed']} kernels on the small MLP.",
        f"* `compile_scaled` with ScaledArray arguments at most {MAX_RATIO - 1:.0%} slower "
        f"than `jax.jit(fn)`: **{verdict(result['target_met'])}**"
        + (f" ({', '.join(failed)} over)." if failed else "."),
    ])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_start = load_average()
    models = []
    for batch, sizes in args.mlps:
        print(f"mlp b{batch} {'-'.join(map(str, sizes))} ...", flush=True)
        models.append(measure(batch, sizes, args))
    result = {
        "environment": environment(), "policy": repr(POLICY), "pipeline": POLICY.pipeline(),
        "rounds": args.rounds, "max_ratio": MAX_RATIO, "models": models,
        "kernel_launch_us": kernel_launch_us(args),
        "load_average_start": load_start, "load_average_end": load_average(),
        "target_met": all(m["target_met"] for m in models),
    }
    print(format_table(HEADERS, table_rows(result)))
    for m in models:
        print(f"{m['model']}: argument check {m['check_us']:.1f} us (at trace time only); "
              "max relative difference to jax.jit "
              f"{m['max_relative_difference']:.2e}; compile_scaled over the rewritten "
              f"module {m['wrapper_ratio']:.3f} wall, {m['wrapper_cpu_ratio']:.3f} CPU")
    print(f"one more XLA:CPU kernel: {result['kernel_launch_us']:.1f} us per call")
    print(f"ScaledArray args at most {MAX_RATIO - 1:.0%} slower: {verdict(result['target_met'])}")
    publish(args.out, result, SECTION, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
