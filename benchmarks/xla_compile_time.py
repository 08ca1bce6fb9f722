"""Where XLA:GPU's compile time goes: the original, the FP8 floor and the rewritten GPT step.

Why this script exists: the rewritten step compiles several times slower than the original
for an H100 (``benchmarks/rewrite_cost.py``, "Statistics on an H100") with about the same
number of kernels, so the time is not in launching more kernels but in what each kernel
holds. XLA logs its own phase times (``TF_CPP_VMODULE``: ``GpuCompiler::RunHloPasses``, each
HLO pass, ``GpuCompiler::RunBackend``: LLVM and ptxas); each module is compiled in a child
process with that logging on (it is read when the plugin loads) and the log is parsed here.
Beside the times, the kernels of the optimized HLO: how many, their instructions, and the
sum over kernels of parameters x instructions (a profile of the delayed step's compile put
a sixth of it in the LLVM translation printing each kernel once per parameter, a cost that
grows with a kernel's parameters and its size together).

    python benchmarks/xla_compile_time.py                # gpt L1 and L2 (d 256)
    python benchmarks/xla_compile_time.py --layers 2 --no-doc

Needs the ``gpu-aot`` extra. Times are wall seconds of this shared 2-core machine, one
compile each: read them as shares of one compile, not as a benchmark of XLA. Results:
``docs/results/xla_compile_time.json`` and the "XLA:GPU compile time" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    called_computation,
    environment,
    format_table,
    hlo_computations,
    hlo_instruction,
    json_from_child,
    load_models,
    markdown_table,
    publish,
    rewrite_or_fail,
    steady_state_pipeline,
)

from scalify_hlo import Policy, gpu_aot  # noqa: E402

HEADING = "XLA:GPU compile time"
# What XLA logs its phase and pass times from (its own VLOG(1) timers).
LOGGING = {"TF_CPP_VMODULE": "gpu_compiler=1,hlo_pass_pipeline=1", "TF_CPP_MIN_LOG_LEVEL": "0"}
_PHASE = re.compile(r"GpuCompiler::(RunHloPasses|RunBackend) for \S+ time: ([\d.]+) (us|ms|s) ")
_PASS = re.compile(r"HLO pass: (\S+) time: ([\d.]+) (us|ms|s) ")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
HEADERS = ["step", "module", "kernels", "instructions in kernels", "sum of parameters x "
           "instructions", "largest kernel (instructions, parameters)", "compile s",
           "HLO passes s", "priority fusion s", "backend s (LLVM, ptxas)"]


def modules() -> dict[str, str]:
    """The pipelines compared: the original, the FP8 floor, f32 mode, and the H100
    target's policy (delayed statistics, the module a training loop runs from its second
    call) with and without FP8 dots."""
    return {
        "original": "inline",
        "FP8 floor": "inline,fp8-dots{scaling=none}",
        "f32": "inline,scalify{data-dtype=f32},simplify",
        "H100 policy": steady_state_pipeline(Policy.for_target("h100"), partitioned=False),
        "H100 policy, no FP8": steady_state_pipeline(
            Policy.for_target("h100", fp8_dots=False), partitioned=False),
    }


def phase_times(log: str) -> dict[str, float]:
    """XLA's own times from a compile's log: the HLO pass pipeline, the backend, and the
    passes the HLO pipeline ran (summed by name). Only the thread that logged
    ``RunHloPasses`` is read for passes: a CPU compile in the same process logs its own."""
    times: dict[str, float] = {}
    thread = None
    for line in log.splitlines():
        match = _PHASE.search(line)
        if match:
            times[match.group(1)] = times.get(match.group(1), 0.0) + float(
                match.group(2)) * _UNIT[match.group(3)]
            if match.group(1) == "RunHloPasses":
                thread = line.split()[2] if len(line.split()) > 2 else None
    passes: Counter[str] = Counter()
    for line in log.splitlines():
        match = _PASS.search(line)
        if match and (thread is None or line.split()[2] == thread):
            passes[match.group(1)] += float(match.group(2)) * _UNIT[match.group(3)]
    times["priority-fusion"] = passes.get("priority-fusion", 0.0)
    return times


def kernel_sizes(hlo_text: str) -> dict[str, Any]:
    """Per kernel (a fusion instruction of the entry or a loop body) of the optimized HLO:
    instructions and parameters of its fused computation; their totals and the largest."""
    computations, _ = hlo_computations(hlo_text)
    kernels = []
    for lines in computations.values():
        for line in lines:
            parsed = hlo_instruction(line)
            if parsed is None or parsed[2] != "fusion":
                continue
            body = computations.get(called_computation(line) or "")
            if body is None:
                continue
            parameters = sum(1 for inner in body
                             if (instruction := hlo_instruction(inner))
                             and instruction[2] == "parameter")
            kernels.append((len(body), parameters))
    largest = max(kernels, default=(0, 0))
    return {"kernels": len(kernels), "instructions": sum(size for size, _ in kernels),
            "parameter_instructions": sum(size * count for size, count in kernels),
            "largest": list(largest)}


def compile_in_child(text: str) -> dict[str, Any]:
    """Compile ``text`` for an H100 in a child process with XLA's timers logged; the
    child prints the optimized HLO's counts and the compile's wall seconds as JSON."""
    result, log = json_from_child(__file__, "--child", text, env=LOGGING)
    result.update(phase_times(log))
    return result


def child(path: str) -> None:
    compiled = gpu_aot.compile_h100(Path(path).read_text())
    print(json.dumps({"compile_s": compiled.compile_s, "fusions": compiled.fusions,
                      **kernel_sizes(compiled.hlo_text)}))


def measure(layers: int) -> list[dict[str, Any]]:
    models = load_models()
    fn, example = models.gpt_step(n_layers=layers, d_model=256, n_heads=4, context=128)
    text = models.export_text(fn, example)
    rows = []
    for name, pipeline in modules().items():
        result = compile_in_child(rewrite_or_fail(text, pipeline))
        result.update(step=f"gpt L{layers}", module=name, pipeline=pipeline)
        print(f"  gpt L{layers} {name}: {result['compile_s']:.1f} s, kernels "
              f"{result['kernels']}, parameters x instructions "
              f"{result['parameter_instructions']}", flush=True)
        rows.append(result)
    return rows


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[row["step"], row["module"], row["kernels"], row["instructions"],
             row["parameter_instructions"], f"{row['largest'][0]}, {row['largest'][1]}",
             f"{row['compile_s']:.1f}", f"{row.get('RunHloPasses', 0.0):.1f}",
             f"{row['priority-fusion']:.1f}", f"{row.get('RunBackend', 0.0):.1f}"]
            for row in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "xla_compile_time.json")
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    if not gpu_aot.available():
        raise SystemExit("needs the gpu-aot extra: pip install -e '.[gpu-aot]'")
    rows = [row for layers in args.layers for row in measure(layers)]
    print(format_table(HEADERS, table_rows(rows)))
    publish(args.out, {"environment": environment(), "rows": rows}, HEADING, doc_section,
            doc=not args.no_doc)


def doc_section(result: dict[str, Any]) -> str:
    return (
        "`python benchmarks/xla_compile_time.py`. The GPT steps of `testdata/models.py` (d "
        "256, 4 heads, context 128, batch 8, Adam) compiled once each for one H100 without "
        "a GPU (`scalify_hlo.gpu_aot`, Triton GEMM off), each in a child process that logs "
        "XLA's own timers: *HLO passes* (`GpuCompiler::RunHloPasses`), of which *priority "
        "fusion* (the pass that forms the kernels; with XLA's Triton softmax fusions on, it "
        "searches a tiling for every producer it tries to fuse into one), and *backend* "
        "(`GpuCompiler::RunBackend`: LLVM translation, optimization, ptxas). *Kernels*: "
        "fusions of the optimized HLO; *instructions in kernels*: of their fused "
        "computations; *sum of parameters x instructions*: over kernels. *H100 policy*: "
        "`Policy.for_target(\"h100\")`, the module a training loop runs from its second call "
        "(delayed statistics). Wall seconds of one compile on a shared 2-core machine.\n\n"
        + markdown_table(HEADERS, table_rows(result["rows"])))

if __name__ == "__main__":
    main()
