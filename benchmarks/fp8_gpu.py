"""FP8 on a GPU: does a rewritten GPT training step run real FP8 GEMMs, and at what speed?

Why this script exists: ``fp8-dots`` only casts dot operands to FP8 in the pattern XLA:GPU's
GEMM rewriter fuses into cuBLASLt FP8 GEMMs. When that match fails XLA silently upcasts to an
F16/BF16 dot, so the only proof of FP8 is the compiled HLO: the number of
``__cublas$lt$matmul$f8`` custom calls. This script makes that count, and the step time
against plain JAX, one repeatable command.

Steps, for a GPT-style decoder step from ``testdata/models.py`` (default: GPT-2-small shape,
12 layers, d_model 768, 12 heads, context 256; char-level vocabulary 256; Adam):

1. export the step to StableHLO (with locations: they tell gradients from activations);
2. rewrite it with ``DEFAULT_PIPELINE`` (timed) and count the dot_generals that take FP8
   operands in the rewritten module, by format pair;
3. on a GPU with compute capability >= 8.9 (Ada, Hopper and later): compile the rewritten
   module, count FP8 cuBLASLt calls in the compiled HLO, keep a few of those lines, and time
   the step (``block_until_ready``; interleaved rounds, ratios paired per round) against two
   baselines under ``jax.jit``: the same step in f32, and its bf16 mixed-precision form
   (f32 parameters and Adam state, forward and backward on parameters cast to bf16, so that
   every dot runs in bf16; casting the parameters and state themselves leaves most backward
   dots in f32, through the f32 one-hot targets, which would flatter FP8);
4. without such a GPU: say so in the output and the JSON, and compile the rewritten module
   on XLA:CPU to show that it compiles (``--cpu-run`` also runs it once and compares the loss
   with the f32 step). XLA:CPU emulates FP8, so CPU timings say nothing about FP8 speed.

Targets (on the GPU): every FP8 dot of the module a ``__cublas$lt$matmul$f8`` call, and the
step at least 1.3x faster than the bf16 mixed-precision step (paired median over rounds).

Results go to ``docs/results/fp8_gpu.json`` (``--out`` to change) and the "FP8 on a GPU"
section of ``docs/benchmarks.md`` (``--no-doc`` to leave it). Smoke test:
``python benchmarks/fp8_gpu.py --layers 1 --d-model 64 --heads 4 --context 32 --batch 2 --no-doc``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    RESULTS,
    environment,
    format_table,
    interleaved,
    load_models,
    markdown_table,
    paired_ratio,
    publish,
    summary,
    timed,
    verdict,
)
from jax.extend.mlir import ir

from scalify_hlo import ir as hlo_ir
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.runner import compile_module, run_executable
from scalify_hlo.signature import (
    entry_signature,
    input_data_dtypes,
    join_outputs,
    split_inputs,
)

SECTION = "FP8 on a GPU"
MIN_SPEEDUP_VS_BF16 = 1.3
F8_GEMM = "__cublas$lt$matmul$f8"
OTHER_GEMMS = ("__cublas$lt$matmul", "__cublas$gemm")
MIN_CAPABILITY = (8, 9)
SAMPLE_LINES = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12, help="decoder layers (%(default)s)")
    parser.add_argument("--d-model", type=int, default=768, help="model width (%(default)s)")
    parser.add_argument("--heads", type=int, default=12, help="attention heads (%(default)s)")
    parser.add_argument("--context", type=int, default=256, help="sequence length (%(default)s)")
    parser.add_argument("--batch", type=int, default=8, help="batch size (%(default)s)")
    parser.add_argument("--vocab", type=int, default=256, help="vocabulary (%(default)s)")
    parser.add_argument("--repeats", type=int, default=20,
                        help="timed rounds, each one step of every variant (%(default)s)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds (%(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "fp8_gpu.json",
                        help="JSON results (%(default)s)")
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument("--no-cpu-compile", action="store_true",
                        help="without a suitable GPU, skip the XLA:CPU compile")
    parser.add_argument("--cpu-run", action="store_true",
                        help="without a suitable GPU, also run the rewritten step once on "
                             "XLA:CPU and compare its loss with the f32 step")
    args = parser.parse_args(argv)
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    return args


# ----- what the rewrite produced ----------------------------------------------------------
def dot_dtypes(text: str) -> dict[str, int]:
    """dot_generals of a module by operand element types: what a baseline really runs
    (JAX's type promotion can turn a "bf16" step's dot into an f32 one)."""
    kinds: Counter[str] = Counter()
    with hlo_ir.ir_context():
        module = hlo_ir.parse_module(text)

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "stablehlo.dot_general":
                kinds["x".join(str(ir.ShapedType(v.type).element_type)
                               for v in op.operands)] += 1
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return dict(kinds)


def count_fp8_dots(text: str) -> dict[str, Any]:
    """dot_generals in the rewritten module and, among them, those with FP8 operands, read
    from the module itself (not from the pass's own statistics)."""
    kinds = dot_dtypes(text)
    fp8 = {k: n for k, n in kinds.items() if all(t.startswith("f8") for t in k.split("x"))}
    return {"dot_general": sum(kinds.values()), "fp8": sum(fp8.values()), "by_formats": fp8,
            "others": {k: n for k, n in kinds.items() if k not in fp8}}


def gemm_calls(hlo_text: str) -> dict[str, Any]:
    """cuBLAS custom calls in compiled HLO; the FP8 one is the proof of FP8 GEMMs."""
    targets = Counter(line.split('custom_call_target="', 1)[1].split('"', 1)[0]
                      for line in hlo_text.splitlines() if 'custom_call_target="' in line)
    samples = [line.strip()[:600] for line in hlo_text.splitlines()
               if f'custom_call_target="{F8_GEMM}"' in line][:SAMPLE_LINES]
    return {
        "cublas_f8": targets.get(F8_GEMM, 0),
        "cublas_other": {t: targets[t] for t in OTHER_GEMMS if targets.get(t)},
        "triton_gemm_fusions": hlo_text.count('"kind":"__triton_gemm"'),
        "f8_sample_lines": samples,
    }


# ----- the GPU ----------------------------------------------------------------------------
def fp8_gpu_status() -> tuple[bool, str]:
    """Whether this process sees a GPU that cuBLASLt runs FP8 GEMMs on, and why not."""
    try:
        device = jax.devices()[0]
    except RuntimeError as exc:  # no backend at all
        return False, f"no JAX device: {exc}"
    if device.platform != "gpu":
        return False, f"no GPU: JAX's default device is {device.platform} ({device})"
    capability = getattr(device, "compute_capability", None)
    try:
        major, minor = (int(x) for x in str(capability).split(".")[:2])
    except ValueError:
        return False, f"GPU {device.device_kind}: unknown compute capability {capability!r}"
    if (major, minor) < MIN_CAPABILITY:
        return False, (f"GPU {device.device_kind} has compute capability {major}.{minor}; "
                       f"FP8 GEMMs need >= {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}")
    return True, f"GPU {device.device_kind}, compute capability {major}.{minor}"


@dataclass
class Step:
    """The exported step and everything needed to feed its rewritten form."""

    fn: Any
    bf16_fn: Any  # the same step in bf16 mixed precision (same arguments)
    args: tuple[Any, ...]
    text: str
    rewritten: str


def scaled_inputs(step: Step) -> tuple[Any, list[np.ndarray]]:
    signature = entry_signature(step.text)
    leaves = [np.asarray(x) for x in jax.tree.leaves(step.args)]
    dtypes = input_data_dtypes(signature, entry_signature(step.rewritten))
    return signature, split_inputs(signature, leaves, data_dtype=dtypes)


def run_gpu(step: Step, args: argparse.Namespace) -> dict[str, Any]:
    """Compile the rewritten module on the GPU, count its FP8 cuBLASLt GEMMs, and time it
    against ``jax.jit`` of the step in f32 and in bf16, interleaved (one step of each per
    round, the order reversed every other round) so that every ratio is paired per round."""
    executable, compile_s = timed(lambda: compile_module(step.rewritten))
    gemms = gemm_calls(executable.hlo_modules()[0].to_string())
    signature, flat = scaled_inputs(step)
    device = executable.local_devices()[0]
    buffers = [jax.device_put(x, device) for x in flat]
    outputs = [np.asarray(x) for x in executable.execute(buffers)]
    fp8_loss = float(join_outputs(signature, outputs)[-1])

    calls = {"fp8": lambda: jax.block_until_ready(executable.execute(buffers))}
    baselines: dict[str, Any] = {}
    on_device = jax.device_put(step.args, device)
    for name, fn in (("jax_f32", step.fn), ("jax_bf16", step.bf16_fn)):
        jitted = jax.jit(fn)
        _, base_compile_s = timed(lambda j=jitted: jax.block_until_ready(j(*on_device)))
        baselines[name] = {"compile_s": base_compile_s,
                           "loss": float(jitted(*on_device)[-1]),
                           "dot_operand_types": dot_dtypes(jitted.lower(*on_device).as_text())}
        calls[name] = lambda j=jitted: jax.block_until_ready(j(*on_device))
    samples = interleaved(calls, args.repeats, warmup=args.warmup)
    for name, base in baselines.items():
        base["timing"] = summary(samples[name])
        base["time_over_fp8"] = paired_ratio(samples[name], samples["fp8"])
    return {
        "run": True,
        "compile_s": compile_s,
        "gemms": gemms,
        "fp8_step": {"timing": summary(samples["fp8"]), "loss": fp8_loss},
        "baselines": baselines,
        "speedup_vs_bf16": baselines["jax_bf16"]["time_over_fp8"],
        "speedup_vs_f32": baselines["jax_f32"]["time_over_fp8"],
    }


def judge(result: dict[str, Any]) -> dict[str, bool | None]:
    """The two targets; None where the GPU part did not run (nothing was measured)."""
    gpu = result["gpu"]
    if not gpu["run"]:
        return {"every_fp8_dot_fused": None, "speedup_vs_bf16": None}
    fp8_dots = result["fp8_dots"]["fp8"]
    return {"every_fp8_dot_fused": fp8_dots > 0 and gpu["gemms"]["cublas_f8"] >= fp8_dots,
            "speedup_vs_bf16": gpu["speedup_vs_bf16"] >= MIN_SPEEDUP_VS_BF16}


def run_cpu(step: Step, args: argparse.Namespace) -> dict[str, Any]:
    """XLA:CPU compiles (and optionally runs) the rewritten module: structure, not speed."""
    if args.no_cpu_compile:
        return {"compiled": False}
    executable, compile_s = timed(lambda: compile_module(step.rewritten))
    report: dict[str, Any] = {"compiled": True, "compile_s": compile_s}
    if args.cpu_run:
        signature, flat = scaled_inputs(step)
        outputs, run_s = timed(lambda: run_executable(executable, flat))
        reference = jax.jit(step.fn)(*step.args)
        report.update(run_s=run_s, loss_fp8=float(join_outputs(signature, outputs)[-1]),
                      loss_f32=float(reference[-1]))
    return report


# ----- the report -------------------------------------------------------------------------
def print_report(result: dict[str, Any]) -> None:
    config, rewrite, dots = result["config"], result["rewrite"], result["fp8_dots"]
    print(f"GPT step: {config['layers']} layers, d_model {config['d_model']}, "
          f"{config['heads']} heads, context {config['context']}, batch {config['batch']}, "
          f"vocab {config['vocab']}")
    print(f"export {result['export_s']:.2f} s; rewrite ({DEFAULT_PIPELINE}) "
          f"{rewrite['seconds']:.2f} s; ops {rewrite['ops_before']} -> {rewrite['ops_after']}")
    print(f"FP8 dots in the rewritten module: {dots['fp8']} of {dots['dot_general']} "
          f"dot_general {dots['by_formats']}; left in the data dtype by the pass: "
          f"{rewrite['stats'].get('fp8-dots.left-alone', 0)}")
    gpu = result["gpu"]
    if not gpu["run"]:
        print(f"GPU part NOT RUN: {gpu['reason']}")
        cpu = result.get("cpu", {})
        if cpu.get("compiled"):
            line = f"XLA:CPU compiles the rewritten module in {cpu['compile_s']:.2f} s"
            if "loss_fp8" in cpu:
                line += (f"; one step on CPU: loss {cpu['loss_fp8']:.4f} "
                         f"(f32 step {cpu['loss_f32']:.4f})")
            print(line + " (CPU emulates FP8: no speed claim)")
        return
    gemms = gpu["gemms"]
    print(f"{gpu['reason']}; compiled in {gpu['compile_s']:.1f} s; "
          f"{F8_GEMM} calls: {gemms['cublas_f8']}, other cuBLAS GEMMs: "
          f"{gemms['cublas_other'] or 0}, Triton GEMM fusions: {gemms['triton_gemm_fusions']}")
    for name, base in gpu["baselines"].items():
        print(f"  {name} dot_general operand types: {base['dot_operand_types']}")
    print(format_table(TIMING_HEADERS, timing_rows(gpu, {
        "jax_f32": "jax.jit(step), f32", "jax_bf16": "jax.jit(step), bf16 mixed precision"})))
    for line in gemms["f8_sample_lines"]:
        print("  " + line[:200])
    targets = result["targets"]
    print(f"every FP8 dot a cuBLASLt FP8 GEMM ({gemms['cublas_f8']} calls, "
          f"{result['fp8_dots']['fp8']} FP8 dots): {verdict(targets['every_fp8_dot_fused'])}")
    print(f"at least {MIN_SPEEDUP_VS_BF16}x faster than bf16 ({gpu['speedup_vs_bf16']:.2f}x): "
          f"{verdict(targets['speedup_vs_bf16'])}")


TIMING_HEADERS = ["step", "median ms", "min ms", "loss", "time / FP8 time"]


def timing_rows(gpu: dict[str, Any], labels: dict[str, str]) -> list[list[str]]:
    """The FP8 step and each baseline (named by ``labels``): times, loss, paired ratio."""
    fp8 = gpu["fp8_step"]
    rows = [["rewritten module (f16 data, FP8 dots)", f"{fp8['timing']['median_s'] * 1e3:.2f}",
             f"{fp8['timing']['min_s'] * 1e3:.2f}", f"{fp8['loss']:.4f}", "1.00"]]
    rows += [[labels[name], f"{base['timing']['median_s'] * 1e3:.2f}",
              f"{base['timing']['min_s'] * 1e3:.2f}", f"{base['loss']:.4f}",
              f"{base['time_over_fp8']:.2f}"] for name, base in gpu["baselines"].items()]
    return rows


STEP_ROWS = {"jax_f32": "`jax.jit(step)`, f32",
             "jax_bf16": "`jax.jit(step)`, bf16 mixed precision (f32 parameters and Adam "
                         "state, forward and backward in bf16)"}


def doc_section(result: dict[str, Any]) -> str:
    """The ``FP8 on a GPU`` section of docs/benchmarks.md, for a run with or without one."""
    config, dots, gpu = result["config"], result["fp8_dots"], result["gpu"]
    formats = ", ".join(f"{k}: {n}" for k, n in dots["by_formats"].items()) or "none"
    lines = [
        "`python benchmarks/fp8_gpu.py`. The GPT training step of `testdata/models.py` "
        f"({config['layers']} layers, d_model {config['d_model']}, {config['heads']} heads, "
        f"context {config['context']}, batch {config['batch']}, vocab {config['vocab']}; Adam), "
        f"rewritten with `{result['pipeline']}` in {result['rewrite']['seconds']:.2f} s: "
        f"{dots['fp8']} of its {dots['dot_general']} `dot_general`s take FP8 operands "
        f"({formats}; counted in the rewritten module). On a GPU of compute capability 8.9 "
        "or later the script compiles the rewritten module, counts the "
        f"`{F8_GEMM}` custom calls in the compiled HLO (XLA silently upcasts an FP8 dot it "
        "cannot fuse, so this count is the proof of FP8 GEMMs) and times the step against "
        "`jax.jit` of the same step in f32 and in bf16 mixed precision (f32 parameters and "
        "Adam state, forward and backward in bf16: every dot a bf16 dot), interleaved over "
        f"{config['repeats']} rounds (ratios paired per round).",
        "",
    ]
    if not gpu["run"]:
        cpu = result.get("cpu", {})
        lines.append(f"**GPU part not run**: {gpu['reason']}.")
        if cpu.get("compiled"):
            lines.append(f"XLA:CPU compiles the rewritten module in {cpu['compile_s']:.1f} s "
                         "(it emulates FP8: no speed figure from it)"
                         + (f"; one step on CPU gives loss {cpu['loss_fp8']:.4f} against "
                            f"{cpu['loss_f32']:.4f} for the f32 step." if "loss_fp8" in cpu
                            else "."))
        lines += ["", "* Every FP8 dot a cuBLASLt FP8 GEMM: **not measured** (no GPU).",
                  f"* At least {MIN_SPEEDUP_VS_BF16}x faster than bf16: **not measured** "
                  "(no GPU)."]
        return "\n".join(lines)
    gemms, targets = gpu["gemms"], result["targets"]
    lines += [
        f"{gpu['reason']}. Compiled HLO of the rewritten step: {gemms['cublas_f8']} "
        f"`{F8_GEMM}` calls for {dots['fp8']} FP8 dots; other cuBLAS GEMMs: "
        f"{gemms['cublas_other'] or 'none'}; Triton GEMM fusions: "
        f"{gemms['triton_gemm_fusions']}. Operand types of the baselines' dots: "
        + "; ".join(f"{name}: {base['dot_operand_types']}"
                    for name, base in gpu["baselines"].items()) + ".",
        "", markdown_table(TIMING_HEADERS, timing_rows(gpu, STEP_ROWS)),
        "", "Compiled HLO lines of FP8 GEMMs (first few, cut at 600 characters):", "",
        "```text", *gemms["f8_sample_lines"], "```", "",
        f"* Every FP8 dot a cuBLASLt FP8 GEMM: **{verdict(targets['every_fp8_dot_fused'])}**.",
        f"* At least {MIN_SPEEDUP_VS_BF16}x faster than bf16 (paired median "
        f"{gpu['speedup_vs_bf16']:.2f}x): **{verdict(targets['speedup_vs_bf16'])}**.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    models = load_models()
    shape = {"n_layers": args.layers, "d_model": args.d_model, "n_heads": args.heads,
             "context": args.context, "vocab": args.vocab, "batch": args.batch,
             "seed": args.seed}
    step_fn, example_args = models.gpt_step(**shape)
    bf16_fn, _ = models.gpt_step(**shape, compute_dtype=jnp.bfloat16)
    text, export_s = timed(lambda: models.export_text(step_fn, example_args))
    chunk, rewrite_s = timed(lambda: rewrite_module_source(text, DEFAULT_PIPELINE,
                                                                 count_ops=True))
    if chunk.error is not None or chunk.output is None:
        print(f"rewrite failed: {chunk.error}", file=sys.stderr)
        return 1
    step = Step(step_fn, bf16_fn, example_args, text, chunk.output.decode())
    result: dict[str, Any] = {
        "config": {"layers": args.layers, "d_model": args.d_model, "heads": args.heads,
                   "context": args.context, "batch": args.batch, "vocab": args.vocab,
                   "repeats": args.repeats, "warmup": args.warmup, "seed": args.seed},
        "environment": environment(),
        "pipeline": DEFAULT_PIPELINE,
        "export_s": export_s,
        "rewrite": {"seconds": rewrite_s, "ops_before": sum(chunk.ops_before.values()),
                    "ops_after": sum(chunk.ops_after.values()),
                    "stats": {k: v for k, v in chunk.context.stats.items()
                              if k.startswith("fp8-dots")},
                    "warnings": len(chunk.context.warnings),
                    "first_warnings": chunk.context.warnings[:5]},
        "fp8_dots": count_fp8_dots(step.rewritten),
    }
    ok, reason = fp8_gpu_status()
    if ok:
        try:
            result["gpu"] = {"reason": reason, **run_gpu(step, args)}
        except ScalifyError as exc:  # XLA:GPU rejected the module: a result worth recording
            result["gpu"] = {"run": False, "reason": f"{reason}; {exc}"}
    else:
        result["gpu"] = {"run": False, "reason": reason,
                         "note": "GPU part not run: no FP8 GEMM count and no step timing"}
        result["cpu"] = run_cpu(step, args)
    result["targets"] = judge(result)
    print_report(result)
    publish(args.out, result, SECTION, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
