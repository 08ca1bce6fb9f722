"""``scalify-hlo export``, ``run`` and ``compare`` as a user meets them, end to end.

The sample MLP step is exported from ``testdata/models.py``, rewritten by the CLI (exact f32
scaling, and the default FP8 pipeline), run and compared; every bad input must be one
``error: ...`` line on stderr with exit status 1. Each command is its own interpreter (about
2 s of imports), so commands that do not depend on each other run concurrently.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from scalify_hlo.inputs import random_inputs
from scalify_hlo.signature import entry_signature

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "testdata" / "models.py"
SCAN_STEP = REPO / "testdata" / "steps" / "scan_step.mlir"
CLI_TIMEOUT_S = 180
F32_PIPELINE = "inline,scalify{data-dtype=f32},simplify"
MLP_OUTPUTS = 7  # six updated parameters and the loss
PRECIOUS = b"output of an earlier run\n"

# Exported with the <function>_example_args convention, and the ways MODULE:FUNCTION can be wrong.
USER_MODULE = '''\
import jax.numpy as jnp
import numpy as np

NOT_CALLABLE = 3


def scaled_sin(x, y):
    return jnp.sin(x) * y


def scaled_sin_example_args():
    return (np.ones((4,), np.float32), np.float32(2.0))


def needs_arguments(x):
    return x


def returns_int():
    return 42


def returns_three():
    return 1, 2, 3


def raises():
    raise RuntimeError("no step today")
'''

RAISE_LINE = USER_MODULE.splitlines().index('    raise RuntimeError("no step today")') + 1
Result = subprocess.CompletedProcess


def cli_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "scalify_hlo.cli", *map(str, args)]


def run_cli(*args: str | Path, cwd: Path) -> Result:
    return subprocess.run(cli_command(*args), cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=CLI_TIMEOUT_S)


def run_many(commands: dict[str, Sequence[str | Path]], cwd: Path) -> dict[str, Result]:
    """Run independent CLI commands concurrently; their results by name."""
    workers = max(2, min(len(commands), os.cpu_count() or 2, 6))
    with ThreadPoolExecutor(workers) as pool:
        futures = {name: pool.submit(run_cli, *args, cwd=cwd) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def assert_ok(result: Result) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def assert_one_error_line(result: Result, *mentions: str) -> str:
    stderr = result.stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.removesuffix("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert result.returncode == 1, stderr
    for word in mentions:
        assert word in stderr, f"{word!r} not in {stderr!r}"
    return lines[0]


def table_rows(stdout: str) -> list[list[str]]:
    """The rows of compare's table (after its header line and the column titles)."""
    lines = stdout.strip().splitlines()
    assert lines[1].startswith("output"), stdout
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:]]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """step.mlir exported by the CLI, its f32 and FP8 rewrites, input files good and bad."""
    work = tmp_path_factory.mktemp("cli_run")
    assert_ok(run_cli("export", f"{MODELS}:mlp_step", "-o", "step.mlir", cwd=work))
    rewrites = run_many({
        "f32": ["rewrite", "step.mlir", "--pipeline", F32_PIPELINE, "-o", "f32.mlir"],
        "fp8": ["rewrite", "step.mlir", "-o", "fp8.mlir"],
    }, work)
    for result in rewrites.values():
        assert_ok(result)

    signature = entry_signature((work / "step.mlir").read_text())
    inputs = random_inputs(signature, np.random.default_rng(0))  # what --seed 0 draws
    np.savez(work / "seed0.npz", *inputs)
    np.savez(work / "named_args.npz", **{f"arg{i}": x for i, x in enumerate(inputs)})
    np.savez(work / "too_few.npz", *inputs[:-1])
    np.savez(work / "wrong_shape.npz", *inputs[:3], np.zeros((3, 3), np.float32), *inputs[4:])
    np.savez(work / "wrong_dtype.npz", inputs[0].astype(np.float64), *inputs[1:])
    (work / "not_a_zip.npz").write_bytes(b"this is not an npz file\n")
    (work / "truncated.npz").write_bytes((work / "seed0.npz").read_bytes()[:300])
    (work / "user_steps.py").write_text(USER_MODULE)
    (work / "precious.npz").write_bytes(PRECIOUS)
    return work


