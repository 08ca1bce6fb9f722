"""TPU targets by XLA's own cost model: the rewritten GPT step against the bf16 baseline.

Why this script exists: the rewritten step must be no slower than what a TPU user runs today
(JAX mixed precision: ``gpt_step(compute_dtype=bf16)``), and nobody here has a TPU. XLA's TPU
compiler (libtpu, the ``tpu-aot`` extra) runs on this CPU for a topology it is told, and its
optimized HLO carries a per-kernel cost model (``estimated_cycles``): every figure below is
XLA's estimate (cycles, memory_analysis bytes) or count (fusions, collectives), not a
measurement on hardware; compile time is this machine's wall clock, and beside it the
compiled program's VLIW bundles from libtpu's log (the size of the code XLA:TPU generated: a
count, the same every compile, where the wall clock moves with the machine's load).

Per chip (v5e, v6e, tpu7x; one chip each) and policy:

* bf16 baseline: ``gpt_step(compute_dtype=bf16)`` under plain ``jax.jit``;
* default policy: ``Policy()`` (f16 data, FP8 dots, rescale at gradients);
* target policy: ``Policy.for_target(chip)`` (bf16 data, scales not packed, the
  arguments' scales folded into their data on v6e; FP8 dots and
  delayed statistics on tpu7x only, compiled as the module a training loop runs from its
  second call, ``delayed-statistics=use``);
* the target policy with its update rounded to nearest, not dithered (what the stochastic
  rounding of the bf16 weights and Adam state costs);
* on tpu7x also the target policy without FP8 dots, to show what FP8 buys there, and the
  FP8 floor: the same with each FP8 operand cast as it is (``fp8_scaling="none"``: no
  amax, no shift), the least an FP8 step of this recipe costs, to show what the operands'
  scaling costs beside what FP8 itself does.

Estimated cycles are summed over the kernels of one step, loop bodies times their trip
count where the HLO gives it (the GPT step is unrolled: it has no loop). Targets for the
target policy (issue 23): cycles at most 1.05x the baseline on v5e and v6e, at most 0.75x
on tpu7x; fusions at most 1.2x; compile time at most 1.3x.

Also: the cycles of one 4096^3 dot in bf16, FP8 and int8 per chip (which chips have FP8
throughput, by the cost model), and the step sharded on a v5e:2x4 mesh (data parallel:
batch over 8; FSDP: parameters and Adam state split on their first axis too) with its
collectives counted.

    python benchmarks/tpu.py                  # GPT-2-small shape (12 layers, d 768)
    python benchmarks/tpu.py --layers 2       # the same width, 2 layers (a third the time)
    python benchmarks/tpu.py --quick          # smoke run: tiny GPT, v6e, no doc

Results: ``docs/results/tpu.json`` and the "TPU targets" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    add_gpt_arguments,
    environment,
    format_table,
    gpt_config,
    gpt_label,
    interleaved,
    load_average,
    load_models,
    markdown_table,
    output_path,
    paired_ratio,
    publish,
    rewrite_or_fail,
    steady_state_pipeline,
    verdict,
)
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from scalify_hlo.policy import Policy  # noqa: E402
from scalify_hlo.targets import tpu  # noqa: E402
from scalify_hlo.targets.result import TargetCompileResult  # noqa: E402

HEADING = "TPU targets"
CHIPS = ("v5e", "v6e", "tpu7x")
MAX_CYCLES = {"v5e": 1.05, "v6e": 1.05, "tpu7x": 0.75}
MAX_FUSIONS = 1.2
MAX_COMPILE = 1.3
SHARDED = "v5e:2x4"
DOT = 4096
# The size of a compiled program, from libtpu's log (log_bundles: main() sets "dir").
_BUNDLES = re.compile(r"final program bundle count: ([\d,]+)")
_BUNDLE_LOG: dict[str, Path] = {}


def log_bundles() -> Path:
    """Have libtpu log to a directory of this run's own, unbuffered, and return it: libtpu
    logs the size of each program it compiles ("final program bundle count": VLIW bundles),
    the same in every compile, where the wall clock of a shared machine is not (the v6e
    baseline compiled in 4.5 to 8.6 s in one run). It is not the compile time (XLA:TPU's
    passes before code generation count too), but a change that shrinks the generated code
    shows in it whatever the load. Read when libtpu loads: call it before the first
    compile."""
    log_dir = Path(tempfile.mkdtemp(prefix="scalify-tpu-benchmark-"))
    os.environ["TPU_LOG_DIR"] = str(log_dir)
    os.environ["LIBTPU_INIT_ARGS"] = f"{os.environ.get('LIBTPU_INIT_ARGS', '')} --logbuflevel=-1"
    return log_dir


def last_bundle_count(log_dir: Path | None) -> int | None:
    """The VLIW bundles of the program libtpu compiled last into ``log_dir``, from its log;
    None where there is no count (no such log, or a libtpu that does not log it)."""
    if log_dir is None:
        return None
    counts = [found for path in sorted(log_dir.glob("*.INFO.*")) if not path.is_symlink()
              for found in _BUNDLES.findall(path.read_text(errors="replace"))]
    return int(counts[-1].replace(",", "")) if counts else None


def compile_counted(text: str, chip: str) -> tuple[TargetCompileResult, int | None]:
    """``tpu.compile_module`` and the compiled program's bundle count (None unless
    ``main`` set up the log with ``log_bundles``)."""
    result = tpu.compile_module(text, chip)
    return result, last_bundle_count(_BUNDLE_LOG.get("dir"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_arguments(parser, layers=12, d_model=768, heads=12, context=256)
    parser.add_argument("--chips", nargs="+", default=list(CHIPS), choices=CHIPS)
    parser.add_argument("--sharded-layers", type=int, default=2,
                        help="layers of the v5e:2x4 sharded step (%(default)s)")
    parser.add_argument("--no-sharded", action="store_true", help="skip the v5e:2x4 step")
    parser.add_argument("--no-default", action="store_true",
                        help="skip the default policy (f16 data: minutes of compile at the "
                        "GPT-2-small shape, and no TPU target uses it)")
    parser.add_argument("--no-single", action="store_true",
                        help="skip the dots and the single-chip steps (the sharded step only)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 layer of d 64, v6e only, no doc")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/tpu.json; a --quick run's goes to "
                        "the temporary directory, never over the published results)")
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument("--compile-rounds", type=int, default=1,
                        help="compiles of each single-chip module, in alternation (%(default)s):"
                        " compile time is the median, its ratio the median of each round's "
                        "ratio to the baseline's compile (one compile on a shared machine "
                        "varies by tens of %%); cycles and fusions do not vary")
    parser.add_argument("--heading", default=HEADING,
                        help="the docs/benchmarks.md section to write (%(default)s): a run of "
                        "some chips or another shape goes beside the full table, not over it")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.heads, args.context = 1, 64, 2, 32
        args.chips, args.sharded_layers, args.no_doc = ["v6e"], 1, True
    if args.compile_rounds < 1:
        parser.error("--compile-rounds must be at least 1")
    args.out = output_path(args.out, RESULTS / "tpu.json", args.quick)
    return args


def policies(chip: str, default: bool = True) -> dict[str, Policy]:
    chosen = {"default policy": Policy()} if default else {}
    chosen["target policy"] = Policy.for_target(chip)
    # What the dithering of the bf16 update costs (it keeps updates below half a bf16 ulp).
    chosen["target policy, nearest"] = Policy.for_target(chip, update_rounding="nearest")
    if Policy.for_target(chip).fp8_dots:
        chosen["target policy, no FP8"] = Policy.for_target(chip, fp8_dots=False)
        chosen["FP8 floor"] = Policy.for_target(chip, fp8_scaling="none")
    return chosen


def row(chip: str, name: str, result: TargetCompileResult,
        base: TargetCompileResult | None, compiles: list[float] | None = None,
        base_compiles: list[float] | None = None,
        bundles: tuple[int | None, int | None] = (None, None)) -> dict[str, Any]:
    """One table row; ``compiles`` (and the baseline's ``base_compiles``, round by round):
    the seconds of each compile when there were several; ``bundles``: the program's bundle
    count and the baseline's."""
    out = {"chip": chip, "variant": name, **result.as_dict(), "bundles": bundles[0]}
    if bundles[0] is not None and bundles[1] is not None and base is not None:
        out["bundles_ratio"] = bundles[0] / bundles[1]
    if compiles:
        out["compile_s"] = statistics.median(compiles)
        out["compile_rounds_s"] = compiles
    if base is not None:
        out["cycles_ratio"] = result.estimated_cycles / base.estimated_cycles
        out["fusions_ratio"] = result.fusions / base.fusions
        out["compile_ratio"] = (paired_ratio(compiles, base_compiles)
                                if compiles and base_compiles
                                else result.compile_s / base.compile_s)
    print(f"{chip:6s} {name:22s} cycles {result.estimated_cycles:>10d} "
          f"fusions {result.fusions:5d} bundles {bundles[0] or 0:>9,d} "
          f"compile {out['compile_s']:7.1f}s "
          f"args {result.argument_bytes / 2**20:6.1f} MiB temp {result.temp_bytes / 2**20:6.1f} "
          f"MiB", flush=True)
    return out


def dot_rates(chips: list[str]) -> list[dict[str, Any]]:
    """XLA's cycles of one DOT^3 dot per operand type and chip (f32 accumulation)."""
    rows = []
    for chip in chips:
        cycles = {}
        for name, dtype in (("bf16", jnp.bfloat16), ("fp8 e4m3fn", jnp.float8_e4m3fn),
                            ("int8", jnp.int8)):
            spec = jax.ShapeDtypeStruct((DOT, DOT), dtype)
            out = jnp.int32 if dtype == jnp.int8 else jnp.float32
            result = tpu.compile_jitted(
                lambda a, b, out=out: jax.lax.dot(a, b, preferred_element_type=out),
                spec, spec, target=chip)
            cycles[name] = result.estimated_cycles
        rows.append({"chip": chip, **cycles})
        print(f"{chip}: {DOT}^3 dot cycles {cycles}", flush=True)
    return rows


def single_chip(args: argparse.Namespace, models: Any) -> list[dict[str, Any]]:
    config = gpt_config(args)
    step, example = models.gpt_step(**config)
    text = models.export_text(step, example)
    baseline_step, baseline_example = models.gpt_step(**config, compute_dtype=jnp.bfloat16)
    baseline = models.export_text(baseline_step, baseline_example)
    rewritten: dict[str, str] = {}
    rows = []
    for chip in args.chips:
        modules = {"bf16 baseline": baseline}
        pipelines = {}
        for name, policy in policies(chip, default=not args.no_default).items():
            # The module a training loop runs from its second call (tpu7x delays statistics).
            pipelines[name] = steady_state_pipeline(policy, partitioned=False)
            if pipelines[name] not in rewritten:
                rewritten[pipelines[name]] = rewrite_or_fail(text, pipelines[name])
            modules[name] = rewritten[pipelines[name]]
        results = compile_rounds(modules, chip, args.compile_rounds)
        base, base_compiles, base_bundles = results["bf16 baseline"]
        rows.append(row(chip, "bf16 baseline", base, None, base_compiles,
                        bundles=(base_bundles, None)))
        for name, (result, compiles, bundles) in list(results.items())[1:]:
            rows.append(row(chip, name, result, base, compiles, base_compiles,
                            (bundles, base_bundles)) | {"pipeline": pipelines[name]})
    return rows


def compile_rounds(modules: dict[str, str], chip: str, rounds: int
                   ) -> dict[str, tuple[TargetCompileResult, list[float], int | None]]:
    """Each module compiled ``rounds`` times in alternation (``common.interleaved``): its
    first result, every compile's seconds (XLA's compile alone, not the parse that
    ``interleaved``'s own clock also counts) and its bundle count. The estimates and counts
    are the same each time; only the compile's wall clock varies with the machine's load."""
    runs: dict[str, list[tuple[TargetCompileResult, int | None]]] = {
        name: [] for name in modules}
    interleaved({name: lambda name=name: runs[name].append(compile_counted(modules[name],
                                                                           chip))
                 for name in modules}, rounds, warmup=0)
    return {name: (results[0][0], [r.compile_s for r, _ in results], results[0][1])
            for name, results in runs.items()}


def shardings(tree: Any, mesh: Any, fsdp: bool) -> Any:
    """Specs of a state tree: replicated, or (FSDP) split on the first axis over ``data``
    where it divides evenly."""
    size = mesh.devices.size

    def spec(leaf: Any) -> jax.ShapeDtypeStruct:
        split = fsdp and leaf.ndim >= 1 and leaf.shape[0] % size == 0
        sharding = NamedSharding(mesh, PartitionSpec("data") if split else PartitionSpec())
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return jax.tree.map(spec, tree)


def sharded_text(models: Any, config: dict[str, int], mesh: Any, fsdp: bool,
                 compute_dtype: Any = None) -> str:
    step, (params, opt_state, tokens, targets) = models.gpt_step(**config,
                                                                 compute_dtype=compute_dtype)
    batch = NamedSharding(mesh, PartitionSpec("data"))
    specs = (shardings(params, mesh, fsdp), shardings(opt_state, mesh, fsdp),
             jax.ShapeDtypeStruct(tokens.shape, tokens.dtype, sharding=batch),
             jax.ShapeDtypeStruct(targets.shape, targets.dtype, sharding=batch))
    return jax.jit(step).lower(*specs).as_text(debug_info=True)


def sharded(args: argparse.Namespace, models: Any) -> list[dict[str, Any]]:
    config = gpt_config(args, layers=args.sharded_layers)
    mesh = tpu.mesh(SHARDED)
    config["batch"] = max(config["batch"], mesh.devices.size)
    pipeline = steady_state_pipeline(Policy.for_target(SHARDED), partitioned=True)
    rows = []
    for setup, fsdp in (("data parallel", False), ("FSDP", True)):
        base, base_bundles = compile_counted(
            sharded_text(models, config, mesh, fsdp, jnp.bfloat16), SHARDED)
        rows.append(row(SHARDED, f"{setup}: bf16 baseline", base, None,
                        bundles=(base_bundles, None)) | {"setup": setup})
        text = rewrite_or_fail(sharded_text(models, config, mesh, fsdp), pipeline)
        result, bundles = compile_counted(text, SHARDED)
        rows.append(row(SHARDED, f"{setup}: target policy", result, base,
                        bundles=(bundles, base_bundles)) | {"setup": setup})
    return rows


def collectives(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def compile_rounds_text(rounds: int) -> str:
    if rounds == 1:
        return ", one compile of each module (it varies by tens of % from run to run)"
    return (f", the median of {rounds} compiles of each module in alternation, its ratio the "
            "median of each round's ratio to the baseline's compile")


def bundles_note(r: dict[str, Any]) -> str:
    """The bundle ratio beside a compile-time ratio, where the log gave one."""
    return f"; its bundles {r['bundles_ratio']:.2f}x" if "bundles_ratio" in r else ""


def doc_section(result: dict[str, Any]) -> str:
    rows = result["single_chip"]
    table = markdown_table(
        ["chip", "variant", "est. cycles", "vs baseline", "fusions", "vs baseline",
         "compile (s)", "vs baseline", "bundles", "vs baseline", "arguments (MiB)",
         "temporaries (MiB)"],
        [[r["chip"], r["variant"], f"{r['estimated_cycles']:,}",
          f"{r['cycles_ratio']:.2f}x" if "cycles_ratio" in r else "",
          r["fusions"], f"{r['fusions_ratio']:.2f}x" if "fusions_ratio" in r else "",
          f"{r['compile_s']:.1f}", f"{r['compile_ratio']:.2f}x" if "compile_ratio" in r else "",
          f"{r['bundles']:,}" if r.get("bundles") else "-",
          f"{r['bundles_ratio']:.2f}x" if "bundles_ratio" in r else "",
          f"{r['argument_bytes'] / 2**20:.1f}", f"{r['temp_bytes'] / 2**20:.1f}"] for r in rows])
    checks = []
    for r in rows:
        if r["variant"] != "target policy":
            continue
        ok_cycles = r["cycles_ratio"] <= MAX_CYCLES[r["chip"]]
        checks.append(f"* {r['chip']}: estimated cycles at most {MAX_CYCLES[r['chip']]}x the "
                      f"baseline: **{verdict(ok_cycles)}** ({r['cycles_ratio']:.2f}x); fusions "
                      f"at most {MAX_FUSIONS}x: **{verdict(r['fusions_ratio'] <= MAX_FUSIONS)}**"
                      f" ({r['fusions_ratio']:.2f}x); compile time at most {MAX_COMPILE}x: "
                      f"**{verdict(r['compile_ratio'] <= MAX_COMPILE)}** "
                      f"({r['compile_ratio']:.2f}x{bundles_note(r)}).")
    dots = markdown_table(
        ["chip", "bf16", "FP8 E4M3FN", "int8", "FP8 / bf16"],
        [[d["chip"], f"{d['bf16']:,}", f"{d['fp8 e4m3fn']:,}", f"{d['int8']:,}",
          f"{d['fp8 e4m3fn'] / d['bf16']:.2f}"] for d in result["dots"]])
    parts = [
        "`python benchmarks/tpu.py` (libtpu from the `tpu-aot` extra; `--quick` for a smoke "
        "run). **Every cycle, byte and fusion figure is XLA:TPU's estimate or count from an "
        "ahead-of-time compile on a CPU-only machine, not a measurement on a TPU**; compile "
        "time is this shared 2-core machine's wall clock (load average "
        f"{result['load_before']} at the start, {result['load_after']} at the end)"
        f"{compile_rounds_text(result.get('compile_rounds', 1))}. "
        f"Command: `{result.get('command', 'python benchmarks/tpu.py')}`. "
        f"Step: {result['label']} (Adam), one chip each. *bf16 baseline*: "
        "`gpt_step(compute_dtype=bf16)` under `jax.jit`; *default policy*: `Policy()` (f16 "
        "data, FP8 dots); *target policy*: `Policy.for_target(chip)` (bf16 data; statistics "
        "not grouped, scales not packed; the arguments' scales folded on v6e; FP8 dots and "
        "delayed statistics on tpu7x only: "
        "there the module a training loop runs from its second call, "
        "`delayed-statistics=use`); *FP8 floor* (tpu7x): the target policy with "
        "each FP8 operand cast as it is (`fp8_scaling=\"none\"`: no amax, no shift), the "
        "least an FP8 step of this recipe costs; *nearest*: the target policy with its "
        "update rounded to nearest (`update_rounding=\"nearest\"`) instead of dithered, "
        "what the stochastic rounding of bf16 weights and Adam state costs. *est. "
        "cycles*: XLA's `estimated_cycles` "
        "summed over the step's kernels (the step is unrolled: no loop to weight). "
        "*bundles*: the VLIW bundles of the compiled program (libtpu's log, `final program "
        "bundle count`), the size of the code XLA:TPU generated: a count, the same in every "
        "compile, where the wall clock varies with this machine's load (not the compile time "
        "itself: the passes before code generation count too). *arguments*, *temporaries*: "
        "`memory_analysis()`.",
        table, "\n".join(checks),
        f"XLA's estimated cycles of one {DOT}x{DOT}x{DOT} dot (f32 / i32 accumulation): FP8 "
        "is faster than bf16 only on tpu7x, which is why only tpu7x gets FP8 dots.",
        dots,
    ]
    if result.get("sharded"):
        srows = result["sharded"]
        parts += [
            f"Sharded on {SHARDED} (8 chips, Shardy): {result['sharded_label']}, batch over "
            "8 (data parallel); FSDP also splits parameters and Adam state on their first "
            "axis where it divides by 8. Target policy (bf16 data, no FP8), the program a call "
            "fed the one before's outputs runs (statistics delayed; bf16 data, with f32's "
            "exponent range, has no run-time statistic to delay). Collectives by "
            "opcode in the optimized HLO (async pairs once; scalar ones also counted apart).",
            markdown_table(
                ["setup", "est. cycles", "vs baseline", "fusions", "bundles", "collectives"],
                [[r["variant"], f"{r['estimated_cycles']:,}",
                  f"{r['cycles_ratio']:.2f}x" if "cycles_ratio" in r else "", r["fusions"],
                  f"{r['bundles']:,}" if r.get("bundles") else "-",
                  collectives(r["collectives"])] for r in srows]),
        ]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not tpu.libtpu_available():
        raise SystemExit("needs libtpu: pip install -e '.[tpu-aot]'")
    _BUNDLE_LOG["dir"] = log_bundles()
    models = load_models()
    result: dict[str, Any] = {"environment": environment(), "load_before": load_average(),
                              "command": shlex.join(["python", "benchmarks/tpu.py",
                                                     *(argv if argv is not None
                                                       else sys.argv[1:])]),
                              "label": gpt_label(gpt_config(args)),
                              "compile_rounds": args.compile_rounds}
    result["dots"] = [] if args.no_single else dot_rates(args.chips)
    result["single_chip"] = [] if args.no_single else single_chip(args, models)
    if not args.no_sharded:
        result["sharded_label"] = gpt_label(gpt_config(args, layers=args.sharded_layers))
        result["sharded"] = sharded(args, models)
    result["load_after"] = load_average()
    print(format_table(["chip", "variant", "cycles x", "fusions x", "compile x", "bundles x"],
                       [[r["chip"], r["variant"], f"{r.get('cycles_ratio', 1):.2f}",
                         f"{r.get('fusions_ratio', 1):.2f}", f"{r.get('compile_ratio', 1):.2f}",
                         f"{r.get('bundles_ratio', 1):.2f}"]
                        for r in result["single_chip"] + result.get("sharded", [])]))
    publish(args.out, result, args.heading, doc_section, doc=not args.no_doc)


if __name__ == "__main__":
    main()
