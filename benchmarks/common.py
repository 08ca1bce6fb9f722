"""Helpers shared by the benchmark scripts: loading the sample models, timing, reporting.

Benchmarks are scripts, not a package: each one puts this folder on ``sys.path`` (Python
does that for ``python benchmarks/NAME.py``) and imports ``common``. Nothing in the library
imports from here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
# The GPT-2-small shape of ``testdata/models.py``'s GPT step (Adam), the issues' reference.
GPT2_SMALL = {"n_layers": 12, "d_model": 768, "n_heads": 12, "context": 256, "vocab": 256,
              "batch": 8}


def output_path(given: Path | None, published: Path, quick: bool) -> Path:
    """Where a benchmark writes a result file: ``given`` (its ``--out``) when named, else
    ``published`` (under docs/), or for a ``--quick`` smoke run the temporary directory, so
    that a smoke run never writes over the published results."""
    if given is not None:
        return given
    return Path(tempfile.gettempdir()) / f"quick_{published.name}" if quick else published


def json_from_child(script: str, flag: str, text: str, args: Sequence[str] = (),
                    env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run ``script --flag FILE *args`` in a fresh interpreter, ``text`` written to FILE (a
    module too large for a command line); its last stdout line is JSON. Returns that and
    the child's stderr (XLA's logs); a failed child stops the benchmark with its last
    error line."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as handle:
        handle.write(text)
    try:
        done = subprocess.run([sys.executable, script, flag, handle.name, *args],
                              capture_output=True, text=True, check=False,
                              env=None if env is None else {**os.environ, **env})
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        raise SystemExit(f"{Path(script).name} {flag} failed: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def load_models() -> ModuleType:
    """``testdata/models.py`` (see ``load_testdata``)."""
    return load_testdata("models")


def load_testdata(name: str) -> ModuleType:
    """``testdata/NAME.py`` by path (testdata/ is not a package, and must not become one
    just for the benchmarks)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "testdata" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated calls, after warm-up (compilation and first-touch
    allocation excluded). The median is the figure to quote: it ignores the occasional
    scheduler hiccup that a mean would fold in."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    warmup: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> Timing:
    """Time ``fn()``; ``fn`` must block until its work is done (``block_until_ready``)."""
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing(statistics.median(samples), min(samples), max(samples), repeats, warmup)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the seconds it took, for one-off steps (export, rewrite, compile)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def cpu_timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the process CPU time it took (all threads)."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def cpu_compile(text: str) -> dict[str, Any]:
    """XLA:CPU compile of a module: CPU seconds, optimized HLO instructions and fusions."""
    from scalify_hlo import gpu_aot
    from scalify_hlo.runner import compile_module

    executable, seconds = cpu_timed(lambda: compile_module(text))
    counts = gpu_aot.count_hlo(executable.hlo_modules()[0].to_string(), seconds)
    return {"compile_s": seconds, "instructions": counts.instructions,
            "rank0_instructions": counts.rank0_instructions, "fusions": counts.fusions}


def compile_cells(counts: dict[str, Any] | None) -> list[Any]:
    """Table cells of one compile (``cpu_compile``'s or ``h100_compile``'s): seconds,
    instructions, fusions; dashes where it was not run."""
    if counts is None:
        return ["-", "-", "-"]
    return [f"{counts['compile_s']:.1f}", counts["instructions"], counts["fusions"]]


def h100_compile(text: str) -> dict[str, Any]:
    """Deviceless H100 compile (Triton GEMM off: FP8 dots show as cuBLASLt calls); the
    compile time is CPU time, like XLA:CPU's."""
    from scalify_hlo import gpu_aot

    compiled, seconds = cpu_timed(lambda: gpu_aot.compile_h100(text))
    return {**compiled.counts(), "compile_s": seconds}


def environment() -> dict[str, Any]:
    """What a reader needs to reproduce a number: versions, backend and device."""
    import jax
    import jaxlib

    device = jax.devices()[0]
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "platform": device.platform,
        "device_kind": getattr(device, "device_kind", ""),
        "compute_capability": getattr(device, "compute_capability", None),
        "host": platform.machine(),
    }


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with columns padded to their widest cell."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


# ----- shared by rewrite_cost, program_growth, runtime_overhead and memory ----------------
# The machine these run on is shared and noisy: absolute seconds drift with other people's
# load, so every figure is a ratio against a baseline measured in the same run, the two
# measured in alternation (``interleaved``) so that a load spike hits both alike.

