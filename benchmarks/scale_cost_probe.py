"""Where the scale arithmetic costs XLA: optimized HLO of a GPT step, original vs rewritten.

A probe for issue 17, not a published benchmark (``rewrite_cost.py`` owns the tables): per
GPT size and mode it prints the optimized HLO instruction count (all computations), how
many of them are rank-0, fusions, ``__cublas$lt$matmul$f8`` calls and the compile's process
CPU time, on XLA:CPU and, with ``--h100``, for an H100 target compiled without a GPU
(``../shared/gpu/README.md``; needs jax-cuda12-plugin, jax-cuda12-pjrt and
nvidia-cuda-nvcc-cu12 of jax's version; run with
``XLA_FLAGS=--xla_gpu_enable_triton_gemm=false`` to count cuBLASLt FP8 calls). Instruction
counts are deterministic; times on a shared machine are not.

    python benchmarks/scale_cost_probe.py --layers 2 4
    python benchmarks/scale_cost_probe.py --layers 2 --extra ,materialize-scales --h100
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from common import ROOT, hlo_counts, load_models

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.runner import compile_module

PIPELINES = {"default": DEFAULT_PIPELINE, "f32": "inline,scalify{data-dtype=f32},simplify"}
H100_CONFIG = ROOT.parent / "shared" / "gpu" / "h100_sxm.txtpb"
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = (\S+)")
_RANK0 = re.compile(r"^\(?(s32|u32|s64|f32|f16|bf16|pred)\[\]")


def hlo_stats(hlo: str) -> dict[str, int]:
    instructions = rank0 = 0
    for line in hlo.splitlines():
        match = _INSTRUCTION.match(line)
        if match:
            instructions += 1
            rank0 += bool(_RANK0.match(match.group(1)))
    return {"instructions": instructions, "rank0": rank0,
            "fusions": hlo_counts(hlo).fusions, "fp8_gemms": hlo.count("__cublas$lt$matmul$f8")}


def cpu(text: str) -> dict[str, Any]:
    start = time.process_time()
    executable = compile_module(text)
    seconds = time.process_time() - start
    stats = hlo_stats("\n".join(m.to_string() for m in executable.hlo_modules()))
    return {**stats, "compile_cpu_s": round(seconds, 2)}


def h100(text: str, topology: list[Any]) -> dict[str, Any]:
    from jax.experimental import topologies
    from jax.extend.mlir import ir
    from jax.interpreters import mlir
    from jaxlib import xla_client

    if not topology:
        topology.append(topologies.get_topology_desc(
            platform="cuda", target_config=H100_CONFIG.read_text(), topology="1x1x1"))
    devices = topology[0].devices
    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        start = time.process_time()
        executable = devices[0].client.compile(module, xla_client.DeviceList(tuple(devices)),
                                               xla_client.CompileOptions())
        seconds = time.process_time() - start
    stats = hlo_stats("\n".join(m.to_string() for m in executable.hlo_modules()))
    return {**stats, "compile_cpu_s": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--modes", nargs="+", default=["original", *PIPELINES])
    parser.add_argument("--extra", default="", help="passes appended to each pipeline")
    parser.add_argument("--h100", action="store_true", help="also compile for an H100")
    parser.add_argument("--out", type=Path, help="write the rows as JSON")
    args = parser.parse_args()
    models = load_models()
    rows: dict[str, Any] = {}
    topology: list[Any] = []
    for layers in args.layers:
        step, example = models.gpt_step(n_layers=layers, d_model=args.d_model, n_heads=4,
                                        context=128, vocab=256, batch=8)
        original = models.export_text(step, example)
        for mode in args.modes:
            row: dict[str, Any] = {}
            text = original
            if mode != "original":
                start = time.process_time()
                chunk = rewrite_module_source(original, PIPELINES[mode] + args.extra)
                if chunk.error is not None:
                    raise SystemExit(f"rewrite failed: {chunk.error}")
                row["rewrite_cpu_s"] = round(time.process_time() - start, 2)
                text = chunk.output.decode()
            row["cpu"] = cpu(text)
            if args.h100:
                row["h100"] = h100(text, topology)
            rows[f"L{layers}/{mode}"] = row
            print(f"L{layers} {mode:9s} {json.dumps(row)}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
