"""What ``scalify-hlo explain``'s records cost: the full pipeline on the GPT-2-small step with
records off (what ``rewrite`` and the benchmarks run) and on (``explain``, ``compile_scaled``).

Why this script exists: the passes keep a record per op only when asked, and a rewrite that
nobody explains must not get slower. Records on and off are measured in alternation in one
process (``interleaved``), wall-clock and CPU time, and compared per round (``paired_ratio``),
so load on a shared machine hits both alike. Also: the records' count and the time to make
the two tables from them.

    python benchmarks/explain_cost.py              # 5 rounds, about a minute on 2 cores
    python benchmarks/explain_cost.py --rounds 1   # smoke run

Results: ``docs/results/explain_cost.json`` and the table printed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import (
    GPT2_SMALL,
    RESULTS,
    environment,
    format_table,
    interleaved,
    load_average,
    load_models,
    paired_ratio,
    summary,
    timed,
    write_json,
)

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.explain import Explanation
from scalify_hlo.policy import DEFAULT_PIPELINE


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (%(default)s)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    return args


def rewrite(text: str, records: bool, cpu: list[float]) -> Any:
    start = time.process_time()
    result = rewrite_module_source(text, DEFAULT_PIPELINE, records=records,
                                   count_ops=True)
    cpu.append(time.process_time() - start)
    if result.error is not None:
        raise SystemExit(f"rewrite failed: {result.error}")
    return result


def main() -> None:
    args = parse_args()
    models = load_models()
    step_fn, example = models.gpt_step(**GPT2_SMALL)
    text = models.export_text(step_fn, example)
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    samples = interleaved({"off": lambda: rewrite(text, False, cpu["off"]),
                           "on": lambda: rewrite(text, True, cpu["on"])}, args.rounds)
    for name in cpu:  # the warm-up round is not a sample
        cpu[name] = cpu[name][-args.rounds:]
    result = rewrite(text, True, [])
    records = result.context.records or []
    explanation = Explanation(records, DEFAULT_PIPELINE)
    _, tables_s = timed(lambda: (explanation.to_text(), explanation.render("json")))
    data = {
        "config": GPT2_SMALL, "pipeline": DEFAULT_PIPELINE,
        "ops_before": sum(result.ops_before.values()), "records": len(records),
        "off": summary(samples["off"]), "on": summary(samples["on"]),
        "off_cpu": summary(cpu["off"]), "on_cpu": summary(cpu["on"]),
        "on_over_off": paired_ratio(samples["on"], samples["off"]),
        "on_over_off_cpu": paired_ratio(cpu["on"], cpu["off"]),
        "tables_s": tables_s, "load_average": load_average(), "environment": environment(),
    }
    print(format_table(
        ["records", "median s", "min s", "CPU median s", "ratio to off (CPU)"],
        [["off", f"{data['off']['median_s']:.3f}", f"{data['off']['min_s']:.3f}",
          f"{data['off_cpu']['median_s']:.3f}", "1.00"],
         ["on", f"{data['on']['median_s']:.3f}", f"{data['on']['min_s']:.3f}",
          f"{data['on_cpu']['median_s']:.3f}",
          f"{data['on_over_off']:.2f} ({data['on_over_off_cpu']:.2f})"]]))
    print(f"GPT-2-small step: {data['ops_before']} ops, {len(records)} records, tables "
          f"(text and JSON) in {tables_s:.2f} s; load average {data['load_average']}")
    write_json(RESULTS / "explain_cost.json", data)
    print(f"wrote {RESULTS / 'explain_cost.json'}")


if __name__ == "__main__":
    main()
