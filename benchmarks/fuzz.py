"""Fuzz the ``scalify-hlo`` CLI with thousands of mutated modules and count outcomes.

Each case mutates a real module (a sample step from ``testdata/steps`` or a chunk of a golden
file): lines deleted or swapped, element types and shapes changed (f64, complex, dynamic,
10^11 elements), text truncated, random bytes, bytecode junk, unknown dialect ops, tuples,
unregistered custom_calls. It is run as ``scalify-hlo rewrite IN -o OUT`` in its own process
(10 s limit, 4 GiB address space) and classified as OK, ERROR (a clean one-line error) or a
failure (CRASH, TRACEBACK, MULTILINE, HANG, PARTIAL, INTERNAL); see ``tests/fuzz_cases.py``.

    python benchmarks/fuzz.py --cases 5000 --seed 0          # counts, JSON, docs section
    python benchmarks/fuzz.py --seed 0 --reproduce 1234 --write case.mlir   # one case's input

Results go to ``docs/results/fuzz.json`` and the fuzz section of ``docs/robustness.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from common import RESULTS, ROOT, format_table, write_json

sys.path.insert(0, str(ROOT / "tests"))
import fuzz_cases as fc  # noqa: E402  (tests/ is not a package)

DOC = ROOT / "docs" / "robustness.md"
BEGIN, END = "<!-- fuzz:begin -->", "<!-- fuzz:end -->"


def replace_section(path: Path, begin: str, end: str, body: str) -> None:
    """Put ``body`` between the ``begin`` and ``end`` markers of ``path`` (appended if absent)."""
    text = path.read_text() if path.exists() else ""
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)


def markdown(payload: dict) -> str:
    """The docs section, from the JSON payload (so ``--render`` can redo it from a file)."""
    lines = [
        f"`python benchmarks/fuzz.py --cases {payload['cases']} --seed {payload['seed']}` "
        f"({payload['mode']} mode, {payload['workers']} workers, {payload['seconds']:.0f} s):",
        "",
        "| outcome | cases |",
        "|---|---:|",
        *[f"| {name} | {count} |" for name, count in payload["counts"].items()],
        "",
        "| mutation (cases using it) | OK | ERROR | failures |",
        "|---|---:|---:|---:|",
    ]
    failure_names = {o.value for o in fc.FAILURES}
    for name, c in sorted(payload["by_mutation"].items()):
        bad = sum(v for k, v in c.items() if k in failure_names)
        lines.append(f"| {name} | {c.get('OK', 0)} | {c.get('ERROR', 0)} | {bad} |")
    lines.append("")
    failures = payload["failures"]
    if failures:
        lines.append("Failures (reproduce one with `--seed S --reproduce INDEX --write F`):")
        lines.append("")
        for r in failures[:30]:
            detail = r.get("detail") or str(r.get("stderr_tail", "")).strip()[-200:]
            lines.append(f"* case {r['index']} {r['outcome']}: {'+'.join(r['mutations'])} on "
                         f"`{r['seed_name']}`: {detail}")
    else:
        lines.append("No failures.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mode", choices=("fork", "exec"), default="fork",
                        help="fork each case from a zygote interpreter (fast) or exec the "
                             "console script")
    parser.add_argument("--timeout", type=float, default=fc.TIMEOUT_S)
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz.json")
    parser.add_argument("--no-doc", action="store_true", help="leave docs/robustness.md alone")
    parser.add_argument("--reproduce", type=int, metavar="INDEX",
                        help="only regenerate case INDEX and print how to run it")
    parser.add_argument("--write", type=Path, help="with --reproduce: where to write the input")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="only rewrite the docs section from an earlier run's JSON")
    args = parser.parse_args()

    if args.render is not None:
        replace_section(DOC, BEGIN, END, markdown(json.loads(args.render.read_text())))
        return

    if args.reproduce is not None:
        case = fc.make_cases(1, args.seed, start=args.reproduce)[0]
        target = args.write or Path(f"fuzz-case-{args.reproduce}.mlir")
        target.write_bytes(case.data)
        pipeline = f" --pipeline '{case.pipeline}'" if case.pipeline else ""
        print(f"{case.seed_name} + {'+'.join(case.mutations)} -> {target}\n"
              f"scalify-hlo rewrite {target} -o out.mlir{pipeline}")
        return

    cases = fc.make_cases(args.cases, args.seed)
    done: Counter = Counter()
    start = time.perf_counter()

    def progress(result: fc.Result) -> None:
        done[result.outcome.value] += 1
        total = sum(done.values())
        if result.outcome in fc.FAILURES:
            print(f"case {result.index}: {result.outcome} {'+'.join(result.mutations)} "
                  f"{result.detail}", file=sys.stderr, flush=True)
        if total % 250 == 0:
            print(f"[{total}/{len(cases)} {time.perf_counter() - start:.0f} s] {dict(done)}",
                  file=sys.stderr, flush=True)

    results = fc.run_cases(cases, args.mode, args.workers, args.timeout, progress)
    seconds = time.perf_counter() - start
    table = fc.counts(results)
    by_mutation: dict[str, Counter] = {}
    for result in results:
        for name in set(result.mutations):
            by_mutation.setdefault(name, Counter())[result.outcome.value] += 1
    failures = list(fc.iter_failures(results))
    kinds = Counter(fc.error_kind(r) for r in results if r.outcome is fc.Outcome.ERROR)

    print(format_table(["outcome", "cases"], list(table.items())))
    print("most common errors:")
    for kind, count in kinds.most_common(25):
        print(f"{count:6d}  {kind}")
    print(f"{len(results)} cases in {seconds:.0f} s ({args.mode} mode, {args.workers} workers)")
    for r in failures:
        print(f"FAILURE case {r.index} {r.outcome}: {'+'.join(r.mutations)} on {r.seed_name} "
              f"pipeline={r.pipeline}: {r.detail}")
    payload = {
        "cases": args.cases, "seed": args.seed, "mode": args.mode, "workers": args.workers,
        "timeout_s": args.timeout, "seconds": round(seconds, 1), "counts": table,
        "by_mutation": {k: dict(v) for k, v in sorted(by_mutation.items())},
        "error_kinds": dict(kinds.most_common()),
        "failures": [r.as_dict() for r in failures],
    }
    write_json(args.out, payload)
    if not args.no_doc:
        replace_section(DOC, BEGIN, END, markdown(json.loads(json.dumps(payload))))


if __name__ == "__main__":
    main()
