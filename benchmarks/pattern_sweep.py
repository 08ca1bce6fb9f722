"""Training patterns at the value scales training reaches, in every data type.

Why this script exists: the rewrite must hold a step's values wherever training takes them,
and the bugs found since the first round (RoPE's angles, small tanh results, the global norm
of tiny gradients) each showed only at some value scale in some data type. Each function of
``testdata/training_patterns.py`` runs through ``compile_scaled`` on its input times 2^-20,
1 and 2^20, in f32, f16 and bf16 data with plain dots and in f16 and bf16 data with FP8 dots,
against ``jax.jit`` in f32 on the same values. A case passes when the two agree on which
outputs are finite and NaN and its largest error, relative to the reference's largest finite
magnitude, is within the data type's tolerance: 1e-5 for f32, 1e-2 for f16, 4e-2 for bf16,
0.15 with FP8 dots, or three times what plain JAX loses running the function on the input
cast to that type, where that is larger (closed-over f32 constants promote it back to f32,
so that allowance is a lower bound of the type's own loss).

    python benchmarks/pattern_sweep.py              # every pattern, about 15 minutes
    python benchmarks/pattern_sweep.py --patterns lion moe_top2 --no-doc

Results: ``docs/results/pattern_sweep.json`` and the "Training patterns" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from common import RESULTS, environment, load_testdata, markdown_table, publish  # noqa: E402

from scalify_hlo import Policy, compile_scaled  # noqa: E402

HEADING = "Training patterns"
EXPONENTS = (-20, 0, 20)
# name -> (policy, tolerance, dtype plain JAX runs the function in for the allowance)
MODES: dict[str, tuple[Policy, float, Any]] = {
    "f32": (Policy(data_dtype="float32", fp8_dots=False), 1e-5, None),
    "f16": (Policy(fp8_dots=False), 1e-2, jnp.float16),
    "bf16": (Policy(data_dtype="bfloat16", fp8_dots=False), 4e-2, jnp.bfloat16),
    "f16 + FP8": (Policy(), 0.15, jnp.float16),
    "bf16 + FP8": (Policy(data_dtype="bfloat16"), 0.15, jnp.bfloat16),
}


def error(got: Any, reference: np.ndarray) -> tuple[float, bool]:
    """Largest error relative to the reference's largest finite magnitude, and whether the
    finite and NaN entries are the same."""
    got = np.asarray(got, np.float64)
    finite = np.isfinite(reference)
    same = (np.array_equal(np.isfinite(got), finite)
            and np.array_equal(np.isnan(got), np.isnan(reference)))
    if not finite.any():
        return 0.0, same
    largest = max(float(np.max(np.abs(reference[finite]))), 1e-300)
    return float(np.max(np.abs(got[finite] - reference[finite]))) / largest, same


def allowance(fn: Any, x: np.ndarray, reference: np.ndarray, dtype: Any) -> float:
    """Three times plain JAX's own error on the input cast to ``dtype`` (0 where that run is
    not finite where the reference is, or fails)."""
    if dtype is None:
        return 0.0
    try:
        with np.errstate(over="ignore"):  # f16 holds no 2^20: inf, as the type gives
            cast = x.astype(dtype)
        lost, same = error(jax.jit(fn)(cast), reference)
    except Exception:  # noqa: BLE001 - a pattern plain JAX cannot run in that type
        return 0.0
    return 3 * lost if same and np.isfinite(lost) else 0.0


def sweep(name: str, fn: Any, x0: np.ndarray) -> dict[str, Any]:
    """One pattern in every mode at every value scale."""
    row: dict[str, Any] = {"pattern": name, "modes": {}}
    for mode in MODES:
        row["modes"][mode] = {"worst_error": 0.0, "failures": []}
    for exponent in EXPONENTS:
        x = x0 * np.float32(2.0 ** exponent)
        reference = np.asarray(jax.jit(fn)(x), np.float64)
        for mode, (policy, tolerance, dtype) in MODES.items():
            found = row["modes"][mode]
            try:
                got = compile_scaled(fn, x, policy=policy, return_scaled=False)(x)
            except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
                found["failures"].append(f"2^{exponent}: {type(exc).__name__}: {exc}"[:200])
                continue
            err, same = error(got, reference)
            found["worst_error"] = max(found["worst_error"], err)
            limit = max(tolerance, allowance(fn, x, reference, dtype))
            if not same:
                found["failures"].append(f"2^{exponent}: finite/NaN entries differ")
            elif err > limit:
                found["failures"].append(f"2^{exponent}: error {err:.2g} > {limit:.2g}")
    return row


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    def cell(found: dict[str, Any]) -> str:
        mark = "ok" if not found["failures"] else "**" + "; ".join(found["failures"]) + "**"
        return f"{found['worst_error']:.1e} {mark}"

    return [[r["pattern"], *(cell(r["modes"][m]) for m in MODES)] for r in rows]


def doc_section(result: dict[str, Any]) -> str:
    rows = result["rows"]
    failing = sum(bool(r["modes"][m]["failures"]) for r in rows for m in MODES)
    return (
        "`python benchmarks/pattern_sweep.py`. Each function of "
        "`testdata/training_patterns.py` (a pattern of real training steps: routing, scans, "
        "optimizers, normalizations, masks, the global-norm clip) through `compile_scaled` on "
        "a (4, 8) input times 2^-20, 1 and 2^20, against `jax.jit` in f32 on the same values. "
        "Each cell: the largest error over the three scales, relative to the reference's "
        "largest finite magnitude, and *ok* where every scale has the reference's finite and "
        "NaN entries and an error within the mode's tolerance (f32 1e-5, f16 1e-2, bf16 "
        "4e-2, FP8 dots 0.15, or three times plain JAX's error on the input cast to the data "
        "type, where larger), else what failed.\n\n"
        + markdown_table(["pattern", *MODES], table_rows(rows)) + "\n\n"
        + f"* {len(rows)} patterns x {len(MODES)} modes x {len(EXPONENTS)} scales: "
        + f"{failing} pattern-mode pairs with a failure.\n"
        + "* Where a mode with FP8 dots fails and the same data type without them passes, look "
        "first for a discrete decision downstream of a dot that FP8's rounding changed (E4M3 "
        "keeps 3 mantissa bits): a top-k route between logits a few percent apart, the sign "
        "of a dot whose terms cancel. docs/robustness.md says which failures were checked.\n")


def main(argv: list[str] | None = None) -> int:
    patterns = load_testdata("training_patterns").PATTERNS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patterns", nargs="+", choices=sorted(patterns),
                        default=list(patterns))
    parser.add_argument("--out", type=Path, default=RESULTS / "pattern_sweep.json")
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    args = parser.parse_args(argv)
    x0 = np.random.default_rng(2).normal(size=(4, 8)).astype(np.float32)
    rows = []
    for name in args.patterns:
        rows.append(sweep(name, patterns[name], x0))
        print(" | ".join(str(c) for c in table_rows(rows[-1:])[0]), flush=True)
    publish(args.out, {"rows": rows, "environment": environment()}, HEADING, doc_section,
            doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
