"""Sharded steps on 8 simulated CPU devices: collectives, output shardings, step time.

Why this script exists: a sharded step rides on JAX's SPMD partitioner, and a scale that
is computed from a sharded tensor (a rescale point's max, a common scale of two runtime
scales) becomes a scalar all-reduce. Those cost latency, not bandwidth, and serialize through
the backward pass. This script counts what the compiled programs do, per setup of
``testdata/sharded_setups.py`` (data parallel, FSDP, a 4x2 Megatron-style mesh, a
``shard_map`` step with ``psum`` of gradients, a ``with_sharding_constraint``) and policy:

* collectives by kind (``all-reduce``, ``all-gather``, ``reduce-scatter``,
  ``collective-permute``, ``all-to-all``; an async ``-start`` counts once) in XLA's optimized
  HLO of the program a training loop runs (arguments from ``scale_args``, as the step's
  outputs come back), and apart the *small* ones (at most 16 elements: scalars and packed
  exponent vectors);
* bytes moved: the sum of the result sizes of those collectives (per device);
* serial: the most collectives on one data path of the entry computation (each waits for
  the one before: XLA can combine independent collectives, never these), what a step pays in
  latency even where the count could be combined;
* output leaves whose sharding differs from jax.jit's (0 expected);
* step time ratio to the original on the simulated devices (medians of interleaved calls;
  one host's cores shared by 8 simulated devices, so only a rough guide), and compile time
  (export + rewrite + XLA compile of the scaled program; jax.jit's compile for the original);
* with the ``gpu-aot`` extra (``scalify_hlo.gpu_aot``), the same programs compiled for 8
  H100s on one host without a GPU: their collectives, serial collectives, fusions, FP8
  GEMMs and XLA:GPU compile time (``--no-h100`` skips it).

    python benchmarks/sharded.py                  # 2-layer GPT (AdamW) setups, all policies
    python benchmarks/sharded.py --model mlp      # the tests' small MLP: a quick check
    python benchmarks/sharded.py --no-doc         # print only

Results: ``docs/results/sharded.json`` and the "Sharded steps" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    ROOT,
    environment,
    format_table,
    interleaved,
    markdown_table,
    paired_ratio,
    publish,
)

sys.path.insert(0, str(ROOT / "testdata"))
import sharded_setups  # noqa: E402

from scalify_hlo import Policy, ScaledArray, compile_scaled, gpu_aot  # noqa: E402
from scalify_hlo.scaled_array import is_scaled_leaf  # noqa: E402
from scalify_hlo.targets.collectives import serial_collectives  # noqa: E402

# statistics="auto" (the default) delays the statistics of these partitioned steps; the
# -current policies take them as a single-device step does, one chain of all-reduces.
POLICIES = {"f32": Policy(data_dtype="float32", fp8_dots=False),
            "f16": Policy(data_dtype="float16", fp8_dots=False), "default": Policy(),
            "f16-current": Policy(data_dtype="float16", fp8_dots=False, statistics="current"),
            "default-current": Policy(statistics="current")}
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
_COLLECTIVE = re.compile(r"=\s*(.+?)\s+(" + "|".join(KINDS) + r")(-start)?\(")
_ARRAY = re.compile(r"\b(pred|[fsu]\d+|bf16|f8e\w+)\[([\d,]*)\]")
_BYTES = {"pred": 1, "bf16": 2}
SMALL = 16  # elements: a collective at most this big is latency only
BATCH = 16  # global batch: 2 sequences per device


def _array_sizes(shape: str) -> list[tuple[int, int]]:
    """(elements, bytes per element) of each array in an HLO result type."""
    sizes = []
    for dtype, dims in _ARRAY.findall(shape):
        count = math.prod(int(d) for d in dims.split(",") if d) if dims else 1
        width = _BYTES.get(dtype) or max(1, int(re.sub(r"\D", "", dtype.split("e")[0]) or 8)
                                         // 8)
        sizes.append((count, width))
    return sizes


def collectives(hlo: str) -> dict[str, Any]:
    """Collectives of optimized HLO by kind, the small ones apart, and bytes moved."""
    kinds: Counter[str] = Counter()
    small: Counter[str] = Counter()
    moved = 0
    for line in hlo.splitlines():
        match = _COLLECTIVE.search(line)
        if not match or "-done" in line.split("=", 1)[1].split("(", 1)[0]:
            continue
        shape, kind = match.group(1), match.group(2)
        sizes = _array_sizes(shape)
        kinds[kind] += 1
        if sum(n for n, _ in sizes) <= SMALL:
            small[kind] += 1
        moved += sum(n * w for n, w in sizes)
    return {"by_kind": dict(kinds), "small": dict(small), "total": sum(kinds.values()),
            "small_total": sum(small.values()), "bytes": moved,
            "serial": serial_collectives(hlo)}


def _mismatched(outputs: Any, reference: Any) -> int:
    return sum(not (x.data if isinstance(x, ScaledArray) else x).sharding.is_equivalent_to(
        y.sharding, y.ndim) for x, y in zip(jax.tree.leaves(outputs, is_leaf=is_scaled_leaf),
                                            jax.tree.leaves(reference), strict=True))


def _fed_back(args: tuple[Any, ...], outputs: Any) -> tuple[Any, ...]:
    """``args`` with its leading arguments replaced by the outputs at the same positions
    that have their structure and shapes (a training step's state; the batch stays)."""
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    fed = list(args)
    for index, (arg, out) in enumerate(zip(args, outputs, strict=False)):
        arg_leaves = jax.tree.leaves(arg, is_leaf=is_scaled_leaf)
        out_leaves = jax.tree.leaves(out, is_leaf=is_scaled_leaf)
        if (jax.tree.structure(arg, is_leaf=is_scaled_leaf)
                != jax.tree.structure(out, is_leaf=is_scaled_leaf)
                or [x.shape for x in arg_leaves] != [x.shape for x in out_leaves]):
            break
        fed[index] = out
    return tuple(fed)


def h100_counts(lowered_text: str) -> dict[str, Any]:
    """Collectives, fusions, FP8 GEMMs and compile time of a lowered sharded program compiled
    for 8 H100s (deviceless)."""
    compiled = gpu_aot.compile_h100(lowered_text)
    return {**collectives(compiled.hlo_text), "fusions": compiled.fusions,
            "cublas_f8": compiled.cublas_f8, "compile_s": compiled.compile_s}


def measure(setup: str, model: str, policies: list[str], rounds: int,
            h100: bool = False, batch: int = BATCH) -> list[dict[str, Any]]:
    step, args = sharded_setups.setup(setup, model, batch)
    start = time.perf_counter()
    lowered = jax.jit(step).lower(*args)
    compiled = lowered.compile()
    rows = [{"setup": setup, "mode": "original", "compile_s": time.perf_counter() - start,
             **collectives(compiled.as_text()), "mismatched": 0, "step_ratio": 1.0}]
    if h100:
        rows[0]["h100"] = h100_counts(lowered.as_text())
    reference = compiled(*args)
    calls = {"original": lambda: jax.block_until_ready(compiled(*args))}
    for policy in policies:
        start = time.perf_counter()
        scaled = compile_scaled(step, *args, policy=POLICIES[policy])
        # The program of a training loop: arguments as scale_args gives them, which is how
        # the step's own outputs come back (plain arrays would add their split to the data
        # and scale pairs: a max over every sharded argument).
        inputs = scaled.scale_args(*args)
        if scaled.delayed_text:  # delayed statistics: the steady state is a call fed back
            inputs = _fed_back(inputs, scaled(*inputs))
        lowered = scaled.lower(*inputs)
        program = lowered.compile()
        elapsed = time.perf_counter() - start
        outputs = scaled(*inputs)
        calls[policy] = (lambda s=scaled, x=inputs: jax.block_until_ready(s(*x)))
        rows.append({"setup": setup, "mode": policy, "compile_s": elapsed,
                     **collectives(program.as_text()),
                     "mismatched": _mismatched(outputs, reference),
                     "fallbacks": len(scaled.report().warnings),
                     "agreed_scales": scaled.report().stats.get("scalify.agreed-scales", 0)})
        if h100:
            rows[-1]["h100"] = h100_counts(lowered.as_text())
    times = interleaved(calls, rounds)
    for row in rows:
        row["step_ratio"] = paired_ratio(times[row["mode"]], times["original"])
        row["leaves"] = len(jax.tree.leaves(reference))
    return rows


def _kinds(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} {n}" + (f" ({row['small'][k]} small)" if row["small"].get(k) else "")
                     for k, n in sorted(row["by_kind"].items())) or "none"


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    headers = ["setup", "mode", "collectives", "small", "serial", "by kind", "KiB moved",
               "outputs off", "step x", "compile s"]
    body = [[r["setup"], r["mode"], r["total"], r["small_total"], r["serial"], _kinds(r),
             f"{r['bytes'] / 1024:.1f}", f"{r['mismatched']}/{r['leaves']}",
             f"{r['step_ratio']:.2f}", f"{r['compile_s']:.1f}"] for r in rows]
    return headers, body