@pytest.fixture(scope="module")
def results(work: Path) -> dict[str, Result]:
    """Every command the tests below look at, run once, concurrently."""
    return run_many({
        # successes
        "compare_f32": ["compare", "step.mlir", "f32.mlir", "--rtol", "1e-5"],
        "compare_f32_reversed": ["compare", "f32.mlir", "step.mlir", "--inputs",
                                 "named_args.npz"],
        "compare_fp8_tight": ["compare", "step.mlir", "fp8.mlir", "--seed", "0", "--rtol",
                              "1e-6"],
        "compare_fp8_loose": ["compare", "step.mlir", "fp8.mlir", "--seed", "0", "--rtol",
                              "0.5"],
        "run_seed": ["run", "step.mlir", "--seed", "0", "-o", "out_seed.npz"],
        "run_inputs": ["run", "step.mlir", "--inputs", "seed0.npz", "-o", "out_inputs.npz"],
        "export_example_args": ["export", "user_steps.py:scaled_sin", "-o", "user.mlir"],
        # bad inputs
        "not_a_zip": ["run", "step.mlir", "--inputs", "not_a_zip.npz"],
        "truncated": ["run", "step.mlir", "--inputs", "truncated.npz"],
        "missing_npz": ["run", "step.mlir", "--inputs", "missing.npz"],
        "too_few": ["run", "step.mlir", "--inputs", "too_few.npz"],
        "wrong_shape": ["run", "step.mlir", "--inputs", "wrong_shape.npz"],
        "wrong_dtype": ["compare", "step.mlir", "fp8.mlir", "--inputs", "wrong_dtype.npz"],
        "seed_and_inputs": ["run", "step.mlir", "--inputs", "seed0.npz", "--seed", "1"],
        "missing_module_file": ["run", "missing.mlir"],
        "keeps_output": ["run", "step.mlir", "--inputs", "too_few.npz", "-o", "precious.npz"],
        "incompatible": ["compare", "step.mlir", SCAN_STEP],
        # bad MODULE:FUNCTION
        "no_colon": ["export", MODELS],
        "no_such_module": ["export", "no_such_module_xyz:step"],
        "no_such_file": ["export", "no/such/file.py:step"],
        "no_such_attribute": ["export", f"{MODELS}:no_such_step"],
        "not_callable": ["export", "user_steps.py:NOT_CALLABLE"],
        "needs_arguments": ["export", "user_steps.py:needs_arguments"],
        "returns_int": ["export", "user_steps.py:returns_int"],
        "returns_three": ["export", "user_steps.py:returns_three"],
        "factory_raises": ["export", "user_steps:raises"],
    }, work)


# ----- export -----------------------------------------------------------------------------


def test_export_factory_gives_the_sample_step(work: Path) -> None:
    text = (work / "step.mlir").read_text()
    assert "loc(" in text  # debug locations: the name stack the rewrite reads
    checked_in = (REPO / "testdata" / "steps" / "mlp_step.mlir").read_text()
    assert entry_signature(text) == entry_signature(checked_in)


def test_export_function_with_example_args(work: Path, results: dict[str, Result]) -> None:
    assert_ok(results["export_example_args"])
    signature = entry_signature((work / "user.mlir").read_text())
    assert [(s.shape, s.element) for s in signature.inputs] == [((4,), "f32"), ((), "f32")]


# ----- compare ----------------------------------------------------------------------------


def test_compare_exact_f32_rewrite_passes(results: dict[str, Result]) -> None:
    result = results["compare_f32"]
    assert_ok(result)
    assert "f32.mlir is the scaled rewrite of step.mlir (f32 data)" in result.stdout
    rows = table_rows(result.stdout)
    assert [row[0] for row in rows] == [str(i) for i in range(MLP_OUTPUTS)]


def test_compare_is_symmetric_and_takes_inputs(results: dict[str, Result]) -> None:
    result = results["compare_f32_reversed"]
    assert_ok(result)
    assert "f32.mlir is the scaled rewrite of step.mlir" in result.stdout
    assert "inputs: named_args.npz" in result.stdout
    assert len(table_rows(result.stdout)) == MLP_OUTPUTS


