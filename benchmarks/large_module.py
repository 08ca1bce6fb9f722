"""How rewriting scales with module size: time and peak memory for 1k to 100k ops.

The module is a deep residual MLP written as StableHLO text: layer ``i`` computes
``h = h + tanh(dot(h, W[i % 4]) + b[i % 4]) * 0.5`` (7 ops: dot_general, broadcast_in_dim,
add, tanh, constant, multiply, add), so N ops is N / 7 layers over 4 shared weight
matrices. Each (size, pipeline) runs in its own process so that its peak RSS
(``ru_maxrss``, which includes the ~200 MB of the imported jax/MLIR runtime) is its own; the
child times parsing, each pass of the pipeline, verification and printing separately.

    python benchmarks/large_module.py                         # 1k, 10k, 100k; both pipelines
    python benchmarks/large_module.py --sizes 10000 --profile # cProfile of one rewrite

Results go to ``docs/results/large_module.json`` and the large-module section of
``docs/robustness.md``. Scaling is linear when 10x the ops costs about 10x the time.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from common import RESULTS, ROOT, environment, format_table, write_json
from fuzz import replace_section

from scalify_hlo.policy import DEFAULT_PIPELINE

DOC = ROOT / "docs" / "robustness.md"
BEGIN, END = "<!-- large-module:begin -->", "<!-- large-module:end -->"
F32_PIPELINE = "scalify{data-dtype=f32},simplify"
OPS_PER_LAYER = 7
WIDTH, BATCH = 16, 8
MEMORY_LIMIT_MB = 2048


def generate(ops: int) -> str:
    """A residual MLP of about ``ops`` ops in ``@main``."""
    layers = max(1, ops // OPS_PER_LAYER)
    h, w, b = (f"tensor<{BATCH}x{WIDTH}xf32>", f"tensor<{WIDTH}x{WIDTH}xf32>",
               f"tensor<{WIDTH}xf32>")
    args = [f"%x: {h}"] + [f"%w{j}: {w}" for j in range(4)] + [f"%b{j}: {b}" for j in range(4)]
    lines = [f"func.func public @main({', '.join(args)}) -> {h} {{"]
    current = "%x"
    for i in range(layers):
        j = i % 4
        lines += [
            f"  %d{i} = stablehlo.dot_general {current}, %w{j}, contracting_dims = [1] x [0] "
            f": ({h}, {w}) -> {h}",
            f"  %bb{i} = stablehlo.broadcast_in_dim %b{j}, dims = [1] : ({b}) -> {h}",
            f"  %a{i} = stablehlo.add %d{i}, %bb{i} : {h}",
            f"  %t{i} = stablehlo.tanh %a{i} : {h}",
            f"  %c{i} = stablehlo.constant dense<5.000000e-01> : {h}",
            f"  %m{i} = stablehlo.multiply %t{i}, %c{i} : {h}",
            f"  %h{i} = stablehlo.add %m{i}, {current} : {h}",
        ]
        current = f"%h{i}"
    lines += [f"  return {current} : {h}", "}", ""]
    return "\n".join(lines)


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {bench!r})
from large_module import generate
from scalify_hlo import module_io
from scalify_hlo.rewrites import PassContext, parse_pipeline, run_pipeline

ops, pipeline, profile = {ops}, {pipeline!r}, {profile}
text = generate(ops)
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
timings = {{}}

def rewrite():
    start = time.perf_counter()
    with module_io.ir_context():
        module = module_io.parse_module(text)
        timings["parse"] = time.perf_counter() - start
        before = sum(module_io.count_ops(module).values())
        context = PassContext()
        for module_pass in parse_pipeline(pipeline):
            t = time.perf_counter()
            run_pipeline(module, [module_pass], context)
            timings[module_pass.name] = time.perf_counter() - t
        t = time.perf_counter()
        module_io.verify(module)
        out = module_io.write_module(module, module_io.EmitFormat.TEXT)
        timings["verify+print"] = time.perf_counter() - t
        after = sum(module_io.count_ops(module).values())
    return before, after, len(out), time.perf_counter() - start

if profile:
    import cProfile, pstats
    profiler = cProfile.Profile()
    profiler.enable()
    before, after, size, total = rewrite()
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(20)
else:
    before, after, size, total = rewrite()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"ops_before": before, "ops_after": after, "output_bytes": size,
                  "seconds": total, "timings": timings, "peak_rss_mb": peak / 1024,
                  "baseline_rss_mb": base_rss / 1024}}))
"""