STEPS_DIR = ROOT / "testdata" / "steps"
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
SCALIFY_F32 = "inline,scalify{data-dtype=f32},simplify"
SCALIFY_F16 = "inline,scalify{data-dtype=f16},simplify"


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int,
                warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each of ``fns`` per round, run in alternation.

    Each round calls every function once; the order is reversed on odd rounds so that no
    function always runs right after the same other one (caches, frequency, GC debt).
    Comparing per-round ratios (``paired_ratio``) cancels load that drifts between rounds.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            start = time.perf_counter()
            fns[name]()
            samples[name].append(time.perf_counter() - start)
    return samples


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """Median over rounds of ``numerator[i] / denominator[i]``: the ratio of two interleaved
    measurements, robust to load that changes between rounds."""
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True))


def summary(samples: Sequence[float]) -> dict[str, float | int]:
    """Median, min and max of timing samples, and how many there were."""
    return {"median_s": statistics.median(samples), "min_s": min(samples),
            "max_s": max(samples), "n": len(samples)}


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, recorded beside timings taken on a shared
    machine (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def sample_step_texts(names: Sequence[str] = ("mlp_step", "transformer_step", "scan_step"),
                      ) -> dict[str, str]:
    """The exported sample steps shipped in ``testdata/steps/`` by name."""
    return {name: (STEPS_DIR / f"{name}.mlir").read_text() for name in names}


def add_gpt_arguments(parser: argparse.ArgumentParser, layers: int = 2, d_model: int = 256,
                      heads: int = 4, context: int = 128, vocab: int = 256,
                      batch: int = 8) -> None:
    """The GPT step's shape flags, with defaults moderate enough for XLA:CPU to compile in
    seconds on a two-core machine."""
    parser.add_argument("--d-model", type=int, default=d_model, help="width (%(default)s)")
    parser.add_argument("--heads", type=int, default=heads, help="heads (%(default)s)")
    parser.add_argument("--context", type=int, default=context,
                        help="sequence length (%(default)s)")
    parser.add_argument("--vocab", type=int, default=vocab, help="vocabulary (%(default)s)")
    parser.add_argument("--batch", type=int, default=batch, help="batch size (%(default)s)")
    parser.add_argument("--layers", type=int, default=layers,
                        help="decoder layers of the GPT step (%(default)s)")


def gpt_config(args: argparse.Namespace, layers: int | None = None) -> dict[str, int]:
    """The ``gpt_step`` keyword arguments from ``add_gpt_arguments`` flags."""
    return {"n_layers": args.layers if layers is None else layers, "d_model": args.d_model,
            "n_heads": args.heads, "context": args.context, "vocab": args.vocab,
            "batch": args.batch}


def gpt_label(config: dict[str, int]) -> str:
    return (f"gpt L{config['n_layers']} d{config['d_model']} h{config['n_heads']} "
            f"t{config['context']} b{config['batch']}")


def count_module_ops(text: str) -> int:
    """Operations in a StableHLO module (all dialects, ``builtin.module`` excluded), the
    count ``scalify-hlo rewrite --stats`` reports."""
    from scalify_hlo import module_io

    with module_io.ir_context():
        return sum(module_io.count_ops(module_io.parse_module(text)).values())


def compiled_modules(exported: str, pipelines: dict[str, str], h100: bool,
                     rounds: int = 1) -> Iterator[dict[str, Any]]:
    """The original ``exported`` and its rewrite by each of ``pipelines`` (by name),
    compiled by XLA:CPU and, where ``h100``, for an H100: ``{"module", "cpu", "h100"}`` per
    module. With one round, each module as it finishes (a long run shows its progress).
    With ``rounds`` > 1, after one warm-up compile of the original on each compiler, every
    module is compiled once per round, the order reversed every other round, so that the
    machine's load moves every module alike; ``compile_s`` is then the median and
    ``compile_rounds_s`` each round's seconds, from which ``compile_ratio`` pairs rounds."""
    modules = {"original": exported} | {name: rewrite_or_fail(exported, pipeline)
                                         for name, pipeline in pipelines.items()}
    compilers: dict[str, Callable[[str], dict[str, Any]]] = {"cpu": cpu_compile}
    if h100:
        compilers["h100"] = h100_compile
    if rounds <= 1:
        for module, text in modules.items():
            yield {"module": module, "cpu": cpu_compile(text),
                   "h100": h100_compile(text) if h100 else None}
        return
    for compile_ in compilers.values():
        compile_(exported)  # first-call costs out of the samples
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        module: {where: [] for where in compilers} for module in modules}

    def compile_everywhere(module: str) -> None:
        for where, compile_ in compilers.items():
            runs[module][where].append(compile_(modules[module]))

    # interleaved's own clock is not read: each compiler's counts carry its CPU seconds.
    interleaved({module: lambda module=module: compile_everywhere(module)
                 for module in modules}, rounds, warmup=0)
    for module, results in runs.items():
        row: dict[str, Any] = {"module": module, "cpu": None, "h100": None}
        for where, counts in results.items():
            seconds = [c["compile_s"] for c in counts]
            row[where] = counts[0] | {"compile_s": statistics.median(seconds),
                                      "compile_rounds_s": seconds}
        yield row


