"""What the scale bookkeeping costs at run time: the rewritten step in f32 data mode against the
original, on XLA:CPU.

Why this script exists: with ``data-dtype=f32`` the rewrite computes the same numbers as the
original (multiplying by a power of two commutes with rounding), so any difference in step time
is the price of carrying scales: the scalar scale arithmetic, the extra rank-0 arguments and
results, and whatever fusion decisions XLA makes differently. That price has to be small for
the rewrite to be worth it once the data goes to f16/FP8.

Method: both modules compiled with ``compile_module``; inputs are the model's example arguments
(``testdata/models.py``), split into (data, scale) pairs with RMS power-of-two scales
(``split_inputs``) for the rewritten one, and put on the device once. A timed call is
``executable.execute(buffers)`` followed by ``block_until_ready`` of every output. Each round
times one block of calls of the original and one of the rewrite (order reversed on odd rounds;
a block is as many calls as fill ``--block-ms``), and the reported ratio is the median over
rounds of rewritten/original per-call time, so load that drifts between rounds cancels out.
Before timing, one call of each is checked to give the same loss.

The same comparison for the program the Python API runs: ``compile_scaled(fn)`` (state from
``scale_args``, scales as one f32 vector per call) against ``jax.jit(fn)``, one call being the
step and a wait for its loss, as in a training loop (``benchmarks/overhead.py`` has the
details on the small MLP).

Target: the rewritten step at most 5% slower (ratio <= 1.05) for every model.

    python benchmarks/runtime_overhead.py            # MLP, transformer, 2-layer GPT step
    python benchmarks/runtime_overhead.py --quick    # fewer rounds, no doc

Results: ``docs/results/runtime_overhead.json`` and the "Runtime overhead" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from common import (
    RESULTS,
    SCALIFY_F32,
    add_gpt_arguments,
    environment,
    format_table,
    gpt_config,
    gpt_label,
    interleaved,
    load_average,
    load_models,
    markdown_table,
    output_path,
    paired_ratio,
    publish,
    rewrite_or_fail,
    sample_step_texts,
    summary,
    verdict,
)

from scalify_hlo import compile_scaled
from scalify_hlo.runner import compile_module
from scalify_hlo.scaled_array import ScaledArray, is_scaled_leaf
from scalify_hlo.signature import (
    EntrySignature,
    TensorSpec,
    entry_signature,
    join_outputs,
    split_inputs,
)

MAX_RATIO = 1.05


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_arguments(parser)
    parser.add_argument("--rounds", type=int, default=41,
                        help="interleaved rounds per model (%(default)s)")
    parser.add_argument("--block-ms", type=float, default=50.0,
                        help="length of one timed block of calls (%(default)s ms)")
    parser.add_argument("--no-gpt", action="store_true", help="sample steps only")
    parser.add_argument("--quick", action="store_true", help="5 rounds, 10 ms blocks, no doc")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/runtime_overhead.json; a --quick "
                        "run's goes to the temporary directory)")
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.block_ms, args.no_doc = 5, 10.0, True
    if args.rounds < 1 or args.block_ms <= 0:
        parser.error("--rounds must be >= 1 and --block-ms > 0")
    args.out = output_path(args.out, RESULTS / "runtime_overhead.json", args.quick)
    return args


def step_runner(text: str, inputs: list[np.ndarray]) -> tuple[Callable[[], Any], Any]:
    """A no-argument call of the compiled module on device-resident inputs, and the
    executable. Inputs are put on the device once, outside the timed region."""
    executable = compile_module(text)
    device = executable.local_devices()[0]
    buffers = [jax.device_put(x, device) for x in inputs]

    def call() -> Any:
        return jax.block_until_ready(executable.execute(buffers))

    return call, executable


def _tensor_type(spec: TensorSpec) -> str:
    return f"tensor<{''.join(f'{d}x' for d in spec.shape)}{spec.element}>"


def null_module(signature: EntrySignature) -> str:
    """A module with ``signature`` that does no work: every result is a broadcast zero.

    Its step time is the dispatch floor of that signature: handing each argument buffer to
    XLA, allocating and filling each result buffer, wrapping each result as an array. The
    rewrite doubles the number of floating arguments and results (one rank-0 scale each), and
    on XLA:CPU that per-buffer host cost is large next to a small step's compute.
    """
    params = ", ".join(f"%a{i}: {_tensor_type(s)}" for i, s in enumerate(signature.inputs))
    body, results = [], []
    zeros: dict[str, str] = {}
    for index, spec in enumerate(signature.results):
        if spec.element not in zeros:
            zero = "false" if spec.element == "i1" else (
                "0.0" if spec.element.startswith(("f", "bf")) else "0")
            zeros[spec.element] = f"%zero_{spec.element}"
            body.append(f"  %zero_{spec.element} = stablehlo.constant dense<{zero}> : "
                        f"tensor<{spec.element}>")
        if spec.shape:
            body.append(f"  %r{index} = stablehlo.broadcast_in_dim {zeros[spec.element]}, "
                        f"dims = [] : (tensor<{spec.element}>) -> {_tensor_type(spec)}")
            results.append(f"%r{index}")
        else:
            results.append(zeros[spec.element])
    types = ", ".join(_tensor_type(s) for s in signature.results)
    return (f"func.func public @main({params}) -> ({types}) {{\n" + "\n".join(body)
            + f"\n  return {', '.join(results)} : {types}\n}}\n")


def calls_per_block(call: Callable[[], Any], block_s: float) -> int:
    """How many calls fill ``block_s`` seconds (at least one), from a short calibration."""
    call()
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < block_s / 4 or count < 2:
        call()
        count += 1
    per_call = (time.perf_counter() - start) / count
    return max(1, round(block_s / per_call))


def loss_of(outputs: Any) -> Any:
    """The last output (the loss) as an array: a ScaledArray's data."""
    leaf = jax.tree.leaves(outputs, is_leaf=is_scaled_leaf)[-1]
    return leaf.data if isinstance(leaf, ScaledArray) else leaf


