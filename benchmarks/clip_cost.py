"""Global-norm clipping: what it costs XLA to compile the rewritten step.

Why this script exists: most language-model recipes clip the gradients to a global norm
(``optax.clip_by_global_norm``) before the optimizer, and the other cost benchmarks' GPT steps
do not. The norm is a sum over every gradient leaf of its sum of squares: in the rewrite, a
sum of rank-0 values that each carry their own run-time scale, whose common scale is a chain
of exponent arithmetic as long as the parameter list, and every parameter's update reads the
result. This measures whether the rewrite makes clipping dearer than it is to the original.
Each GPT step of ``testdata/models.py`` (Adam; d 256, 4 heads, context 128,
batch 8) is exported with and without clipping (``clip_norm=1.0``), rewritten in f32 mode, by
the default policy and by the CPU target's policy (every scale epoch packed), and compiled by
XLA:CPU and, with the ``gpu-aot`` extra, for one H100 without a GPU. Compile seconds are one
compile's CPU time on a shared machine (indicative); instructions (every computation's, fused
ones included) and fusions are deterministic.

    python benchmarks/clip_cost.py                    # 1 and 2 layers
    python benchmarks/clip_cost.py --layers 1 --no-h100 --no-doc

Results: ``docs/results/clip_cost.json`` and the "Global-norm clipping" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    compile_cells,
    compiled_modules,
    environment,
    format_table,
    load_models,
    markdown_table,
    publish,
)

from scalify_hlo import Policy, gpu_aot  # noqa: E402

HEADING = "Global-norm clipping"
PIPELINES = {"f32": "inline,scalify{data-dtype=f32},simplify",
             "default": Policy().pipeline(),
             "cpu target": Policy.for_target("cpu").pipeline()}
HEADERS = ["step", "optimizer", "module", "XLA:CPU s", "XLA:CPU instructions",
           "XLA:CPU fusions", "H100 s", "H100 instructions", "H100 fusions"]
OPTIMIZERS = {"adam": None, "clip + adam": 1.0}


def measure(layers: int, h100: bool) -> list[dict[str, Any]]:
    """Every module of the ``layers``-layer step, with and without clipping."""
    models = load_models()
    rows = []
    for optimizer, clip_norm in OPTIMIZERS.items():
        exported = models.export_text(*models.gpt_step(
            layers, 256, 4, 128, clip_norm=clip_norm))
        for compiled in compiled_modules(exported, PIPELINES, h100):
            rows.append({"step": f"gpt L{layers}", "optimizer": optimizer, **compiled})
            print(format_table(HEADERS, table_rows(rows[-1:])), flush=True)
    return rows


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r["step"], r["optimizer"], r["module"], *compile_cells(r["cpu"]),
             *compile_cells(r["h100"])] for r in rows]


def growth(rows: list[dict[str, Any]]) -> list[str]:
    """Per step and module, what clipping multiplies: against the same module without it."""
    plain = {(r["step"], r["module"]): r for r in rows if r["optimizer"] == "adam"}
    lines = []
    for r in rows:
        if r["optimizer"] == "adam":
            continue
        base = plain[(r["step"], r["module"])]
        parts = [f"XLA:CPU instructions {_ratio(r, base, 'cpu', 'instructions')}",
                 f"compile {_ratio(r, base, 'cpu', 'compile_s')}"]
        if r["h100"] is not None and base["h100"] is not None:
            parts += [f"H100 compile {_ratio(r, base, 'h100', 'compile_s')}",
                      f"H100 fusions {_ratio(r, base, 'h100', 'fusions')}"]
        lines.append(f"* {r['step']}, {r['module']}: clipping costs {', '.join(parts)}.")
    return lines


def _ratio(row: dict[str, Any], base: dict[str, Any], where: str, key: str) -> str:
    return f"{row[where][key] / base[where][key]:.2f}x"


def doc_section(result: dict[str, Any]) -> str:
    return (
        "`python benchmarks/clip_cost.py`. GPT steps of `testdata/models.py` (Adam; *gpt Ln*: "
        "n layers, d 256, 4 heads, context 128, batch 8) exported as they are (*adam*) and "
        "with their gradients clipped to a global norm first (*clip + adam*: "
        "`optax.clip_by_global_norm(1.0)`, what most language-model recipes run), rewritten "
        "in *f32* mode (`inline,scalify{data-dtype=f32},simplify`), by the *default* policy "
        "and by the *cpu target*'s (`Policy.for_target(\"cpu\")`: every scale epoch packed), "
        "and compiled by XLA:CPU and for one H100 without a GPU (`scalify_hlo.gpu_aot`, "
        "Triton GEMM off). Compile seconds are one compile's CPU time on a shared 2-core "
        "machine (indicative); instructions and fusions are deterministic. The global norm "
        "is a sum of one rank-0 value per parameter leaf, each at its own run-time scale, "
        "whose common scale is a chain of exponent arithmetic as long as the parameter list "
        "that every update reads; the lines below the table say what clipping multiplies, "
        "each module against itself without clipping.\n\n"
        + markdown_table(HEADERS, table_rows(result["rows"])) + "\n\n"
        + "\n".join(growth(result["rows"])) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--no-h100", action="store_true",
                        help="XLA:CPU only (also without the gpu-aot extra)")
    parser.add_argument("--out", type=Path, default=RESULTS / "clip_cost.json")
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    args = parser.parse_args(argv)
    h100 = not args.no_h100 and gpu_aot.available()
    rows = [row for layers in args.layers for row in measure(layers, h100)]
    publish(args.out, {"rows": rows, "environment": environment()}, HEADING, doc_section,
            doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
