"""A bounded fuzz run of the CLI: mutated real modules must end in OK or a clean error.

Each case runs ``scalify-hlo rewrite IN -o OUT`` in its own process (forked from a zygote
that has the CLI imported; ``test_fork_mode_matches_exec_mode`` checks that this sees what
a fresh ``scalify-hlo`` process sees) and is classified by ``fuzz_cases.classify``; any
failure (crash, traceback, multi-line error, hang, partial output, internal error) fails the
run. ``benchmarks/fuzz.py`` runs thousands of cases the same way; the minimal reproducers of
what it found are kept below.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.fuzz_cases import (
    FAILURES,
    MUTATIONS,
    Case,
    Outcome,
    ProcessEnd,
    Result,
    Zygote,
    classify,
    counts,
    make_cases,
    run_case,
    run_cases,
    run_exec,
    seed_modules,
)

BOUNDED_CASES = 120  # benchmarks/fuzz.py runs thousands; this is the regression guard
SEED = 20260101

VALID = b"""func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

# ----- reproducers of what the fuzzer found (fixed in 2b45dad; kept as regressions) ---------
# MLIR bytecode whose producer string is not UTF-8: the MLIR bindings built a diagnostic note
# ("in bytecode version 0 produced by: <producer>") that nanobind could not turn into a str,
# and the C++ exception escaped: std::terminate, SIGABRT.
BAD_PRODUCER_BYTECODE = b"ML\xefR\x01\xfc\x00"
# 5000 nested modules: MLIR's recursive-descent parser overflowed the C stack (SIGSEGV).
DEEP_NESTING = b"module {\n" * 5000 + b"}\n" * 5000
# A private function that calls itself and does anything else: inline_calls inlined the
# function into itself, doubling its body on each of its 64 rounds (a hang).
SELF_RECURSIVE = b"""func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  return %arg0 : tensor<2xf32>
}
func.func private @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @f(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
  %1 = stablehlo.add %0, %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""
# Found after that fix: MLIR bytecode of the golden chunk fp8-dots/backward.mlir#3 (jaxlib 0.10.2's
# writer) with byte 63 changed from 0x05 to 0xb2. Parsing it raises an ordinary MLIRError
# ("attempting to parse a byte at the end of the bytecode") but corrupts the heap on the way
# (glibc's malloc checker: "free(): invalid pointer"): ir.parse_module's probe child survives,
# so the CLI parses it again in-process and dies later (SIGSEGV/SIGABRT) in about half of
# fresh processes. Fixed: the parent now only parses bytecode the probe child parsed cleanly.
HEAP_CORRUPTING_BYTECODE = bytes.fromhex(
    "4d4cef520d4d4c495232332e302e30676974000121070105090b01030f030507130505171b03452b0b01270b"
    "07130b0b0b131313130f0b0f0b0f0b0f0b1305b21f1f010b171717072302b7050f1f170101010d0905110513"
    "17010303170103311701035d170103891d170305151d1b0305171d1f0305191d2303051b17010d070b010103"
    "0503010b0101030103011b052111071b054111071b0521410709050705030105010304870501500501070477"
    "03010503500d03070463030f17070b0f0711031300070615030503010706190301030509461d050301050703"
    "094621070303050109050425050b0d06030105010046031d2d5747310f0b05190f0f0f150b116275696c7469"
    "6e0066756e6300737461626c65686c6f006d6f64756c650072657475726e006e656761746500646f745f6765"
    "6e6572616c002d006d61696e007075626c6963006a69742873746570292f6a7670286c6f7373292f6e656700"
    "6a69742873746570292f7472616e73706f7365286a7670286c6f737329292f6e6567006a6974287374657029"
    "2f7472616e73706f7365286a7670286c6f737329292f646f745f67656e6572616c006a69742873746570292f"
    "646f745f67656e6572616c000827090501010d0107010109170701270107012901")
REPRODUCERS = {
    "bytecode_bad_producer": (BAD_PRODUCER_BYTECODE, None),
    "deep_nesting": (DEEP_NESTING, None),
    "self_recursive_inline": (SELF_RECURSIVE, "inline"),
    "self_recursive_scalify": (SELF_RECURSIVE, "scalify{data-dtype=f32}"),
}


def _run_one(data: bytes, pipeline: str | None, tmp_path: Path, timeout: float = 10.0,
             preexisting: bool = False) -> Result:
    case = Case(0, "inline", ["none"], pipeline, data, preexisting)
    zygote = Zygote()
    try:
        return run_case(case, zygote.run, tmp_path, timeout)
    finally:
        zygote.close()


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_fuzzer_finding_is_a_clean_error(name: str, tmp_path: Path) -> None:
    data, pipeline = REPRODUCERS[name]
    result = _run_one(data, pipeline, tmp_path, preexisting=True)
    assert result.outcome is Outcome.ERROR, (result.outcome, result.detail, result.stderr_tail)


# ----- the heap corruption and the bounded run ----------------------------------------------
def test_heap_corrupting_bytecode_is_a_clean_error() -> None:
    """Ten fresh processes (the crash depends on the heap layout, and a forked child's heap
    hides it): every one must end in a clean error."""
    cases = [Case(i, "heap", ["bytecode_junk"], None, HEAP_CORRUPTING_BYTECODE)
             for i in range(10)]
    results = run_cases(cases, mode="exec", workers=2)
    outcomes = [r.outcome for r in results]
    assert all(o is Outcome.ERROR for o in outcomes), [o.value for o in outcomes]


def test_bounded_fuzz_run() -> None:
    cases = make_cases(BOUNDED_CASES, SEED)
    results = run_cases(cases, mode="fork", workers=2)
    table = counts(results)
    failures = [
        f"case {r.index} ({'+'.join(r.mutations)} on {r.seed_name}, pipeline {r.pipeline}): "
        f"{r.outcome} {r.detail} {r.stderr_tail.strip()[-300:]} (reproduce: python "
        f"benchmarks/fuzz.py --seed {SEED} --reproduce {r.index})"
        for r in results
        if r.outcome in FAILURES
    ]
    assert not failures, f"{table}\n" + "\n".join(failures)
    assert table["OK"] >= BOUNDED_CASES // 20, f"too few cases rewrite at all: {table}"
    assert table["ERROR"] >= BOUNDED_CASES // 2, table


def test_fork_mode_matches_exec_mode(tmp_path: Path) -> None:
    """A forked child and a fresh ``scalify-hlo`` process end the same way."""
    cases = make_cases(10, SEED + 1)
    cases.append(Case(10, "valid", [], None, VALID, preexisting_output=True))
    forked = run_cases(cases, mode="fork", workers=2)
    execed = run_cases(cases, mode="exec", workers=2)
    assert [(r.outcome, r.returncode) for r in forked] == [
        (r.outcome, r.returncode) for r in execed]
    assert [r.stderr_tail for r in forked] == [r.stderr_tail for r in execed]


# ----- the classifier and the mutations --------------------------------------------------------
def test_classify_outcomes(tmp_path: Path) -> None:
    out = tmp_path / "out.mlir"
    out.write_bytes(VALID)
    assert classify(ProcessEnd(0), "", out, False)[0] is Outcome.OK
    assert classify(ProcessEnd(0), "warning: x\n", out, False)[0] is Outcome.OK
    assert classify(ProcessEnd(None, True), "", out, False)[0] is Outcome.HANG
    assert classify(ProcessEnd(-signal.SIGABRT), "", out, False)[0] is Outcome.CRASH
    assert classify(ProcessEnd(1), "Traceback (most recent call last):\n", out,
                    False)[0] is Outcome.TRACEBACK
    out.write_bytes(b"func.func @f(")
    assert classify(ProcessEnd(0), "", out, False)[0] is Outcome.PARTIAL
    out.unlink()
    assert classify(ProcessEnd(1), "warning: w\nerror: bad\n", out, False)[0] is Outcome.ERROR
    assert classify(ProcessEnd(1), "error: a\nerror: b\n", out, False)[0] is Outcome.MULTILINE
    assert classify(ProcessEnd(1), "error: bad\n  more\n", out, False)[0] is Outcome.MULTILINE
    assert classify(ProcessEnd(70), "error: internal error (KeyError): 'x'\n", out,
                    False)[0] is Outcome.INTERNAL
    out.write_bytes(b"half a module")
    assert classify(ProcessEnd(1), "error: bad\n", out, False)[0] is Outcome.PARTIAL
    (tmp_path / ".out.mlir.abc").write_bytes(b"")
    assert classify(ProcessEnd(1), "error: bad\n", out, False)[0] is Outcome.PARTIAL


def test_runner_sees_ok_error_and_untouched_output(tmp_path: Path) -> None:
    ok = _run_one(VALID, "scalify{data-dtype=f32},simplify", tmp_path, preexisting=True)
    assert ok.outcome is Outcome.OK, (ok.detail, ok.stderr_tail)
    bad = _run_one(VALID.replace(b"tanh", b"tanhh"), None, tmp_path, preexisting=True)
    assert bad.outcome is Outcome.ERROR, (bad.detail, bad.stderr_tail)


def test_mutations_are_deterministic_and_cover_the_list() -> None:
    """Same seed, same cases; every mutation the issue lists exists and gets used."""
    first = make_cases(200, 7)
    again = make_cases(200, 7)
    assert [(c.mutations, c.data) for c in first] == [(c.mutations, c.data) for c in again]
    used = {m for c in first for m in c.mutations}
    wanted = {"delete_lines", "swap_lines", "change_element_type", "change_dimension",
              "dynamic_everywhere", "truncate", "random_bytes", "bytecode_junk", "huge_shapes",
              "insert_foreign_op", "replace_op", "tuple_signature"}
    assert wanted <= set(MUTATIONS)
    assert len(used & wanted) >= len(wanted) - 2, sorted(wanted - used)
    seeds = seed_modules()
    assert any(name.endswith("step.mlir") for name, _ in seeds)
    assert len(seeds) > 50


def test_exec_runner_times_out(tmp_path: Path) -> None:
    """The time limit kills the whole process group and reports a hang."""
    end = run_exec(["--version"], tmp_path / "o", tmp_path / "e", 0.01)
    assert end.timed_out and end.returncode is None