def compile_ratio(counts: dict[str, Any], base: dict[str, Any]) -> float:
    """``counts``' compile time over ``base``'s (``cpu_compile``'s or ``h100_compile``'s
    results, from ``compiled_modules``): the median of the per-round ratios where both were
    compiled in the same rounds, else the ratio of their seconds."""
    mine, theirs = counts.get("compile_rounds_s"), base.get("compile_rounds_s")
    if mine and theirs and len(mine) == len(theirs):
        return paired_ratio(mine, theirs)
    return counts["compile_s"] / base["compile_s"]


def rewrite_or_fail(text: str, pipeline: str) -> str:
    """The rewritten module's text; a failed rewrite stops the benchmark with its error."""
    from scalify_hlo.api import rewrite_module_source

    chunk = rewrite_module_source(text, pipeline)
    if chunk.error is not None or chunk.output is None:
        raise SystemExit(f"rewrite with {pipeline!r} failed: {chunk.error}")
    return chunk.output.decode()


def steady_state_pipeline(policy: Any, partitioned: bool) -> str:
    """The pipeline text of the module a training loop runs from its second call: where the
    policy's statistics are delayed (``delayed``, or ``auto`` on a ``partitioned`` step), the
    one that applies the exponents the call before measured (``delayed-statistics=use``);
    the policy's own otherwise."""
    from scalify_hlo.rewrites.delayed_statistics import with_delayed_mode

    passes = policy.passes()
    if policy.statistics == "delayed" or (policy.statistics == "auto" and partitioned):
        passes = with_delayed_mode(passes, "use")
    return ",".join(str(p) for p in passes)


_HLO_COMPUTATION = re.compile(r"^(ENTRY )?%([\w.\-]+) \(")
_HLO_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%([\w.\-]+) = .*?\s([a-z][a-z0-9\-]*)\(")
_HLO_CONTROL_REFS = re.compile(
    r"\b(?:body|condition|true_computation|false_computation)=%([\w.\-]+)"
    r"|branch_computations=\{([^}]*)\}")
_HLO_FUSION_KIND = re.compile(r"\bkind=(k\w+)")
_HLO_CALLS = re.compile(r"\bcalls=%([\w.\-]+)")
# Elementwise opcodes that xla::HloInstruction::IsExpensive reports as expensive.
HLO_EXPENSIVE = frozenset({
    "divide", "remainder", "sqrt", "rsqrt", "cbrt", "power", "exponential",
    "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "tan", "atan2", "erf",
    "sine", "cosine"})
_HLO_SHAPE = re.compile(r"[a-z]\w*(\[[^\]]*\])")
# Instructions that are bookkeeping, not work: they never become a kernel or a loop.
_HLO_FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})


@dataclass(frozen=True)
class HloCounts:
    """What XLA runs, counted in the optimized HLO text of a compiled module.

    fusions: every instruction with opcode ``fusion`` in the module (any computation), by
        kind (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``): each is one generated kernel
        (or one library call for ``kCustom``, e.g. XNNPACK dots on CPU).
    executed: instructions of the control-level computations (ENTRY and the bodies,
        conditions and branches of ``while``/``conditional``, not fused computations or
        reducers) other than parameter, constant, tuple, get-tuple-element and bitcast:
        fusions plus the unfused ops (dot, copy, custom-call, while, ...) that run on their
        own. This is the number of things the runtime launches per step (per loop trip
        inside loops).
    scalar_fusions: the fusions whose every result is rank 0 (``f32[]``): scalar arithmetic
        XLA kept as a kernel of its own instead of fusing it into its consumers.
    scalar_fusions_expensive: the scalar fusions that contain an op XLA's fusion heuristics
        call expensive (``HLO_EXPENSIVE``: divide, sqrt, ...). XLA does not fuse such a
        producer into a consumer that would recompute it per element (a broadcast), so these
        stay kernels of their own by design of XLA, not by accident of the module.
    """

    fusions: int
    fusions_by_kind: dict[str, int]
    scalar_fusions: int
    scalar_fusions_expensive: int
    executed: int
    executed_by_opcode: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def hlo_computations(hlo_text: str) -> tuple[dict[str, list[str]], str | None]:
    """The instruction lines of each computation of optimized HLO text, and ENTRY's name."""
    computations: dict[str, list[str]] = {}
    entry = None
    current: list[str] | None = None
    for line in hlo_text.splitlines():
        header = _HLO_COMPUTATION.match(line)
        if header:
            current = computations.setdefault(header.group(2), [])
            if header.group(1):
                entry = header.group(2)
        elif line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)
    return computations, entry