def measure(ops: int, pipeline: str, profile: bool = False, timeout: float = 3600) -> dict:
    code = _CHILD.format(bench=str(Path(__file__).parent), ops=ops, pipeline=pipeline,
                         profile=profile)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    if profile:
        print(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{ops} ops, {pipeline}: exit {proc.returncode}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scaling_exponent(rows: list[dict], pipeline: str) -> float | None:
    """``log(t_big / t_small) / log(n_big / n_small)`` over the two largest sizes: 1 is
    linear, 2 quadratic."""
    pts = sorted((r["ops_before"], r["seconds"]) for r in rows if r["pipeline"] == pipeline)
    if len(pts) < 2:
        return None
    (n0, t0), (n1, t1) = pts[-2], pts[-1]
    return math.log(t1 / t0) / math.log(n1 / n0)


def markdown(rows: list[dict], exponents: dict[str, float | None]) -> str:
    lines = [
        "`python benchmarks/large_module.py` (residual MLP, 7 ops per layer; one process per "
        "row; peak RSS includes the ~200 MB jax/MLIR runtime):",
        "",
        "| pipeline | ops | ops after | seconds | ops/s | peak RSS (MB) | slowest step |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        slowest = max(r["timings"].items(), key=lambda kv: kv[1])
        lines.append(f"| `{r['pipeline']}` | {r['ops_before']} | {r['ops_after']} | "
                     f"{r['seconds']:.2f} | {r['ops_before'] / r['seconds']:.0f} | "
                     f"{r['peak_rss_mb']:.0f} | {slowest[0]} {slowest[1]:.2f} s |")
    lines.append("")
    for pipeline, exponent in exponents.items():
        if exponent is not None:
            lines.append(f"* `{pipeline}`: time grows as ops^{exponent:.2f} between the two "
                         f"largest sizes (1.00 is linear).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--pipelines", nargs="+", default=[DEFAULT_PIPELINE, F32_PIPELINE])
    parser.add_argument("--profile", action="store_true",
                        help="cProfile each rewrite and print the top functions")
    parser.add_argument("--out", type=Path, default=RESULTS / "large_module.json")
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()

    rows = []
    for pipeline in args.pipelines:
        for ops in args.sizes:
            result = measure(ops, pipeline, args.profile)
            result["pipeline"] = pipeline
            rows.append(result)
            print(f"{pipeline}  {ops} ops: {result['seconds']:.2f} s, "
                  f"{result['peak_rss_mb']:.0f} MB  {json.dumps(result['timings'])}",
                  file=sys.stderr, flush=True)
    print(format_table(
        ["pipeline", "ops", "ops after", "seconds", "ops/s", "peak MB"],
        [[r["pipeline"], r["ops_before"], r["ops_after"], f"{r['seconds']:.2f}",
          f"{r['ops_before'] / r['seconds']:.0f}", f"{r['peak_rss_mb']:.0f}"] for r in rows]))
    exponents = {p: scaling_exponent(rows, p) for p in args.pipelines}
    for pipeline, exponent in exponents.items():
        if exponent is not None:
            print(f"{pipeline}: time ~ ops^{exponent:.2f}")
    over = [r for r in rows if r["peak_rss_mb"] > MEMORY_LIMIT_MB]
    for r in over:
        print(f"OVER {MEMORY_LIMIT_MB} MB: {r['pipeline']} {r['ops_before']} ops")
    if args.profile:
        return
    write_json(args.out, {"environment": environment(), "rows": rows,
                          "scaling_exponents": exponents,
                          "memory_limit_mb": MEMORY_LIMIT_MB})
    if not args.no_doc:
        replace_section(DOC, BEGIN, END, markdown(rows, exponents))


if __name__ == "__main__":
    main()
