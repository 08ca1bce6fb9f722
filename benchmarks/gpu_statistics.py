"""Current or delayed statistics on one H100: kernels per step of the GPT step.

Why this script exists: with current statistics a value that waits for its own amax is a
kernel that writes it, a reduction, and a kernel that scales it; a delayed exponent is applied
where the value is made and its statistic is taken beside it for the next call. Which one the
GPU targets get (``scalify_hlo/targets/table.py``) rests on this count. Each GPT step of
``testdata/models.py`` (d 256, 4 heads, context 128, batch 8, Adam) is rewritten by
``compile_scaled`` and compiled for one H100 SXM without a GPU (``scalify_hlo.gpu_aot``,
Triton GEMM off so that FP8 dots show as cuBLASLt calls). What is compiled is the program a
training loop runs: the arguments from ``scale_args``, and with delayed statistics a call fed
the outputs of the one before (the second program, which applies the exponents the first
measured). Counted: fusions (kernels launched per step), FP8 GEMMs, XLA:GPU compile time of
that one program (the delayed step compiles a second, the first call's, as well).

    python benchmarks/gpu_statistics.py                 # 1, 2 and 4 layers
    python benchmarks/gpu_statistics.py --layers 2 --no-doc

Needs the ``gpu-aot`` extra. Results: ``docs/results/gpu_statistics.json`` and the
"Statistics on an H100" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    environment,
    format_table,
    load_models,
    markdown_table,
    publish,
)

from scalify_hlo import Policy, compile_scaled, gpu_aot  # noqa: E402

HEADING = "Statistics on an H100"
RECIPES = {"default": {}, "f16, no FP8": {"fp8_dots": False}}
HEADERS = ["layers", "recipe", "original fusions", "current", "delayed", "delayed / current",
           "delayed / original", "FP8 GEMMs (current, delayed)", "XLA:GPU s (current, delayed)"]


def steady_state_text(step_fn: Any, example: tuple[Any, ...], policy: Policy) -> str:
    """The lowered program a training loop runs from its second call."""
    step = compile_scaled(step_fn, *example, policy=policy)
    inputs = step.scale_args(*example)
    if step.delayed_text:  # the outputs fed back: the program that applies their exponents
        outputs = step(*inputs)
        inputs = (*outputs[:2], *inputs[2:])
    return step.lower(*inputs).as_text()


def measure(layers: int) -> list[dict[str, Any]]:
    models = load_models()
    step_fn, example = models.gpt_step(n_layers=layers, d_model=256, n_heads=4, context=128)
    original = gpu_aot.compile_h100(jax.jit(step_fn).lower(*example).as_text())
    rows = []
    for recipe, fields in RECIPES.items():
        row: dict[str, Any] = {"layers": layers, "recipe": recipe,
                               "original_fusions": original.fusions}
        for statistics in ("current", "delayed"):
            policy = Policy(statistics=statistics, **fields)
            compiled = gpu_aot.compile_h100(steady_state_text(step_fn, example, policy))
            row[statistics] = {"fusions": compiled.fusions, "cublas_f8": compiled.cublas_f8,
                               "compile_s": compiled.compile_s}
        rows.append(row)
        print(format_table(HEADERS, table_rows([row])), flush=True)
    return rows


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r["layers"], r["recipe"], r["original_fusions"], r["current"]["fusions"],
             r["delayed"]["fusions"],
             f"{r['delayed']['fusions'] / r['current']['fusions']:.2f}",
             f"{r['delayed']['fusions'] / r['original_fusions']:.2f}",
             f"{r['current']['cublas_f8']}, {r['delayed']['cublas_f8']}",
             f"{r['current']['compile_s']:.1f}, {r['delayed']['compile_s']:.1f}"]
            for r in rows]


def doc_section(result: dict[str, Any]) -> str:
    return (
        "`python benchmarks/gpu_statistics.py`. The GPT step of `testdata/models.py` (d 256, "
        "4 heads, context 128, batch 8, Adam) rewritten by `compile_scaled` with current or "
        "delayed statistics (`Policy(statistics=...)`; *default*: f16 data and FP8 dots, "
        "*f16, no FP8*: `fp8_dots=False`) and compiled for one H100 without a GPU "
        "(`scalify_hlo.gpu_aot`, Triton GEMM off): the program a training loop runs (with "
        "delayed statistics, a call fed the outputs of the one before). Fusions are kernels "
        "per step; compile time is this machine's, for that one program (a delayed step "
        "also compiles its first call's). Why GPU targets delay statistics "
        "(docs/how-it-works.md, \"Targets\").\n\n"
        + markdown_table(HEADERS, table_rows(result["rows"])) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    args = parser.parse_args(argv)
    if not gpu_aot.available():
        print("error: needs the gpu-aot extra (pip install -e '.[gpu-aot]')", file=sys.stderr)
        return 1
    rows = [row for layers in args.layers for row in measure(layers)]
    result = {"rows": rows, "environment": environment()}
    print(format_table(HEADERS, table_rows(rows)))
    publish(RESULTS / "gpu_statistics.json", result, HEADING, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