def test_compare_fp8_fails_tight_rtol(results: dict[str, Result]) -> None:
    result = results["compare_fp8_tight"]
    line = assert_one_error_line(result, "rtol 1e-06")
    assert re.match(r"error: output \d+: max rel error \S+ > rtol 1e-06", line), line
    rows = table_rows(result.stdout)  # the table is printed before the verdict
    assert len(rows) == MLP_OUTPUTS
    assert all(row[-1] == "0" for row in rows)  # no NaN/Inf appeared
    snrs = [float(row[5]) for row in rows]
    assert all(10 < snr < 200 for snr in snrs), snrs  # FP8: lossy, but signal survives


def test_compare_fp8_passes_loose_rtol(results: dict[str, Result]) -> None:
    # FP8 dots (E4M3 forward, E5M2 gradients) on unit-normal parameters: the worst output's
    # max rel error was about 0.39 at seed 0 when this test was written.
    result = results["compare_fp8_loose"]
    assert_ok(result)
    max_rel = [float(row[3]) for row in table_rows(result.stdout)]
    assert max(max_rel) > 1e-3, max_rel


# ----- run --------------------------------------------------------------------------------


def test_run_seed_and_inputs_agree(work: Path, results: dict[str, Result]) -> None:
    for name in ("run_seed", "run_inputs"):
        assert_ok(results[name])
        lines = results[name].stdout.strip().splitlines()
        assert [line.split(":")[0] for line in lines] == [f"output {i}" for i in
                                                          range(MLP_OUTPUTS)]
        assert all(" nan 0 " in line and line.endswith("inf 0") for line in lines), lines
    assert "output 6: tensor<f32>" in results["run_seed"].stdout  # the loss
    signature = entry_signature((work / "step.mlir").read_text())
    with np.load(work / "out_seed.npz") as by_seed, np.load(work / "out_inputs.npz") as given:
        assert by_seed.files == [f"arr_{i}" for i in range(MLP_OUTPUTS)]
        for i, spec in enumerate(signature.results):
            assert by_seed[f"arr_{i}"].shape == spec.shape
            assert by_seed[f"arr_{i}"].dtype == spec.dtype
            np.testing.assert_array_equal(by_seed[f"arr_{i}"], given[f"arr_{i}"])


# ----- errors -----------------------------------------------------------------------------

ERRORS: dict[str, tuple[str, ...]] = {
    # case: words its one error line must contain
    "not_a_zip": ("not_a_zip.npz", "not an .npz"),
    "truncated": ("truncated.npz",),
    "missing_npz": ("missing.npz",),
    "too_few": ("7 arrays", "8 arguments"),
    "wrong_shape": ("argument 3", "(3, 3)", "tensor<64x64xf32>"),
    "wrong_dtype": ("argument 0", "float64", "tensor<64xf32>"),
    "seed_and_inputs": ("--inputs", "--seed"),
    "missing_module_file": ("missing.mlir",),
    "incompatible": ("incompatible", "8 arguments"),
    "no_colon": ("MODULE:FUNCTION",),
    "no_such_module": ("no_such_module_xyz",),
    "no_such_file": ("no/such/file.py",),
    "no_such_attribute": ("no_such_step",),
    "not_callable": ("NOT_CALLABLE", "not callable"),
    "needs_arguments": ("needs_arguments_example_args",),
    "returns_int": ("returns_int()", "int", "(step_fn, example_args)"),
    "returns_three": ("returns_three()", "tuple of 3"),
    # where in the user's file it was raised, not just what
    "factory_raises": ("raises()", "no step today", f"(at user_steps.py:{RAISE_LINE})"),
}


@pytest.mark.parametrize(("case", "mentions"), ERRORS.items(), ids=ERRORS.keys())
def test_bad_input_is_one_error_line(results: dict[str, Result], case: str,
                                     mentions: tuple[str, ...]) -> None:
    assert_one_error_line(results[case], *mentions)
    assert "max rel" not in results[case].stdout  # nothing ran


def test_failed_run_leaves_output_untouched(work: Path, results: dict[str, Result]) -> None:
    assert_one_error_line(results["keeps_output"])
    assert (work / "precious.npz").read_bytes() == PRECIOUS
    assert not list(work.glob(".precious.npz*"))  # no temporary file left behind
