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
   With the ``gpu-aot`` extra (``--no-h100`` to skip), also compile the rewritten step and
   the bf16 baseline without a GPU for an H100 SXM (``scalify_hlo.gpu_aot``): FP8 cuBLASLt
   calls (Triton GEMM off: without a device XLA cannot autotune, and with Triton on every dot
   becomes a Triton fusion; that default-flag structure is reported beside it), fusions of
   both steps, and a roofline ESTIMATE of both steps' time from the compiled programs: per
   kernel (fusion, library call, copy) the larger of bytes accessed / HBM bandwidth and flops
   / the peak rate of its dtype (989 TFLOP/s bf16 and f16, 1979 FP8, dense, H100 SXM; GEMM
   flops from the cuBLAS call's shapes, one flop per output element elsewhere), summed, plus
   a per-launch cost. An estimate, not a measurement: it shows progress toward 1.3x before a
   GPU measures it.

Targets (on the GPU): every FP8 dot of the module a ``__cublas$lt$matmul$f8`` call, and the
step at least 1.3x faster than the bf16 mixed-precision step (paired median over rounds).

Results go to ``docs/results/fp8_gpu.json`` (``--out`` to change) and the "FP8 on a GPU"
section of ``docs/benchmarks.md`` (``--no-doc`` to leave it). Smoke test:
``python benchmarks/fp8_gpu.py --layers 1 --d-model 64 --heads 4 --context 32 --batch 2 --no-doc``.
"""

from __future__ import annotations

import argparse
import math
import re
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
    control_computations,
    environment,
    format_table,
    hlo_computations,
    hlo_instruction,
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

from scalify_hlo import gpu_aot, module_io
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
# H100 SXM, for the roofline estimate: HBM bandwidth from the target spec the compile uses,
# dense tensor-core peaks by operand dtype (TF32 for f32 dots), the vector f32 peak for
# everything else, and a kernel launch.
HBM_BYTES_PER_S = 3.35232e12
PEAK_FLOPS = {"f8": 1979e12, "bf16": 989e12, "f16": 989e12, "f32": 494e12}
VECTOR_FLOPS = 67e12
LAUNCH_S = 2e-6
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8,
                "c128": 16}
_ARRAY = re.compile(r"\b([a-z]\w*)\[([\d,]*)\]")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
_LHS_CONTRACTING = re.compile(r'"lhs_contracting_dimensions":\[([^\]]*)\]')
_LAUNCHES_NOTHING = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                               "while", "conditional", "call"})


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
    parser.add_argument("--no-h100", action="store_true",
                        help="without a suitable GPU, skip the deviceless H100 compiles")
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
    with module_io.ir_context():
        module = module_io.parse_module(text)

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


# ----- an H100 without a GPU --------------------------------------------------------------
def _arrays(type_text: str) -> list[tuple[str, int]]:
    """(dtype, elements) of each array in an HLO type (a tuple has several)."""
    return [(dtype, math.prod(int(d) for d in dims.split(",") if d))
            for dtype, dims in _ARRAY.findall(type_text)]


def _bytes(arrays: list[tuple[str, int]]) -> int:
    return sum(n * (1 if dtype.startswith("f8") else _DTYPE_BYTES.get(dtype, 4))
               for dtype, n in arrays)


def _kernel_seconds(line: str, result_type: str, opcode: str,
                    types: dict[str, str]) -> tuple[float, str]:
    """Roofline seconds of one launched instruction, and what bounds it."""
    operands = re.findall(r"%([\w.\-]+)", line.split(f" {opcode}(", 1)[1].split(")", 1)[0])
    arrays = _arrays(result_type)
    target = line.split('custom_call_target="', 1)[1].split('"', 1)[0] \
        if 'custom_call_target="' in line else ""
    if target.startswith("__cublas"):
        arrays = arrays[:1]  # the rest of the tuple is cuBLAS's workspace
    moved = _bytes(arrays) + sum(_bytes(_arrays(types.get(o, ""))) for o in operands)
    flops, peak = float(sum(n for _, n in arrays)), VECTOR_FLOPS
    contracting = _LHS_CONTRACTING.search(line)
    if target.startswith("__cublas") and contracting and operands:
        lhs = _arrays(types.get(operands[0], ""))
        dims = [int(d) for d in re.findall(r"\[([\d,]*)\]", types.get(operands[0], ""))[0]
                .split(",") if d] if lhs else []
        k = math.prod(dims[int(i.strip('" '))] for i in contracting.group(1).split(",")
                      if i.strip('" '))
        flops = 2.0 * arrays[0][1] * k
        dtype = lhs[0][0] if lhs else "f32"
        peak = PEAK_FLOPS["f8" if dtype.startswith("f8") else dtype if dtype in PEAK_FLOPS
                          else "f32"]
    memory_s, compute_s = moved / HBM_BYTES_PER_S, flops / peak
    return max(memory_s, compute_s), "compute" if compute_s > memory_s else "memory"


def roofline(hlo_text: str) -> dict[str, Any]:
    """A roofline ESTIMATE of one step's time on an H100 SXM from its optimized HLO: per
    launched instruction the larger of memory and compute time, summed, plus a launch each;
    while bodies count once per known trip."""
    computations, entry = hlo_computations(hlo_text)
    control = control_computations(computations, entry)
    trips: dict[str, int] = {}
    for name in control:
        for line in computations[name]:
            body = re.search(r"\bbody=%([\w.\-]+)", line)
            count = _TRIP_COUNT.search(line)
            if body and count:
                trips[body.group(1)] = int(count.group(1))
    totals = {"kernels": 0, "memory_s": 0.0, "compute_s": 0.0, "launch_s": 0.0}
    for name in control:
        times = trips.get(name, 1)
        types: dict[str, str] = {}
        for line in computations[name]:
            parsed = hlo_instruction(line)
            if parsed is None:
                continue
            types[parsed[0]] = parsed[1]
            if parsed[2] in _LAUNCHES_NOTHING:
                continue
            seconds, bound = _kernel_seconds(line, parsed[1], parsed[2], types)
            totals["kernels"] += times
            totals[f"{bound}_s"] += seconds * times
            totals["launch_s"] += LAUNCH_S * times
    totals["total_s"] = totals["memory_s"] + totals["compute_s"] + totals["launch_s"]
    return totals


def run_h100_aot(step: Step) -> dict[str, Any]:
    """The rewritten step and the bf16 baseline compiled without a GPU for an H100: FP8
    GEMMs, fusions, and the roofline estimate of both steps' time."""
    fp8 = gpu_aot.compile_h100(step.rewritten)
    fp8_triton = gpu_aot.compile_h100(step.rewritten, triton_gemm=True)
    bf16 = gpu_aot.compile_function_h100(step.bf16_fn, *step.args)
    estimate = {"fp8": roofline(fp8.hlo_text), "bf16": roofline(bf16.hlo_text)}
    return {
        "fp8": {**fp8.counts(), "triton_gemm_fusions": fp8.hlo_text.count("__triton_gemm")},
        "fp8_triton_on": {**fp8_triton.counts(),
                          "triton_gemm_fusions": fp8_triton.hlo_text.count("__triton_gemm")},
        "bf16": bf16.counts(),
        "fusion_ratio": fp8.fusions / bf16.fusions if bf16.fusions else float("nan"),
        "estimate": estimate,
        "estimated_speedup_vs_bf16": estimate["bf16"]["total_s"] / estimate["fp8"]["total_s"],
        "sample_lines": [line.strip()[:600] for line in fp8.hlo_text.splitlines()
                         if f'custom_call_target="{F8_GEMM}"' in line][:SAMPLE_LINES],
    }


def h100_lines(aot: dict[str, Any], fp8_dots: int, bold: bool) -> list[str]:
    """The deviceless H100 results as report lines (markdown where ``bold``)."""
    def b(text: str) -> str:
        return f"**{text}**" if bold else text

    fp8, bf16, est = aot["fp8"], aot["bf16"], aot["estimate"]
    every = fp8_dots > 0 and fp8["cublas_f8"] >= fp8_dots
    return [
        f"H100 SXM target compiled without a GPU (Triton GEMM off): {fp8['cublas_f8']} "
        f"`{F8_GEMM}` calls for {fp8_dots} FP8 dots (every FP8 dot a cuBLASLt FP8 GEMM: "
        f"{b(verdict(every))}); fusions {fp8['fusions']} against {bf16['fusions']} for the bf16 "
        f"step ({aot['fusion_ratio']:.2f}x), HLO instructions {fp8['instructions']} against "
        f"{bf16['instructions']}; compile {fp8['compile_s']:.1f} s against "
        f"{bf16['compile_s']:.1f} s. With XLA's default flags (Triton GEMM on, no autotuning "
        f"without a device): {aot['fp8_triton_on']['fusions']} fusions, "
        f"{aot['fp8_triton_on']['triton_gemm_fusions']} Triton GEMM fusions, "
        f"{aot['fp8_triton_on']['cublas_f8']} cuBLASLt FP8 calls.",
        f"Roofline ESTIMATE (not a measurement; per kernel max(bytes / "
        f"{HBM_BYTES_PER_S / 1e12:.2f} TB/s, flops / dtype peak), plus {LAUNCH_S * 1e6:.0f} µs "
        f"per launch): FP8 step {est['fp8']['total_s'] * 1e3:.2f} ms ({est['fp8']['kernels']} "
        f"kernels; memory {est['fp8']['memory_s'] * 1e3:.2f}, compute "
        f"{est['fp8']['compute_s'] * 1e3:.2f}, launches {est['fp8']['launch_s'] * 1e3:.2f} ms), "
        f"bf16 step {est['bf16']['total_s'] * 1e3:.2f} ms ({est['bf16']['kernels']} kernels; "
        f"memory {est['bf16']['memory_s'] * 1e3:.2f}, compute "
        f"{est['bf16']['compute_s'] * 1e3:.2f}, launches {est['bf16']['launch_s'] * 1e3:.2f} "
        f"ms): estimated speedup {aot['estimated_speedup_vs_bf16']:.2f}x against the "
        f"{MIN_SPEEDUP_VS_BF16}x target.",
    ]


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
        if "h100_aot" in result:
            for line in h100_lines(result["h100_aot"], dots["fp8"], bold=False):
                print(line)
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
        measured = "not measured** (no GPU)"
        if "h100_aot" in result:
            lines += ["", *h100_lines(result["h100_aot"], dots["fp8"], bold=True)]
            measured = "not measured on a GPU** (the deviceless H100 count is above)"
        lines += ["", f"* Every FP8 dot a cuBLASLt FP8 GEMM: **{measured}.",
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
        if not args.no_h100 and gpu_aot.available():
            result["h100_aot"] = run_h100_aot(step)
    result["targets"] = judge(result)
    print_report(result)
    publish(args.out, result, SECTION, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
