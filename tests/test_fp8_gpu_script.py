"""``benchmarks/fp8_gpu.py`` on a machine without a suitable GPU, and its GPU code path on CPU.

The GPU part of that script only runs where a GPU of compute capability 8.9+ is lent, which is
rare, so its code would rot unseen: here it runs on XLA:CPU (no FP8 GEMMs there, so its
targets come out "NOT met", which is the point of counting them), and the script's own
no-GPU path must say that the GPU part was not run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from scalify_hlo import gpu_aot
from tests.helpers import REPO_ROOT, import_benchmark

SCRIPT = REPO_ROOT / "benchmarks" / "fp8_gpu.py"
TINY = ["--layers", "1", "--d-model", "64", "--heads", "4", "--context", "32", "--batch", "2",
        "--repeats", "3", "--warmup", "1"]


@pytest.fixture(scope="module")
def fp8_gpu() -> Any:
    return import_benchmark("fp8_gpu")


def test_without_a_gpu_the_script_says_the_gpu_part_was_not_run(tmp_path: Path) -> None:
    if jax.devices()[0].platform == "gpu":
        pytest.skip("a GPU is present: the script runs its GPU part")
    out = tmp_path / "fp8_gpu.json"
    run = subprocess.run([sys.executable, str(SCRIPT), *TINY, "--no-doc", "--no-cpu-compile",
                          "--no-h100", "--out", str(out)], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    assert "GPU part NOT RUN" in run.stdout
    result = json.loads(out.read_text())
    assert result["gpu"]["run"] is False and "no GPU" in result["gpu"]["reason"]
    assert result["targets"] == {"every_fp8_dot_fused": None, "speedup_vs_bf16": None}
    # every dot but the output head's three (the logits and their two gradients)
    assert 0 < result["fp8_dots"]["fp8"] == result["fp8_dots"]["dot_general"] - 3


def _tiny_gpt(fp8_gpu: Any) -> tuple[Any, Any, Any, str]:
    """A 1-layer d64 GPT step, its bf16 baseline, its arguments and its exported text."""
    models = fp8_gpu.load_models()
    shape = {"n_layers": 1, "d_model": 64, "n_heads": 4, "context": 32, "vocab": 64,
             "batch": 2}
    fn, args = models.gpt_step(**shape)
    bf16_fn, _ = models.gpt_step(**shape, compute_dtype=jnp.bfloat16)
    return fn, bf16_fn, args, models.export_text(fn, args)


def test_the_gpu_code_path_runs_and_reports(fp8_gpu: Any) -> None:
    """``run_gpu`` and the report of a run, on whatever device JAX has (CPU here)."""
    fn, bf16_fn, args, text = _tiny_gpt(fp8_gpu)
    chunk = fp8_gpu.rewrite_module_source(text, fp8_gpu.DEFAULT_PIPELINE)
    assert chunk.error is None
    step = fp8_gpu.Step(fn, bf16_fn, args, text, chunk.output.decode())
    options = fp8_gpu.parse_args([*TINY, "--no-doc"])
    gpu = fp8_gpu.run_gpu(step, options)
    # the bf16 baseline runs every dot in bf16 (casting the state would leave most in f32)
    assert set(gpu["baselines"]["jax_bf16"]["dot_operand_types"]) == {"bf16xbf16"}
    assert set(gpu["baselines"]["jax_f32"]["dot_operand_types"]) == {"f32xf32"}
    assert gpu["fp8_step"]["timing"]["n"] == 3 and gpu["speedup_vs_bf16"] > 0
    losses = [gpu["fp8_step"]["loss"], *(b["loss"] for b in gpu["baselines"].values())]
    assert max(losses) - min(losses) < 0.1 * max(losses)
    result = {"config": {"layers": 1, "d_model": 64, "heads": 4, "context": 32, "batch": 2,
                         "vocab": 64, "repeats": 3},
              "pipeline": fp8_gpu.DEFAULT_PIPELINE, "rewrite": {"seconds": 0.5},
              "fp8_dots": fp8_gpu.count_fp8_dots(step.rewritten),
              "gpu": {"reason": "XLA:CPU standing in for a GPU", **gpu}}
    result["targets"] = fp8_gpu.judge(result)
    on_gpu = jax.devices()[0].platform == "gpu"
    assert result["targets"]["every_fp8_dot_fused"] is on_gpu  # CPU: no cuBLASLt FP8 GEMMs
    section = fp8_gpu.doc_section(result)
    assert re.search(r"\| `jax.jit\(step\)`, bf16 mixed precision .*\| \d+\.\d\d \|$", section,
                     re.M)
    assert "Every FP8 dot a cuBLASLt FP8 GEMM: **" in section


@pytest.mark.skipif(not gpu_aot.available(), reason="the gpu-aot extra is not installed")
def test_deviceless_h100_counts_fp8_gemms_and_estimates_both_steps(fp8_gpu: Any) -> None:
    """Without a GPU, the H100 compile proves the FP8 GEMMs and gives a roofline estimate."""
    fn, bf16_fn, args, text = _tiny_gpt(fp8_gpu)
    rewritten = fp8_gpu.rewrite_module_source(text, fp8_gpu.DEFAULT_PIPELINE).output.decode()
    aot = fp8_gpu.run_h100_aot(fp8_gpu.Step(fn, bf16_fn, args, text, rewritten))
    dots = fp8_gpu.count_fp8_dots(rewritten)["fp8"]
    assert aot["fp8"]["cublas_f8"] == dots > 0 and aot["bf16"]["cublas_f8"] == 0
    assert aot["bf16"]["custom_calls"].get("__cublas$lt$matmul", 0) > 0
    for estimate in aot["estimate"].values():
        assert estimate["kernels"] > 0 and estimate["memory_s"] > 0
        assert estimate["total_s"] > estimate["launch_s"] > 0
    assert aot["estimated_speedup_vs_bf16"] > 0
    assert "ESTIMATE" in "\n".join(fp8_gpu.h100_lines(aot, dots, bold=True))