def control_computations(computations: dict[str, list[str]], entry: str | None) -> set[str]:
    """ENTRY and the computations run as while bodies/conditions or conditional branches
    (transitively): where instructions are launched one by one, unlike fused computations
    and reducers."""
    control: set[str] = set()
    pending = [entry] if entry else []
    while pending:
        name = pending.pop()
        if name in control or name not in computations:
            continue
        control.add(name)
        for line in computations[name]:
            for ref in _HLO_CONTROL_REFS.finditer(line):
                if ref.group(1):
                    pending.append(ref.group(1))
                else:
                    pending += [n.strip().lstrip("%") for n in ref.group(2).split(",")]
    return control


def hlo_instruction(line: str) -> tuple[str, str, str] | None:
    """(name, result type, opcode) of one HLO instruction line, or None."""
    match = _HLO_INSTRUCTION.match(line)
    if not match:
        return None
    result_type = line.split(" = ", 1)[1].rsplit(f" {match.group(2)}(", 1)[0]
    return match.group(1), result_type, match.group(2)


def called_computation(line: str) -> str | None:
    """The computation an HLO instruction line calls (a fusion's ``calls=``), or None."""
    called = _HLO_CALLS.search(line)
    return called.group(1) if called else None


def hlo_counts(hlo_text: str) -> HloCounts:
    """Fusion and executed-instruction counts of optimized HLO text (see ``HloCounts``)."""
    computations, entry = hlo_computations(hlo_text)
    fusion_kinds: Counter[str] = Counter()
    scalar_fusions = scalar_expensive = 0
    for lines in computations.values():
        for line in lines:
            parsed = hlo_instruction(line)
            if parsed is None or parsed[2] != "fusion":
                continue
            kind = _HLO_FUSION_KIND.search(line)
            fusion_kinds[kind.group(1) if kind else "?"] += 1
            if all(shape == "[]" for shape in _HLO_SHAPE.findall(parsed[1])):
                scalar_fusions += 1
                body = computations.get(called_computation(line) or "", [])
                scalar_expensive += any((i := hlo_instruction(b)) and i[2] in HLO_EXPENSIVE
                                        for b in body)
    executed: Counter[str] = Counter()
    for name in control_computations(computations, entry):
        for line in computations[name]:
            parsed = hlo_instruction(line)
            if parsed and parsed[2] not in _HLO_FREE:
                executed[parsed[2]] += 1
    return HloCounts(sum(fusion_kinds.values()), dict(sorted(fusion_kinds.items())),
                     scalar_fusions, scalar_expensive, sum(executed.values()),
                     dict(sorted(executed.items())))


def update_doc_section(heading: str, body: str, path: Path = BENCHMARKS_DOC) -> None:
    """Replace (or append) the ``## heading`` section of ``path`` with ``body``.

    Other scripts and people own other ``## `` sections of the same file, so the file is read
    right before it is written and only the lines from this heading to the next ``## ``
    heading (outside code fences) change.
    """
    title = f"## {heading}"
    text = path.read_text() if path.exists() else (
        "# Benchmarks\n\nEach section is written by the script it names; rerun the script to "
        "refresh it. Results as JSON are in `docs/results/`.\n")
    lines = text.splitlines()
    start = end = None
    fenced = False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if start is None and line.strip() == title:
            start = index
        elif start is not None and line.startswith("## "):
            end = index
            break
    block = [title, "", *body.strip("\n").splitlines(), ""]
    if start is None:
        lines = [*lines, *([""] if lines and lines[-1].strip() else []), *block]
    else:
        lines = [*lines[:start], *block, *lines[end if end is not None else len(lines):]]
    while lines and not lines[-1].strip():
        lines.pop()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def publish(out: Path, result: dict[str, Any], heading: str,
            doc_section: Callable[[dict[str, Any]], str], doc: bool = True,
            also_wrote: str = "") -> None:
    """Write a benchmark's JSON and, when ``doc``, its ``## heading`` section of
    docs/benchmarks.md: the common ending of every benchmark script."""
    write_json(out, result)
    print(f"wrote {out}{also_wrote}")
    if doc:
        update_doc_section(heading, doc_section(result))
        print(f"updated docs/benchmarks.md ({heading})")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    out = ["| " + " | ".join(str(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"
