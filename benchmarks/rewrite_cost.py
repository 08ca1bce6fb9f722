"""What the rewrite costs: the full pipeline's time against XLA:CPU's compile of the same step.

Why this script exists: scalify-hlo sits between ``jax.export`` and XLA, so its time adds to
every compile. It is worth its keep only if it stays small next to the compile it precedes and
grows linearly with the module (a quadratic pass would be invisible on the sample steps and
painful on a real model). The machine these numbers come from is shared and noisy, so every
figure is a ratio against XLA's compile time measured in the same rounds, and all sizes are
measured in alternation (round r: every size's rewrite and compile, the order reversed on odd
rounds) so that a load spike hits all of them alike.

Measured, for GPT training steps (``testdata/models.py`` ``gpt_step``, Adam) of 1, 2, 4, 8 and
16 layers at a moderate width (default d_model 256, 4 heads, context 128, vocab 256, batch 8):

* rewrite: ``rewrite_module_source(text, DEFAULT_PIPELINE)``: parse, verify, inline, scalify
  (f16 data), fp8-dots, simplify (each pass followed by a verify), print. Exactly what
  ``scalify-hlo rewrite`` does;
* compile: ``scalify_hlo.runner.compile_module(text)`` of the ORIGINAL module on XLA:CPU;
* ops: operations of the original module (what ``--stats`` reports as "before").

Targets: rewrite time at most 10% of XLA's compile time at every size; growth linear in the op
count (log-log slope of median rewrite time against op count at most 1.1 over the sizes).

Separately, the GPT-2-small-shaped step (12 layers, d_model 768, 12 heads, context 256):
median of 3 full-pipeline runs under 1 s (an absolute target, so the result also gives the
ratio to the parse/verify/print round trip with no passes, measured interleaved, and the
per-pass split of one run).

    python benchmarks/rewrite_cost.py            # full run (about 10 minutes on 2 cores)
    python benchmarks/rewrite_cost.py --quick    # smoke run: 1 and 2 layers, one round

Results: ``docs/results/rewrite_cost.json``, ``docs/figures/rewrite_cost.png`` and the
"Rewrite cost" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    RESULTS,
    ROOT,
    add_gpt_arguments,
    environment,
    format_table,
    gpt_config,
    gpt_label,
    interleaved,
    load_average,
    load_models,
    markdown_table,
    paired_ratio,
    publish,
    summary,
    timed,
    verdict,
)
from scalify_hlo.rewrites import PassContext, parse_pipeline, run_pipeline

from scalify_hlo import ir as hlo_ir
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.runner import compile_module

FIGURE = ROOT / "docs" / "figures" / "rewrite_cost.png"
MAX_COMPILE_FRACTION = 0.10
MAX_SLOPE = 1.1
GPT2_LIMIT_S = 1.0
GPT2 = {"n_layers": 12, "d_model": 768, "n_heads": 12, "context": 256, "vocab": 256,
        "batch": 8}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16],
                        help="decoder layers of each GPT step (%(default)s)")
    add_gpt_arguments(parser)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of rewrite + compile per size (%(default)s)")
    parser.add_argument("--gpt2-rounds", type=int, default=3,
                        help="full-pipeline runs of the GPT-2-small step (%(default)s)")
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2-small step")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: sizes 1 2, one round, GPT-2-small once, no doc")
    parser.add_argument("--out", type=Path, default=RESULTS / "rewrite_cost.json")
    parser.add_argument("--figure", type=Path, default=FIGURE)
    parser.add_argument("--no-doc", action="store_true",
                        help="do not touch docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.rounds, args.gpt2_rounds, args.no_doc = [1, 2], 1, 1, True
    if args.rounds < 1 or args.gpt2_rounds < 1:
        parser.error("--rounds and --gpt2-rounds must be >= 1")
    return args


def full_pipeline(text: str) -> None:
    """What ``scalify-hlo rewrite`` does to one module; a failure stops the benchmark."""
    chunk = rewrite_module_source(text, DEFAULT_PIPELINE)
    if chunk.error is not None:
        raise SystemExit(f"rewrite failed: {chunk.error}")


def round_trip(text: str) -> None:
    """Parse, verify and print with no pass: the floor any MLIR-based tool pays."""
    chunk = rewrite_module_source(text, "")
    if chunk.error is not None:
        raise SystemExit(f"round trip failed: {chunk.error}")


def phase_split(text: str) -> dict[str, float]:
    """Seconds of each phase of one full-pipeline run (parse and verify, each pass with the
    verify after it, print), to say where the time goes; mirrors ``rewrite_module_source``."""
    phases: dict[str, float] = {}
    with hlo_ir.ir_context():
        start = time.perf_counter()
        module = hlo_ir.parse_module(text)
        hlo_ir.count_ops(module)
        last = time.perf_counter()
        phases["parse+verify"] = last - start

        def after(invocation: Any, _module: Any) -> None:
            nonlocal last
            now = time.perf_counter()
            phases[invocation.info.name] = phases.get(invocation.info.name, 0.0) + now - last
            last = now

        run_pipeline(module, parse_pipeline(DEFAULT_PIPELINE), PassContext(), after)
        hlo_ir.count_ops(module)
        hlo_ir.write_module(module, hlo_ir.EmitFormat.TEXT, verified=True)
        phases["print"] = time.perf_counter() - last
    return phases


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x): 1 for linear growth, 2 for quadratic."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return (sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
            / sum((a - mx) ** 2 for a in lx))


def measure_sizes(args: argparse.Namespace, models: Any) -> list[dict[str, Any]]:
    texts: dict[int, str] = {}
    rows: list[dict[str, Any]] = []
    for layers in args.sizes:
        config = gpt_config(args, layers)
        step_fn, example = models.gpt_step(**config)
        text, export_s = timed(lambda f=step_fn, e=example: models.export_text(f, e))
        chunk = rewrite_module_source(text, DEFAULT_PIPELINE)
        if chunk.error is not None:
            raise SystemExit(f"rewrite of {gpt_label(config)} failed: {chunk.error}")
        texts[layers] = text
        rows.append({"layers": layers, "config": config, "export_s": export_s,
                     "ops_before": sum(chunk.ops_before.values()),
                     "ops_after": sum(chunk.ops_after.values()), "text_chars": len(text)})
        print(f"exported {gpt_label(config)}: {rows[-1]['ops_before']} ops", flush=True)
    # First-call costs (LLVM's initialization in XLA, the MLIR context) out of the samples.
    smallest = texts[min(texts)]
    compile_module(smallest)
    full_pipeline(smallest)
    fns: dict[str, Any] = {}
    cpu: dict[str, list[float]] = {}

    def with_cpu_time(key: str, fn: Any) -> Any:
        """``fn`` that also records its process CPU time (all threads): less sensitive than
        wall time to other processes on a shared machine."""
        cpu[key] = []

        def run() -> None:
            start = time.process_time()
            fn()
            cpu[key].append(time.process_time() - start)
        return run

    for layers, text in texts.items():
        fns[f"rewrite/{layers}"] = with_cpu_time(f"rewrite/{layers}",
                                                 lambda t=text: full_pipeline(t))
        fns[f"compile/{layers}"] = with_cpu_time(f"compile/{layers}",
                                                 lambda t=text: compile_module(t))
    print(f"timing {len(fns)} measurements x {args.rounds} rounds, interleaved", flush=True)
    samples = interleaved(fns, args.rounds, warmup=0)
    for row in rows:
        rewrite, compiled = samples[f"rewrite/{row['layers']}"], samples[f"compile/{row['layers']}"]
        row["rewrite"] = summary(rewrite)
        row["compile"] = summary(compiled)
        row["rewrite_over_compile"] = paired_ratio(rewrite, compiled)
        row["rewrite_cpu"] = summary(cpu[f"rewrite/{row['layers']}"])
        row["compile_cpu"] = summary(cpu[f"compile/{row['layers']}"])
        row["rewrite_over_compile_cpu"] = paired_ratio(cpu[f"rewrite/{row['layers']}"],
                                                       cpu[f"compile/{row['layers']}"])
        row["ops_per_s"] = row["ops_before"] / row["rewrite"]["median_s"]
        row["us_per_op"] = 1e6 * row["rewrite"]["median_s"] / row["ops_before"]
    return rows


def measure_gpt2(args: argparse.Namespace, models: Any) -> dict[str, Any]:
    step_fn, example = models.gpt_step(**GPT2)
    text, export_s = timed(lambda: models.export_text(step_fn, example))
    full_pipeline(text)  # warm-up
    cpu_s: list[float] = []

    def rewrite() -> None:
        start = time.process_time()
        full_pipeline(text)
        cpu_s.append(time.process_time() - start)

    samples = interleaved({"rewrite": rewrite, "round_trip": lambda: round_trip(text)},
                          args.gpt2_rounds, warmup=0)
    chunk = rewrite_module_source(text, DEFAULT_PIPELINE)
    median = summary(samples["rewrite"])["median_s"]
    return {"config": GPT2, "export_s": export_s,
            "ops_before": sum(chunk.ops_before.values()),
            "ops_after": sum(chunk.ops_after.values()),
            "rewrite": summary(samples["rewrite"]), "rewrite_cpu": summary(cpu_s),
            "round_trip": summary(samples["round_trip"]),
            "rewrite_over_round_trip": paired_ratio(samples["rewrite"], samples["round_trip"]),
            "phases_s": phase_split(text), "limit_s": GPT2_LIMIT_S,
            "target_met": median < GPT2_LIMIT_S}


def plot(rows: list[dict[str, Any]], path: Path) -> str | None:
    """Rewrite and compile time against op count, log-log; None when matplotlib is absent
    (it is not a dependency of the project, only of this figure)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib not installed: no figure"
    ops = [r["ops_before"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ops, [r["rewrite"]["median_s"] for r in rows], "o-", label="scalify-hlo rewrite")
    ax.plot(ops, [r["compile"]["median_s"] for r in rows], "s-", label="XLA:CPU compile")
    first = rows[0]
    ax.plot(ops, [first["rewrite"]["median_s"] * n / ops[0] for n in ops], ":", color="gray",
            label="linear in ops")
    for r in rows:
        ax.annotate(f"{r['layers']}L", (r["ops_before"], r["rewrite"]["median_s"]),
                    textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("StableHLO ops in the original step")
    ax.set_ylabel("seconds (median)")
    ax.set_title("Rewrite (DEFAULT_PIPELINE) vs XLA:CPU compile, GPT steps")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def report(result: dict[str, Any]) -> str:
    rows = result["sizes"]
    headers = ["layers", "ops", "ops after", "rewrite s", "compile s", "rewrite/compile",
               "same, CPU time", "ops/s", "us/op"]
    table = [[r["layers"], r["ops_before"], r["ops_after"], f"{r['rewrite']['median_s']:.2f}",
              f"{r['compile']['median_s']:.1f}", f"{r['rewrite_over_compile']:.3f}",
              f"{r['rewrite_over_compile_cpu']:.3f}", f"{r['ops_per_s']:.0f}",
              f"{r['us_per_op']:.0f}"] for r in rows]
    targets = result["targets"]
    lines = [format_table(headers, table), "",
             f"rewrite <= {MAX_COMPILE_FRACTION:.0%} of compile at every size: "
             f"{verdict(targets['compile_fraction_met'])} (worst "
             f"{targets['worst_compile_fraction']:.3f})",
             f"linear growth (log-log slope <= {MAX_SLOPE}): "
             f"{verdict(targets['linear_met'])} (slope {targets['slope']:.2f})"]
    gpt2 = result.get("gpt2")
    if gpt2:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in gpt2["phases_s"].items())
        lines += [f"GPT-2-small step ({gpt2['ops_before']} ops): full pipeline median "
                  f"{gpt2['rewrite']['median_s']:.2f} s (min {gpt2['rewrite']['min_s']:.2f}, "
                  f"CPU time {gpt2['rewrite_cpu']['median_s']:.2f}) over "
                  f"{gpt2['rewrite']['n']} runs, {gpt2['rewrite_over_round_trip']:.1f}x "
                  f"the parse/print round trip; < {GPT2_LIMIT_S:.0f} s: "
                  f"{verdict(gpt2['target_met'])}", f"  one run by phase (s): {phases}"]
    return "\n".join(lines)


def doc_section(result: dict[str, Any]) -> str:
    rows, targets, config = result["sizes"], result["targets"], result["sizes"][0]["config"]
    table = markdown_table(
        ["layers", "ops", "ops after", "rewrite (s)", "XLA compile (s)", "rewrite / compile",
         "same, CPU time", "ops/s", "µs/op"],
        [[r["layers"], r["ops_before"], r["ops_after"], f"{r['rewrite']['median_s']:.2f}",
          f"{r['compile']['median_s']:.1f}", f"{r['rewrite_over_compile']:.3f}",
          f"{r['rewrite_over_compile_cpu']:.3f}", f"{r['ops_per_s']:.0f}",
          f"{r['us_per_op']:.0f}"] for r in rows])
    text = [
        "`python benchmarks/rewrite_cost.py` (`--quick` for a smoke run). GPT training steps "
        f"(Adam) of d_model {config['d_model']}, {config['n_heads']} heads, context "
        f"{config['context']}, vocab {config['vocab']}, batch {config['batch']}. *rewrite*: "
        "`rewrite_module_source(text, DEFAULT_PIPELINE)` (parse, passes, verify, print); "
        "*XLA compile*: `compile_module` of the original module on XLA:CPU. Medians of "
        f"{result['rounds']} rounds, every size's rewrite and compile interleaved in each "
        "round; *rewrite / compile* is the median of the per-round ratios of wall time (the "
        "target), *same, CPU time* of process CPU time (all threads; less sensitive to the "
        "other load on this shared 2-core machine). *ops*: StableHLO ops of the original "
        "module; *ops/s* and *µs/op* from the median rewrite time. Load average at "
        f"the start: {result['load_average_start']}, at the end: {result['load_average_end']}.",
        "", table, "",
        f"* Rewrite at most {MAX_COMPILE_FRACTION:.0%} of XLA's compile time at every size: "
        f"**{verdict(targets['compile_fraction_met'])}** (worst "
        f"{targets['worst_compile_fraction']:.3f}).",
        f"* Linear in op count (log-log slope at most {MAX_SLOPE}): "
        f"**{verdict(targets['linear_met'])}** (slope {targets['slope']:.2f}).",
    ]
    gpt2 = result.get("gpt2")
    if gpt2:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in gpt2["phases_s"].items())
        text.append(
            f"* GPT-2-small-shaped step (12 layers, d_model 768, 12 heads, context 256; "
            f"{gpt2['ops_before']} ops): full pipeline median {gpt2['rewrite']['median_s']:.2f} s"
            f" (min {gpt2['rewrite']['min_s']:.2f} s; process CPU time "
            f"{gpt2['rewrite_cpu']['median_s']:.2f} s, less sensitive to other load) of "
            f"{gpt2['rewrite']['n']} runs, "
            f"{gpt2['rewrite_over_round_trip']:.1f}x the parse/verify/print round trip with no "
            f"pass; under {GPT2_LIMIT_S:.0f} s: **{verdict(gpt2['target_met'])}**. One run by "
            f"phase (s): {phases}.")
    if result.get("figure"):
        text += ["", f"![rewrite time against op count]({result['figure']})"]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    models = load_models()
    load_start = load_average()
    rows = measure_sizes(args, models)
    slope = (loglog_slope([r["ops_before"] for r in rows], [r["rewrite"]["median_s"] for r in rows])
             if len(rows) > 1 else float("nan"))
    worst = max(r["rewrite_over_compile"] for r in rows)
    result: dict[str, Any] = {
        "environment": environment(), "pipeline": DEFAULT_PIPELINE, "rounds": args.rounds,
        "load_average_start": load_start, "sizes": rows,
        "targets": {"max_compile_fraction": MAX_COMPILE_FRACTION,
                    "worst_compile_fraction": worst,
                    "compile_fraction_met": worst <= MAX_COMPILE_FRACTION,
                    "max_slope": MAX_SLOPE, "slope": slope,
                    "linear_met": len(rows) > 1 and slope <= MAX_SLOPE},
    }
    if not args.no_gpt2:
        print("GPT-2-small step", flush=True)
        result["gpt2"] = measure_gpt2(args, models)
    result["load_average_end"] = load_average()
    problem = plot(rows, args.figure)
    if problem:
        print(problem)
    else:
        try:
            result["figure"] = str(args.figure.resolve().relative_to(ROOT / "docs"))
        except ValueError:
            result["figure"] = str(args.figure)
    print(report(result))
    publish(args.out, result, "Rewrite cost", doc_section, doc=not args.no_doc,
            also_wrote="" if problem else f" and {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
