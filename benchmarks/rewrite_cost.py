"""What the rewrite costs: its own time, and what the rewritten module costs XLA to compile.

Why this script exists: scalify-hlo sits between ``jax.export`` and XLA, so its time adds to
every compile, and the module it hands XLA must not cost XLA (compile time, kernels) much more
than the original: the FP8 gain is lost if the scale arithmetic multiplies the kernels. This
script measures both, per GPT training step size, for the default policy (f16 data, FP8 dots,
rescale at gradients) and for f32 mode (``inline,scalify{data-dtype=f32},simplify``).

Steps: ``testdata/models.py`` ``gpt_step`` (Adam) of 1, 2, 4, 8 and 16 layers at a moderate
width (default d_model 256, 4 heads, context 128, vocab 256, batch 8), and the GPT-2-small
shaped step (12 layers, d_model 768, 12 heads, context 256). Per step and mode:

* rewrite: ``rewrite_module_source(text, pipeline)`` as ``scalify-hlo rewrite`` runs it (parse,
  verify, passes, verify, print), process CPU time (all threads; the machine is shared, CPU
  time is what load disturbs least) in a fresh process per step, median of ``--rounds``
  rounds interleaved with XLA:CPU's compile of the original (the order reversed every other
  round; ratios paired per round); and one run split by phase (parse, each pass, the final
  verify, print);
* XLA:CPU: compile time (CPU time) of the original and of the rewritten module, and the
  optimized HLO's instructions (every computation, fused ones included) and fusions;
* H100 (with the ``gpu-aot`` extra, ``scalify_hlo.gpu_aot``; ``--no-h100`` to skip): the same
  compiled deviceless for an H100 SXM with Triton GEMM off, plus the ``__cublas$lt$matmul$f8``
  calls against the FP8 dots of the rewritten module.

*Reference*: f32 mode against the original step; the default policy (FP8 dots) against the
*FP8 floor*, the original with the same dots cast to FP8 the same way and no scale at all
(``inline,fp8-dots{scaling=none}``): casts, and the transposes cuBLASLt's FP8 GEMMs need
(both operands' contracting dimension minor), cost kernels that any FP8 step pays, so the
floor is what the scale arithmetic is measured against. *program*: the H100 compile of what
a ``compile_scaled`` step runs (the rewritten module inside a jit that passes the scales as
one vector per call), beside the module as it is (one rank-0 buffer per scale: XLA:GPU
computes each result's scale in a kernel of its own).

Targets (issue 17): XLA compile time of the rewritten module at most 1.3x the reference's (CPU
and H100), optimized HLO instructions at most 1.5x, H100 fusions at most 1.2x; every FP8 dot a
cuBLASLt FP8 GEMM; the rewrite at most 10% of the original's XLA:CPU compile at every size,
under 0.6 s CPU for the GPT-2-small step with the default policy, and linear in the op count
(log-log slope of rewrite time against op count at most 1.1 over the GPT series).

    python benchmarks/rewrite_cost.py            # full run (long: compiles of 16 layers)
    python benchmarks/rewrite_cost.py --quick    # smoke run: 1 and 2 layers, one round

Results: ``docs/results/rewrite_cost.json``, ``docs/figures/rewrite_cost.png`` and the
"Rewrite cost" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    GPT2_SMALL,
    RESULTS,
    ROOT,
    SCALIFY_F32,
    add_gpt_arguments,
    cpu_compile,
    cpu_timed,
    environment,
    format_table,
    gpt_config,
    gpt_label,
    h100_compile,
    json_from_child,
    load_average,
    load_models,
    markdown_table,
    output_path,
    publish,
    summary,
    verdict,
)

from scalify_hlo import gpu_aot, module_io
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites import PassContext, parse_pipeline, run_pipeline
from scalify_hlo.runner import compile_module

FIGURE = ROOT / "docs" / "figures" / "rewrite_cost.png"
MODES = {"default": DEFAULT_PIPELINE, "f32": SCALIFY_F32}
# The FP8 floor: the original with its dots cast to FP8 exactly as fp8-dots casts them, no scale.
FLOOR = "inline,fp8-dots{scaling=none}"
MAX_COMPILE_RATIO = 1.3
MAX_INSTRUCTION_RATIO = 1.5
MAX_H100_FUSION_RATIO = 1.2
MAX_COMPILE_FRACTION = 0.10
MAX_SLOPE = 1.1
GPT2_LIMIT_S = 0.6
GPT2_LABEL = "GPT-2-small"
_FP8_DOT = re.compile(r"stablehlo\.dot_general .*: \(tensor<[^>]*xf8E[^>]*>, tensor<[^>]*xf8E")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 2, 4, 8, 16],
                        help="decoder layers of each GPT step (%(default)s)")
    add_gpt_arguments(parser)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of rewrite + original compile (%(default)s)")
    parser.add_argument("--gpt2-rounds", type=int, default=2,
                        help="the same for the GPT-2-small step (%(default)s)")
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2-small step")
    parser.add_argument("--no-h100", action="store_true",
                        help="skip the deviceless H100 compiles (skipped anyway without the "
                             "gpu-aot extra)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: sizes 1 2, one round, no GPT-2-small, no doc")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/rewrite_cost.json; a --quick "
                        "run's goes to the temporary directory)")
    parser.add_argument("--figure", type=Path, default=None,
                        help="the plot to write (docs/figures/rewrite_cost.png; a --quick "
                        "run's goes to the temporary directory)")
    parser.add_argument("--no-doc", action="store_true",
                        help="do not touch docs/benchmarks.md")
    parser.add_argument("--time-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.rounds, args.no_gpt2, args.no_doc = [1, 2], 1, True, True
    if args.rounds < 1 or args.gpt2_rounds < 1:
        parser.error("--rounds and --gpt2-rounds must be >= 1")
    args.out = output_path(args.out, RESULTS / "rewrite_cost.json", args.quick)
    args.figure = output_path(args.figure, FIGURE, args.quick)
    return args


def rewrite(text: str, pipeline: str) -> str:
    """What ``scalify-hlo rewrite`` does to one module; a failure stops the benchmark."""
    chunk = rewrite_module_source(text, pipeline)
    if chunk.error is not None or chunk.output is None:
        raise SystemExit(f"rewrite with {pipeline!r} failed: {chunk.error}")
    return chunk.output.decode()


def phase_split(text: str, pipeline: str) -> dict[str, float]:
    """CPU seconds of each phase of one rewrite, as ``rewrite_module_source`` runs them."""
    phases: dict[str, float] = {}
    gc.disable()
    try:
        with module_io.ir_context():
            last = time.process_time()
            module = module_io.parse_module(text)

            def mark(name: str) -> None:
                nonlocal last
                now = time.process_time()
                phases[name] = phases.get(name, 0.0) + now - last
                last = now

            mark("parse+verify")
            run_pipeline(module, parse_pipeline(pipeline), PassContext(),
                         lambda module_pass, _: mark(module_pass.name))
            last = time.process_time()
            module_io.verify(module)
            mark("verify")
            module_io.write_module(module, module_io.EmitFormat.TEXT, verified=True)
            mark("print")
    finally:
        gc.enable()
    return phases


def sampled_rounds(text: str, modes: list[str], rounds: int) -> dict[str, Any]:
    """Per mode, ``rounds`` rewrite times interleaved with XLA:CPU's compile of the original
    (the order reversed every other round), after one warm-up of each; and one rewrite of
    each mode split by phase."""
    fns = {f"rewrite/{mode}": (lambda p=MODES[mode]: rewrite(text, p)) for mode in modes}
    fns["compile/original"] = lambda: compile_module(text)
    for fn in fns.values():  # first-call costs out of the samples
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for index in range(rounds):
        for name in order if index % 2 == 0 else reversed(order):
            samples[name].append(cpu_timed(fns[name])[1])
    return {"samples": samples,
            "phases": {mode: phase_split(text, MODES[mode]) for mode in modes}}


def rewrite_timings(text: str, modes: list[str], rounds: int) -> dict[str, Any]:
    """``sampled_rounds`` in a fresh process, as ``scalify-hlo rewrite`` runs: a process that
    has compiled for the H100 rewrites slower by its process CPU time (the 8-layer step
    1.05 s fresh, 1.26 s after one deviceless H100 compile, 1.43 s after four), which this
    benchmark does between steps."""
    return json_from_child(__file__, "--time-child", text,
                           ["--rounds", str(rounds), "--modes", *modes])[0]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def measure_step(label: str, text: str, args: argparse.Namespace, rounds: int,
                 h100: bool, program: Any = None) -> dict[str, Any]:
    """Every figure of one step: the original, the FP8 floor, each mode (and, with
    ``program`` (``program_text``), each mode's compile_scaled program on the H100)."""
    with module_io.ir_context():
        ops = sum(module_io.count_ops(module_io.parse_module(text)).values())
    rewritten = {mode: rewrite(text, MODES[mode]) for mode in args.modes}
    timed = rewrite_timings(text, args.modes, rounds)
    samples = timed["samples"]
    original_cpu = cpu_compile(text)
    original_cpu["compile_s"] = statistics.median(samples["compile/original"])
    row: dict[str, Any] = {"step": label, "ops": ops, "text_chars": len(text),
                           "original": {"cpu": original_cpu}, "modes": {}}
    floor = rewrite(text, FLOOR)
    row["floor"] = {"cpu": cpu_compile(floor)}
    if h100:
        row["original"]["h100"] = h100_compile(text)
        row["floor"]["h100"] = h100_compile(floor)
    for mode in args.modes:
        mine = samples[f"rewrite/{mode}"]
        out: dict[str, Any] = {
            "pipeline": MODES[mode], "rewrite": summary(mine),
            "rewrite_over_compile": statistics.median(
                a / b for a, b in zip(mine, samples["compile/original"], strict=True)),
            "phases_s": timed["phases"][mode],
            "fp8_dots": len(_FP8_DOT.findall(rewritten[mode])),
            "cpu": cpu_compile(rewritten[mode])}
        out["reference"] = reference = "floor" if out["fp8_dots"] else "original"
        base = row[reference]
        out["cpu_ratios"] = _ratios(out["cpu"], base["cpu"])
        if h100:
            out["h100"] = h100_compile(rewritten[mode])
            out["h100_ratios"] = _ratios(out["h100"], base["h100"])
            if program is not None:
                out["h100_program"] = h100_compile(program(MODES[mode]))
                out["h100_program_ratios"] = _ratios(out["h100_program"], base["h100"])
        row["modes"][mode] = out
        print(f"  {label} {mode} (against the {reference}): rewrite "
              f"{out['rewrite']['median_s']:.2f} s, XLA:CPU compile "
              f"x{out['cpu_ratios']['compile_s']:.2f}, instructions "
              f"x{out['cpu_ratios']['instructions']:.2f}"
              + (f", H100 fusions x{out['h100_ratios']['fusions']:.2f}"
                 + (f" (program x{out['h100_program_ratios']['fusions']:.2f})"
                    if "h100_program" in out else "")
                 + f", FP8 GEMMs {out['h100']['cublas_f8']}/{out['fp8_dots']}" if h100 else ""),
              flush=True)
    return row


def _ratios(mine: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    return {k: ratio(mine[k], base[k]) for k in ("compile_s", "instructions", "fusions")}


def program_text(fn: Any, args: tuple[Any, ...]) -> Any:
    """A function of a pipeline: the lowered program a ``compile_scaled`` step of
    ``fn`` runs when called with the state ``scale_args`` makes (scales as one vector)."""
    from scalify_hlo import compile_scaled

    def lowered(pipeline: str) -> str:
        step = compile_scaled(fn, *args, pipeline=pipeline)
        return step.lower(*step.scale_args(*args)).as_text()

    return lowered


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x): 1 for linear growth, 2 for quadratic."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return (sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
            / sum((a - mx) ** 2 for a in lx))