def api_calls(fn: Callable[..., Any], example: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    """``jax.jit(fn)`` and the ``compile_scaled`` step, each a call and a wait for the loss."""
    example = jax.device_put(example)
    baseline = jax.jit(fn)
    step = compile_scaled(fn, *example, pipeline=SCALIFY_F32)
    state = step.scale_args(*example)
    return {"jit": lambda: loss_of(baseline(*example)).block_until_ready(),
            "compile_scaled": lambda: loss_of(step(*state)).block_until_ready()}


def measure(name: str, text: str, leaves: list[np.ndarray], fn: Callable[..., Any],
            example: tuple[Any, ...], args: argparse.Namespace) -> dict[str, Any]:
    signature = entry_signature(text)
    if [tuple(x.shape) for x in leaves] != [spec.shape for spec in signature.inputs]:
        raise SystemExit(f"{name}: example arguments do not match the module's signature")
    rewritten = rewrite_or_fail(text, SCALIFY_F32)
    scaled_inputs = split_inputs(signature, leaves)
    original_call, _ = step_runner(text, leaves)
    rewritten_call, _ = step_runner(rewritten, scaled_inputs)
    loss_original = float(np.asarray(original_call()[-1]))
    joined = join_outputs(signature, [np.asarray(x) for x in rewritten_call()])
    loss_rewritten = float(joined[-1])

    floor_original, _ = step_runner(null_module(signature), leaves)
    floor_rewritten, _ = step_runner(null_module(entry_signature(rewritten)), scaled_inputs)
    calls = {"original": original_call, "rewritten": rewritten_call,
             "floor_original": floor_original, "floor_rewritten": floor_rewritten,
             **api_calls(fn, example)}
    block_s = args.block_ms / 1e3
    n = max(calls_per_block(original_call, block_s), calls_per_block(rewritten_call, block_s),
            calls_per_block(calls["compile_scaled"], block_s))

    def block(call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(n):
                call()
        return run

    samples = interleaved({k: block(c) for k, c in calls.items()}, args.rounds, warmup=1)
    per_call = {k: [s / n for s in v] for k, v in samples.items()}
    ratio = paired_ratio(per_call["rewritten"], per_call["original"])
    api_ratio = paired_ratio(per_call["compile_scaled"], per_call["jit"])

    def paired_difference(a: str, b: str) -> float:
        return statistics.median(x - y for x, y in zip(per_call[a], per_call[b], strict=True))

    return {
        "model": name, "inputs": len(leaves), "inputs_rewritten": len(scaled_inputs),
        "results": len(signature.results),
        "results_rewritten": len(entry_signature(rewritten).results),
        "calls_per_block": n, "rounds": args.rounds,
        **{k: summary(v) for k, v in per_call.items()},
        "ratio": ratio,
        "ratio_of_medians": (statistics.median(per_call["rewritten"])
                             / statistics.median(per_call["original"])),
        # Seconds the rewrite adds per call, and what the same change of signature alone
        # adds to a module that does nothing (both medians of per-round differences).
        "extra_s": paired_difference("rewritten", "original"),
        "extra_floor_s": paired_difference("floor_rewritten", "floor_original"),
        "loss_original": loss_original, "loss_rewritten": loss_rewritten,
        "api_ratio": api_ratio, "module_target_met": ratio <= MAX_RATIO,
        "target_met": api_ratio <= MAX_RATIO,
    }


HEADERS = ["model", "buffers in/out", "rewritten in/out", "original ms", "rewritten ms",
           "ratio", "extra ms", "no-op floor ms", "no-op floor rewritten ms",
           "extra ms of no-op", "loss original", "loss rewritten", "jax.jit ms",
           "compile_scaled ms", "compile_scaled ratio"]


def table_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    def ms(r: dict[str, Any], key: str) -> str:
        return f"{r[key]['median_s'] * 1e3:.3f}"

    return [[r["model"], f"{r['inputs']}/{r['results']}",
             f"{r['inputs_rewritten']}/{r['results_rewritten']}", ms(r, "original"),
             ms(r, "rewritten"), f"{r['ratio']:.3f}", f"{r['extra_s'] * 1e3:.3f}",
             ms(r, "floor_original"), ms(r, "floor_rewritten"),
             f"{r['extra_floor_s'] * 1e3:.3f}",
             f"{r['loss_original']:.6f}", f"{r['loss_rewritten']:.6f}", ms(r, "jit"),
             ms(r, "compile_scaled"), f"{r['api_ratio']:.3f}"] for r in rows]


def doc_section(result: dict[str, Any]) -> str:
    rows = result["models"]
    failed = [r["model"] for r in rows if not r["target_met"]]
    module_failed = [r["model"] for r in rows if not r["module_target_met"]]
    return "\n".join([
        "`python benchmarks/runtime_overhead.py`. Step time on XLA:CPU of the step rewritten "
        f"with `{SCALIFY_F32}` (same numbers as the original) over the original, both "
        "compiled with `compile_module`; inputs on the device, split into (data, scale) with "
        "RMS scales for the rewrite; one call is `execute` + `block_until_ready`. Per-call "
        "medians over "
        f"{rows[0]['rounds']} rounds; each round times a block of calls of each (order "
        "alternating), *ratio* is the median of the per-round ratios and *extra ms* of the "
        "per-round differences. *no-op floor*: the same timing of a module with the same "
        "entry signature that only fills its results with zeros, for the original and the "
        "rewritten signature: the host-side cost of handing over the arguments and "
        "allocating and wrapping the results; *extra ms of no-op* is how much of *extra ms* "
        "the doubled buffer count alone explains. *compile_scaled*: the step as the Python "
        "API runs it (state from `scale_args`, scales as one f32 vector per call) against "
        "`jax.jit(fn)`, one call being the step and a wait for its loss. Load average at "
        "the start: "
        f"{result['load_average_start']}, at the end: {result['load_average_end']}.",
        "", markdown_table(HEADERS, table_rows(rows)), "",
        f"* At most {MAX_RATIO - 1:.0%} slower for every model, the `compile_scaled` step: "
        f"**{verdict(result['target_met'])}**"
        + (f" ({', '.join(failed)} over)." if failed else ".")
        + " The module as is, one buffer per scale: "
        f"**{verdict(result['module_target_met'])}**"
        + (f" ({', '.join(module_failed)} over)." if module_failed else "."),
        "* Where *extra ms of no-op* is close to *extra ms*, the overhead is host-side: one "
        "more rank-0 buffer per floating argument and result (the scaled signature) to hand "
        "over, allocate and wrap on every call, not computation. It is fixed per call, so it "
        "matters for small steps and vanishes for large ones.",
        "* A ratio below 1 means XLA:CPU compiled the rewrite differently, not less work; "
        "see Program growth (on the GPT step it sends more dots to XNNPACK, `kCustom`: the "
        "likely cause).",
    ])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    models = load_models()
    texts = sample_step_texts(("mlp_step", "transformer_step"))
    cases: list[tuple[str, str, Any]] = [
        (name, text, models.STEPS[name]()) for name, text in texts.items()]
    if not args.no_gpt:
        config = gpt_config(args)
        factory = models.gpt_step(**config)
        cases.append((gpt_label(config), models.export_text(*factory), factory))
    load_start = load_average()
    rows = []
    for name, text, (step_fn, example) in cases:
        print(f"{name} ...", flush=True)
        leaves = [np.asarray(x) for x in jax.tree.leaves(example)]
        rows.append(measure(name, text, leaves, step_fn, example, args))
    result = {"environment": environment(), "pipeline": SCALIFY_F32, "max_ratio": MAX_RATIO,
              "load_average_start": load_start, "load_average_end": load_average(),
              "models": rows, "target_met": all(r["target_met"] for r in rows),
              "module_target_met": all(r["module_target_met"] for r in rows)}
    print(format_table(HEADERS, table_rows(rows)))
    print(f"\nat most {MAX_RATIO - 1:.0%} slower: compile_scaled "
          f"{verdict(result['target_met'])}; module as is "
          f"{verdict(result['module_target_met'])}")
    publish(args.out, result, "Runtime overhead", doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