def h100_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    headers = ["setup", "mode", "collectives", "small", "serial", "by kind", "fusions",
               "FP8 GEMMs", "XLA:GPU compile s"]
    body = [[r["setup"], r["mode"], r["h100"]["total"], r["h100"]["small_total"],
             r["h100"]["serial"], _kinds(r["h100"]), r["h100"]["fusions"],
             r["h100"]["cublas_f8"], f"{r['h100']['compile_s']:.1f}"]
            for r in rows if "h100" in r]
    return headers, body


def doc_section(result: dict[str, Any]) -> str:
    headers, body = table(result["rows"])
    h100_headers, h100_body = h100_table(result["rows"])
    h100 = ("\n8 H100s on one host (`scalify_hlo.gpu_aot`, compiled without a GPU, Triton GEMM "
            "off so that FP8 dots show as cuBLASLt calls): the same lowered programs.\n\n"
            + markdown_table(h100_headers, h100_body) + "\n") if h100_body else ""
    return (
        "`python benchmarks/sharded.py` (model: " + result["model"] + ", global batch "
        + str(result["batch"]) + ", 8 simulated CPU devices, Shardy). "
        "Collectives in XLA's optimized HLO of one step, the program a training loop runs "
        "(arguments from `scale_args`, as the step's outputs come back); "
        "*small*: at most "
        f"{SMALL} elements (scalar or packed exponent all-reduces, latency only); *serial*: "
        "the most collectives on one data path (each waits for the one before, so XLA cannot "
        "combine them); KiB moved: "
        "result sizes of the collectives per device; *outputs off*: output leaves whose "
        "sharding differs from jax.jit's; step time against the original on the simulated "
        "devices (rough: 8 devices share the host's cores). *f16* and *default* have "
        "`statistics=\"auto\"` (the default), which delays the statistics of a partitioned "
        "step: measured on a call fed the outputs of the one before (its second program; "
        "compile s includes both, and the first call); *-current*: `statistics=\"current\"`, "
        "one chain of statistics as on one device. The constraint step's "
        "output is sharded where its argument is not, so feeding it back adds an all-gather."
        "\n\n"
        + markdown_table(headers, body) + "\n" + h100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("gpt", "mlp"), default="gpt")
    parser.add_argument("--setups", nargs="+", choices=list(sharded_setups.SETUPS),
                        default=list(sharded_setups.SETUPS))
    parser.add_argument("--policies", nargs="+", choices=list(POLICIES),
                        default=list(POLICIES))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="global batch, a multiple of 8 (%(default)s: 2 sequences per "
                        "device; XLA:GPU's fusions depend on shapes: see docs/how-it-works.md)")
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--no-h100", action="store_true",
                        help="skip the 8-H100 compile (done when the gpu-aot extra is installed)")
    args = parser.parse_args()
    if args.batch < 8 or args.batch % 8:
        parser.error("--batch must be a positive multiple of 8 (the devices)")
    h100 = not args.no_h100 and gpu_aot.available()
    rows: list[dict[str, Any]] = []
    for setup in args.setups:
        rows += measure(setup, args.model, args.policies, args.rounds, h100, args.batch)
        print(format_table(*table(rows[-1 - len(args.policies):])), flush=True)
        if h100:
            print(format_table(*h100_table(rows[-1 - len(args.policies):])), flush=True)
    result = {"environment": environment(), "model": args.model, "batch": args.batch,
              "rows": rows}
    print(format_table(*table(rows)))
    if h100:
        print(format_table(*h100_table(rows)))
    publish(RESULTS / "sharded.json", result, "Sharded steps", doc_section,
            doc=not args.no_doc)


if __name__ == "__main__":
    main()