def judge(rows: list[dict[str, Any]], modes: list[str], h100: bool) -> dict[str, Any]:
    """Each target's verdict (None where nothing was measured) and its worst value."""
    def worst(key: str, field: str) -> float:
        return max(r["modes"][m][key][field] for r in rows for m in modes)

    targets: dict[str, Any] = {
        "cpu_compile": worst("cpu_ratios", "compile_s"),
        "cpu_instructions": worst("cpu_ratios", "instructions"),
        "rewrite_fraction": max(r["modes"][m]["rewrite_over_compile"] for r in rows
                                for m in modes)}
    verdicts = {"cpu_compile": targets["cpu_compile"] <= MAX_COMPILE_RATIO,
                "cpu_instructions": targets["cpu_instructions"] <= MAX_INSTRUCTION_RATIO,
                "rewrite_fraction": targets["rewrite_fraction"] <= MAX_COMPILE_FRACTION}
    if h100:
        targets.update(h100_compile=worst("h100_ratios", "compile_s"),
                       h100_instructions=worst("h100_ratios", "instructions"),
                       h100_fusions=worst("h100_ratios", "fusions"))
        verdicts.update(h100_compile=targets["h100_compile"] <= MAX_COMPILE_RATIO,
                        h100_instructions=targets["h100_instructions"] <= MAX_INSTRUCTION_RATIO,
                        h100_fusions=targets["h100_fusions"] <= MAX_H100_FUSION_RATIO,
                        fp8_gemms=all(r["modes"][m]["h100"]["cublas_f8"]
                                      >= r["modes"][m]["fp8_dots"] for r in rows for m in modes))
        if all("h100_program_ratios" in r["modes"][m] for r in rows for m in modes):
            targets["h100_program_fusions"] = worst("h100_program_ratios", "fusions")
            verdicts["h100_program_fusions"] = (targets["h100_program_fusions"]
                                                <= MAX_H100_FUSION_RATIO)
    series = [r for r in rows if r["step"] != GPT2_LABEL]
    if len(series) > 1 and "default" in modes:
        targets["slope"] = loglog_slope([r["ops"] for r in series],
                                        [r["modes"]["default"]["rewrite"]["median_s"]
                                         for r in series])
        verdicts["linear"] = targets["slope"] <= MAX_SLOPE
    gpt2 = next((r for r in rows if r["step"] == GPT2_LABEL), None)
    if gpt2 is not None and "default" in modes:
        targets["gpt2_rewrite_s"] = gpt2["modes"]["default"]["rewrite"]["median_s"]
        verdicts["gpt2_rewrite"] = targets["gpt2_rewrite_s"] < GPT2_LIMIT_S
    return {"values": targets, "met": verdicts}


