"""How much bigger the rewritten program is: StableHLO ops, and what XLA:CPU makes of them.

Why this script exists: scalify turns every floating tensor into a (data, scale) pair and adds
scalar scale arithmetic. The StableHLO op count grows, but what costs time at run time is what
XLA compiles it into: if the scale arithmetic fuses into the kernels that use it, the compiled
program has the same kernels as the original. So this script counts both, for the original step
and for its rewrite in two modes: f32 (``inline,scalify{data-dtype=f32},simplify``: the same
numbers, so any growth is the scale bookkeeping alone) and the default policy (f16 data, FP8
dots, rescale at gradients: what a user gets).

What is counted (``common.hlo_counts``, on ``compiled_hlo_text``, XLA's optimized HLO):

* StableHLO ops: every operation of the module except ``builtin.module`` (``--stats``). The
  baseline is the original after ``inline`` (the rewrite inlines JAX's private functions, so
  the un-inlined count is not like for like; it is reported too);
* fusions: every HLO instruction with opcode ``fusion`` (``... = f32[..] fusion(...),
  kind=kLoop, calls=%fused_computation...``), in any computation, by kind. On XLA:CPU each is
  one generated loop nest or, for ``kCustom``, one library call (XNNPACK dots);
* scalar fusions: the fusions whose results are all rank 0 (``f32[]``);
* executed: instructions of ENTRY and of while/conditional bodies other than parameter,
  constant, tuple, get-tuple-element and bitcast: the thunks the runtime runs per step.

Counted for two compiled programs of the rewrite:

* *module*: the rewritten module compiled as is (``scalify-hlo rewrite`` then XLA), one buffer
  per scale in its signature;
* *compile_scaled*: the program ``compile_scaled`` runs (``ScaledStep.lower``, the state from
  ``scale_args``): the same module inside a ``jax.jit`` that takes and returns the scales as
  one f32 vector per call, so a step's returned scales are one kernel, not one each.

Also, with the ``gpu-aot`` extra (``scalify_hlo.gpu_aot``), the original and the rewritten
module compiled without a GPU for an H100 SXM (Triton GEMM off, so that FP8 dots show as
``__cublas$lt$matmul$f8`` calls): fusions (kernels launched per step), optimized HLO
instructions and FP8 GEMMs.

Target: at most 1.2x the original's fusions (XLA:CPU, and the H100 target where measured).

    python benchmarks/program_growth.py            # sample steps + a 2-layer GPT step
    python benchmarks/program_growth.py --quick    # sample steps only, no doc

Results: ``docs/results/program_growth.json`` and the "Program growth" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from common import (
    RESULTS,
    SCALIFY_F32,
    add_gpt_arguments,
    count_module_ops,
    environment,
    format_table,
    gpt_config,
    gpt_label,
    hlo_counts,
    load_models,
    markdown_table,
    output_path,
    publish,
    rewrite_or_fail,
    sample_step_texts,
    verdict,
)

from scalify_hlo import compile_scaled, gpu_aot
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.runner import compiled_hlo_text

MODES = {"f32": SCALIFY_F32, "default": DEFAULT_PIPELINE}

MAX_FUSION_RATIO = 1.2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_arguments(parser)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES),
                        help="rewrites: f32 and/or the default policy (%(default)s)")
    parser.add_argument("--no-h100", action="store_true",
                        help="skip the deviceless H100 compiles (skipped anyway without the "
                             "gpu-aot extra)")
    parser.add_argument("--no-gpt", action="store_true", help="sample steps only")
    parser.add_argument("--quick", action="store_true", help="sample steps only, no doc")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/program_growth.json; a --quick "
                        "run's goes to the temporary directory)")
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.no_gpt, args.no_doc = True, True
    args.out = output_path(args.out, RESULTS / "program_growth.json", args.quick)
    return args


def returned_scalar_fusions(hlo_text: str) -> int:
    """Scalar fusions whose result the entry computation returns: the scales a step computes
    for its outputs, one small kernel each on XLA:CPU."""
    entry = hlo_text[hlo_text.index("ENTRY"):]
    root = next((line for line in entry.splitlines() if "ROOT " in line), "")
    names = re.findall(r"%([\w.-]+) = [a-z0-9]+\[\] fusion\(", entry)
    return sum(1 for n in names if re.search(rf"%{re.escape(n)}[,)]", root))


def compile_scaled_hlo(step_fn: Any, example: tuple[Any, ...], pipeline: str) -> str:
    """The optimized HLO of the program a ``compile_scaled`` step runs in a training loop."""
    step = compile_scaled(step_fn, *example, pipeline=pipeline)
    return step.lower(*step.scale_args(*example)).compile().as_text()


def h100_counts(text: str) -> dict[str, Any]:
    return gpu_aot.compile_h100(text).counts()


def measure(name: str, text: str, mode: str, factory: Any, h100: bool) -> dict[str, Any]:
    pipeline = MODES[mode]
    inlined = rewrite_or_fail(text, "inline")
    rewritten = rewrite_or_fail(text, pipeline)
    original_hlo = hlo_counts(compiled_hlo_text(text))
    rewritten_text = compiled_hlo_text(rewritten)
    rewritten_hlo = hlo_counts(rewritten_text)
    ops = {"original": count_module_ops(text), "original_inlined": count_module_ops(inlined),
           "rewritten": count_module_ops(rewritten)}

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    tensor_fusions = (rewritten_hlo.fusions - rewritten_hlo.scalar_fusions,
                      original_hlo.fusions - original_hlo.scalar_fusions)
    step_hlo = hlo_counts(compile_scaled_hlo(*factory, pipeline))
    gpu: dict[str, Any] = {}
    if h100:
        gpu = {"h100_original": h100_counts(text), "h100_rewritten": h100_counts(rewritten)}
        gpu["h100_fusion_ratio"] = ratio(gpu["h100_rewritten"]["fusions"],
                                         gpu["h100_original"]["fusions"])
        gpu["h100_instruction_ratio"] = ratio(gpu["h100_rewritten"]["instructions"],
                                              gpu["h100_original"]["instructions"])
    return {
        "model": name, "mode": mode, "pipeline": pipeline, "ops": ops, **gpu,
        "op_ratio": ratio(ops["rewritten"], ops["original_inlined"]),
        "hlo_original": original_hlo.as_dict(), "hlo_rewritten": rewritten_hlo.as_dict(),
        "fusion_ratio": ratio(rewritten_hlo.fusions, original_hlo.fusions),
        "tensor_fusion_ratio": ratio(*tensor_fusions),
        "executed_ratio": ratio(rewritten_hlo.executed, original_hlo.executed),
        "returned_scalar_fusions": returned_scalar_fusions(rewritten_text),
        "hlo_compile_scaled": step_hlo.as_dict(),
        "compile_scaled_fusion_ratio": ratio(step_hlo.fusions, original_hlo.fusions),
        "compile_scaled_executed_ratio": ratio(step_hlo.executed, original_hlo.executed),
    }


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for r in rows:
        o, w = r["hlo_original"], r["hlo_rewritten"]
        out.append([r["model"], r["mode"], r["ops"]["original_inlined"], r["ops"]["rewritten"],
                    f"{r['op_ratio']:.2f}", o["fusions"], w["fusions"],
                    f"{r['fusion_ratio']:.2f}",
                    f"{o['scalar_fusions']} -> {w['scalar_fusions']} "
                    f"({w['scalar_fusions_expensive']})",
                    f"{r['tensor_fusion_ratio']:.2f}", o["executed"], w["executed"],
                    f"{r['executed_ratio']:.2f}", r["hlo_compile_scaled"]["fusions"],
                    f"{r['compile_scaled_fusion_ratio']:.2f}",
                    r["hlo_compile_scaled"]["executed"],
                    f"{r['compile_scaled_executed_ratio']:.2f}"])
    return out


def h100_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for r in rows:
        o, w = r["h100_original"], r["h100_rewritten"]
        out.append([r["model"], r["mode"], o["fusions"], w["fusions"],
                    f"{r['h100_fusion_ratio']:.2f}", o["instructions"], w["instructions"],
                    f"{r['h100_instruction_ratio']:.2f}",
                    f"{o['rank0_instructions']} -> {w['rank0_instructions']}",
                    w["cublas_f8"]])
    return out


H100_HEADERS = ["model", "mode", "H100 fusions", "fusions rewritten", "fusions x",
                "HLO instructions", "instructions rewritten", "instructions x",
                "rank-0 instructions", "FP8 GEMMs"]
HEADERS = ["model", "mode", "ops", "ops rewritten", "ops x", "fusions", "fusions module",
           "fusions x", "scalar fusions (expensive)", "non-scalar fusions x", "executed",
           "executed module", "executed x", "fusions compile_scaled", "fusions x",
           "executed compile_scaled", "executed x"]


def doc_section(result: dict[str, Any]) -> str:
    rows = result["models"]
    worst = max(rows, key=lambda r: r["fusion_ratio"])
    worst_step = max(rows, key=lambda r: r["compile_scaled_fusion_ratio"])
    f32_rows = [r for r in rows if r["mode"] == "f32"] or rows
    expensive = sum(r["hlo_rewritten"]["scalar_fusions_expensive"] for r in f32_rows)
    scalar = sum(r["hlo_rewritten"]["scalar_fusions"] for r in f32_rows)
    modes = ", ".join(f"*{m}*: `{MODES[m]}`" for m in result["modes"])
    h100 = []
    if result["h100"]:
        worst_gpu = max(rows, key=lambda r: r["h100_fusion_ratio"])
        h100 = ["", "The original and the rewritten module compiled without a GPU for an H100 "
                "SXM (`scalify_hlo.gpu_aot`, Triton GEMM off so that FP8 dots show as "
                "cuBLASLt calls; *FP8 GEMMs*: `__cublas$lt$matmul$f8` calls; *rank-0*: "
                "instructions with a scalar result, fused ones included):", "",
                markdown_table(H100_HEADERS, h100_rows(rows)), "",
                f"* At most {MAX_FUSION_RATIO}x the original's fusions on the H100 target: "
                f"**{verdict(result['h100_target_met'])}** (worst: {worst_gpu['model']}, "
                f"{worst_gpu['mode']}, {worst_gpu['h100_fusion_ratio']:.2f}x)."]
    else:
        h100 = ["", "H100 target: not measured (needs the `gpu-aot` extra)."]
    return "\n".join([
        "`python benchmarks/program_growth.py`. Each step as exported (*original*) and "
        f"rewritten in each mode ({modes}), both compiled with XLA:CPU "
        "(`compiled_hlo_text`). *ops*: StableHLO operations of the original after `inline` "
        "(the like-for-like baseline: the rewrite inlines JAX's private functions) and of the "
        "rewrite. *fusions*: HLO instructions with opcode `fusion` in the optimized module "
        "(any kind: `kLoop` loop nests, `kCustom` XNNPACK dots); *scalar fusions*: those whose "
        "results are all rank 0, in brackets those of the rewrite that contain an op XLA's "
        "fusion heuristics call expensive (divide, sqrt, power, exp, ...); *non-scalar "
        "fusions x*: the ratio of the others; *executed*: instructions of ENTRY and "
        "while/conditional "
        "bodies other than parameter, constant, tuple, get-tuple-element and bitcast (the "
        "thunks run per step). *module*: the rewritten module compiled as is (one buffer per "
        "scale); *compile_scaled*: the program a `compile_scaled` step runs (the same module "
        "in a `jax.jit` that takes and returns the scales as one f32 vector per call; state "
        "from `scale_args`). Counts, not timings: deterministic for a given jaxlib.",
        "", markdown_table(HEADERS, table_rows(rows)), "",
        f"* At most {MAX_FUSION_RATIO}x the original's fusions, the `compile_scaled` "
        f"program: **{verdict(result['target_met'])}** (worst: {worst_step['model']}, "
        f"{worst_step['mode']}, {worst_step['compile_scaled_fusion_ratio']:.2f}x). The module "
        f"compiled as is: **{verdict(result['module_target_met'])}** (worst: "
        f"{worst['model']}, {worst['mode']}, {worst['fusion_ratio']:.2f}x).",
        f"* f32 mode: without the scalar fusions the worst ratio is "
        f"{max(r['tensor_fusion_ratio'] for r in f32_rows):.2f}x: the scale arithmetic (i32 "
        "exponents) fuses into the tensor kernels that use it; what is left over are small "
        "vectors: the bank of a `compile_scaled` program, the loop-invariant scales that "
        "`simplify` (`hoist-loop-scales`) computes before a while loop, up to 8 per kernel, "
        "where XLA's own loop-invariant code motion would make each one a scalar kernel (the "
        "scan step had 1.32x fusions before that pass), and the scales computed from the "
        "arguments alone, which `simplify` packs the same way (`pack-scales`). The scalar "
        "fusions that remain are the f32 scales a step computes for its results, one small "
        "kernel each in the module, about one per eight in the `compile_scaled` program, "
        "which builds them as one vector ("
        + ", ".join(f"{r['model']}: {r['returned_scalar_fusions']} of "
                    f"{r['hlo_rewritten']['scalar_fusions']}" for r in f32_rows)
        + " scalar fusions of the module are returned: Adam gives its parameters and moments "
        "new scales every step, SGD with f32 data keeps each weight's). "
        f"{expensive} of the rewritten steps' {scalar} scalar "
        "fusions contain an op XLA calls expensive.",
        *h100,
    ])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    models = load_models()
    texts = sample_step_texts()
    factories = {name: models.STEPS[name]() for name in texts}
    if not args.no_gpt:
        config = gpt_config(args)
        factory = models.gpt_step(**config)
        texts[gpt_label(config)] = models.export_text(*factory)
        factories[gpt_label(config)] = factory
    h100 = not args.no_h100 and gpu_aot.available()
    rows = []
    for name, text in texts.items():
        for mode in args.modes:
            print(f"{name} {mode} ...", flush=True)
            rows.append(measure(name, text, mode, factories[name], h100))
    worst = max(r["fusion_ratio"] for r in rows)
    worst_step = max(r["compile_scaled_fusion_ratio"] for r in rows)
    result = {"environment": environment(), "modes": args.modes, "models": rows,
              "h100": h100, "max_fusion_ratio": MAX_FUSION_RATIO, "worst_fusion_ratio": worst,
              "worst_compile_scaled_fusion_ratio": worst_step,
              "module_target_met": worst <= MAX_FUSION_RATIO,
              "target_met": worst_step <= MAX_FUSION_RATIO}
    if h100:
        result["worst_h100_fusion_ratio"] = max(r["h100_fusion_ratio"] for r in rows)
        result["h100_target_met"] = result["worst_h100_fusion_ratio"] <= MAX_FUSION_RATIO
    print(format_table(HEADERS, table_rows(rows)))
    if h100:
        print(format_table(H100_HEADERS, h100_rows(rows)))
    print(f"\nfusions <= {MAX_FUSION_RATIO}x original: compile_scaled program "
          f"{verdict(result['target_met'])} (worst {worst_step:.2f}x); module as is "
          f"{verdict(result['module_target_met'])} (worst {worst:.2f}x)")
    for r in rows:
        print(f"  {r['model']} {r['mode']}: fusions by kind "
              f"{r['hlo_original']['fusions_by_kind']} -> "
              f"{r['hlo_rewritten']['fusions_by_kind']}; executed by opcode "
              f"{r['hlo_original']['executed_by_opcode']} -> "
              f"{r['hlo_rewritten']['executed_by_opcode']}")
    publish(args.out, result, "Program growth", doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