def plot(rows: list[dict[str, Any]], path: Path) -> str | None:
    """Rewrite (default policy) and XLA:CPU compile time against op count, log-log; a reason
    instead when matplotlib is absent or there is nothing to draw."""
    series = [r for r in rows if r["step"] != GPT2_LABEL and "default" in r["modes"]]
    if len(series) < 2:
        return "fewer than two GPT sizes: no figure"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no figure"
    ops = [r["ops"] for r in series]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ops, [r["modes"]["default"]["rewrite"]["median_s"] for r in series], "o-",
            label="scalify-hlo rewrite (default policy)")
    ax.plot(ops, [r["original"]["cpu"]["compile_s"] for r in series], "s-",
            label="XLA:CPU compile, original")
    ax.plot(ops, [r["modes"]["default"]["cpu"]["compile_s"] for r in series], "^-",
            label="XLA:CPU compile, rewritten")
    for r in series:
        ax.annotate(f"{r['step']}", (r["ops"], r["modes"]["default"]["rewrite"]["median_s"]),
                    textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("StableHLO ops in the original step")
    ax.set_ylabel("CPU seconds")
    ax.set_title("Rewrite and XLA:CPU compile, GPT steps")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def _pair(original: float, rewritten: float, digits: int = 0) -> str:
    return f"{original:.{digits}f} → {rewritten:.{digits}f} ({ratio(rewritten, original):.2f}x)"


def table(rows: list[dict[str, Any]], mode: str, h100: bool) -> tuple[list[str], list[list]]:
    reference = rows[0]["modes"][mode]["reference"] if rows else "original"
    headers = ["step", "ops", "rewrite (s)", "rewrite / compile", "XLA:CPU compile (s)",
               "XLA:CPU HLO instructions", "XLA:CPU fusions"]
    if h100:
        headers += ["H100 compile (s)", "H100 HLO instructions", "H100 fusions",
                    "H100 fusions, program", "FP8 GEMMs / FP8 dots"]
    out = []
    for r in rows:
        m, o = r["modes"][mode], r[reference]
        line = [r["step"], r["ops"], f"{m['rewrite']['median_s']:.2f}",
                f"{m['rewrite_over_compile']:.3f}",
                _pair(o["cpu"]["compile_s"], m["cpu"]["compile_s"], 1),
                _pair(o["cpu"]["instructions"], m["cpu"]["instructions"]),
                _pair(o["cpu"]["fusions"], m["cpu"]["fusions"])]
        if h100:
            program = m.get("h100_program")
            line += [_pair(o["h100"]["compile_s"], m["h100"]["compile_s"], 1),
                     _pair(o["h100"]["instructions"], m["h100"]["instructions"]),
                     _pair(o["h100"]["fusions"], m["h100"]["fusions"]),
                     _pair(o["h100"]["fusions"], program["fusions"]) if program else "-",
                     f"{m['h100']['cublas_f8']} / {m['fp8_dots']}"]
        out.append(line)
    return headers, out


def reference_table(rows: list[dict[str, Any]], h100: bool) -> tuple[list[str], list[list]]:
    """The two references side by side: what the same dots in FP8 cost XLA with no scale."""
    headers = ["step", "XLA:CPU compile (s)", "XLA:CPU HLO instructions", "XLA:CPU fusions"]
    if h100:
        headers += ["H100 compile (s)", "H100 HLO instructions", "H100 fusions"]
    out = []
    for r in rows:
        o, f = r["original"], r["floor"]
        line = [r["step"], _pair(o["cpu"]["compile_s"], f["cpu"]["compile_s"], 1),
                _pair(o["cpu"]["instructions"], f["cpu"]["instructions"]),
                _pair(o["cpu"]["fusions"], f["cpu"]["fusions"])]
        if h100:
            line += [_pair(o["h100"]["compile_s"], f["h100"]["compile_s"], 1),
                     _pair(o["h100"]["instructions"], f["h100"]["instructions"]),
                     _pair(o["h100"]["fusions"], f["h100"]["fusions"])]
        out.append(line)
    return headers, out


VERDICT_LINES = {
    "cpu_compile": f"XLA:CPU compile of the rewritten module at most {MAX_COMPILE_RATIO}x the "
                   "reference's (the original for f32 mode, the FP8 floor for FP8 modes)",
    "h100_compile": f"H100 compile at most {MAX_COMPILE_RATIO}x",
    "cpu_instructions": f"XLA:CPU optimized HLO instructions at most {MAX_INSTRUCTION_RATIO}x",
    "h100_instructions": f"H100 optimized HLO instructions at most {MAX_INSTRUCTION_RATIO}x",
    "h100_fusions": f"H100 fusions at most {MAX_H100_FUSION_RATIO}x, the module as it is",
    "h100_program_fusions": f"H100 fusions at most {MAX_H100_FUSION_RATIO}x, the "
                            "compile_scaled program",
    "fp8_gemms": "every FP8 dot a `__cublas$lt$matmul$f8` call on the H100 target",
    "rewrite_fraction": f"rewrite at most {MAX_COMPILE_FRACTION:.0%} of the original's XLA:CPU "
                        "compile at every size",
    "gpt2_rewrite": f"GPT-2-small rewrite (default policy) under {GPT2_LIMIT_S} s CPU",
    "linear": f"rewrite time linear in op count (log-log slope at most {MAX_SLOPE})",
}


def verdict_lines(judged: dict[str, Any], bold: bool) -> list[str]:
    lines = []
    for key, text in VERDICT_LINES.items():
        if key not in judged["met"]:
            continue
        name, label = {"gpt2_rewrite": ("gpt2_rewrite_s", "median"),
                       "linear": ("slope", "slope")}.get(key, (key, "worst"))
        value = judged["values"].get(name)
        shown = "" if value is None else f" ({label} {value:.3f})"
        word = verdict(judged["met"][key])
        lines.append(f"* {text}: {f'**{word}**' if bold else word}{shown}")
    return lines


def report(result: dict[str, Any]) -> str:
    lines = []
    for mode in result["modes"]:
        headers, rows = table(result["steps"], mode, result["h100"])
        lines += [f"{mode} ({MODES[mode]})", format_table(headers, rows), ""]
    lines += verdict_lines(result["targets"], bold=False)
    for r in result["steps"]:
        for mode in result["modes"]:
            phases = ", ".join(f"{k} {v:.3f}" for k, v in r["modes"][mode]["phases_s"].items())
            lines.append(f"  {r['step']} {mode} by phase (CPU s): {phases}")
    return "\n".join(lines)


def doc_section(result: dict[str, Any]) -> str:
    config = result["config"]
    text = [
        "`python benchmarks/rewrite_cost.py` (`--quick` for a smoke run). GPT training steps "
        f"(Adam) of d_model {config['d_model']}, {config['n_heads']} heads, context "
        f"{config['context']}, vocab {config['vocab']}, batch {config['batch']}"
        + (", and the GPT-2-small shaped step (12 layers, d_model 768, 12 heads, context 256)"
           if any(r["step"] == GPT2_LABEL for r in result["steps"]) else "")
        + ". *rewrite*: "
        "`rewrite_module_source` as `scalify-hlo rewrite` runs it (parse, verify, passes, "
        "verify, print), process CPU time in a fresh process per step, median of "
        f"{result['rounds']} rounds ({result['gpt2_rounds']} for GPT-2-small) interleaved "
        "with XLA:CPU's compile of the original; *rewrite / compile* is the median of the "
        "per-round ratios. *compile*: CPU seconds of XLA's compile (the original's the median "
        "of the same rounds, the rewritten module's one compile). *HLO instructions*: "
        "instructions of the optimized HLO in every computation, fused ones included; "
        "*fusions*: instructions with opcode `fusion`. *H100*: the same modules compiled "
        "without a GPU for an H100 SXM (`scalify_hlo.gpu_aot`, Triton GEMM off so FP8 dots "
        "show as cuBLASLt calls); *FP8 GEMMs*: `__cublas$lt$matmul$f8` calls; *program*: "
        "the program a `compile_scaled` step runs (scales as one vector per call) compiled "
        "for the H100. Each mode is measured against its reference: f32 mode against the "
        "original, FP8 modes against the *FP8 floor*, the original with the same dots cast "
        "to FP8 by `fp8-dots` with no scale (the casts and the transposes cuBLASLt's FP8 "
        "GEMMs need are what any FP8 step costs; the scale arithmetic is measured on top). "
        "Load average "
        f"at the start: {result['load_average_start']}, at the end: "
        f"{result['load_average_end']} (a shared 2-core machine)."
        + ("" if result.get("complete", True) else " **Partial run**: the steps measured "
           "before it was stopped."),
    ]
    if not result["h100"]:
        text.append("The H100 columns need the `gpu-aot` extra, not installed for this run.")
    headers, rows = reference_table(result["steps"], result["h100"])
    text += ["", f"**References**: the original step → the FP8 floor (`{FLOOR}`):", "",
             markdown_table(headers, rows)]
    for mode in result["modes"]:
        headers, rows = table(result["steps"], mode, result["h100"])
        reference = result["steps"][0]["modes"][mode]["reference"] if result["steps"] else ""
        text += ["", f"**{mode}** (`{MODES[mode]}`), against the {reference}:", "",
                 markdown_table(headers, rows)]
    text += ["", *verdict_lines(result["targets"], bold=True)]
    gpt2 = next((r for r in result["steps"] if r["step"] == GPT2_LABEL), None)
    if gpt2 is not None:
        for mode in result["modes"]:
            phases = ", ".join(f"{k} {v:.3f}" for k, v in gpt2["modes"][mode]["phases_s"].items())
            text.append(f"* GPT-2-small, {mode}, one rewrite by phase (CPU s): {phases}.")
    if result.get("figure"):
        text += ["", f"![rewrite and compile time against op count]({result['figure']})"]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.time_child is not None:  # rewrite_timings' child: JSON on stdout
        print(json.dumps(sampled_rounds(args.time_child.read_text(), args.modes, args.rounds)))
        return 0
    h100 = not args.no_h100 and gpu_aot.available()
    models = load_models()
    load_start = load_average()
    compile_module(rewrite(models.export_text(*models.gpt_step(**gpt_config(args, 1))),
                           DEFAULT_PIPELINE))  # first-call costs out of the samples
    steps = [(gpt_label(gpt_config(args, n)), gpt_config(args, n), args.rounds)
             for n in args.sizes]
    if not args.no_gpt2:
        steps.append((GPT2_LABEL, GPT2_SMALL, args.gpt2_rounds))
    rows: list[dict[str, Any]] = []
    for label, config, rounds in steps:
        print(f"{label} ...", flush=True)
        fn, example = models.gpt_step(**config)
        text = models.export_text(fn, example)
        rows.append(measure_step(label, text, args, rounds, h100,
                                 program_text(fn, example) if h100 else None))
        # Written after every step: a long run stopped early still leaves its results.
        finish(args, rows, h100, load_start, final=len(rows) == len(steps))
    return 0


def finish(args: argparse.Namespace, rows: list[dict[str, Any]], h100: bool,
           load_start: Any, final: bool) -> None:
    """Judge, plot, print (at the end) and publish the steps measured so far."""
    result: dict[str, Any] = {
        "environment": environment(), "modes": args.modes, "rounds": args.rounds,
        "gpt2_rounds": args.gpt2_rounds, "config": gpt_config(args), "h100": h100,
        "load_average_start": load_start, "steps": rows, "complete": final,
        "targets": judge(rows, args.modes, h100), "load_average_end": load_average()}
    problem = plot(rows, args.figure)
    if not problem:
        try:
            result["figure"] = str(args.figure.resolve().relative_to(ROOT / "docs"))
        except ValueError:
            result["figure"] = str(args.figure)
    if final:
        if problem:
            print(problem)
        print(report(result))
    publish(args.out, result, "Rewrite cost", doc_section, doc=not args.no_doc,
            also_wrote="" if problem else f" and {args.figure}")


if __name__ == "__main__":
    sys.exit(main())
