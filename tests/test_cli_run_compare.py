"""``scalify-hlo export``, ``run`` and ``compare`` as a user meets them, end to end.

The sample MLP step is exported from ``testdata/models.py``, rewritten by the CLI (exact f32
scaling, and the default FP8 pipeline), run and compared; every bad input must be one
``error: ...`` line on stderr with exit status 1. Each command is its own interpreter (about
2 s of imports), so commands that do not depend on each other run concurrently.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scalify_hlo.inputs import random_inputs
from scalify_hlo.signature import entry_signature
from tests.helpers import MLP_STEP, STEPS, TESTDATA, run_cli, run_cli_many

MODELS = TESTDATA / "models.py"
SCAN_STEP = STEPS / "scan_step.mlir"
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

# log of unit-normal inputs: NaN from finite inputs, which run warns about.
LOG_MODULE = """\
func.func public @main(%x: tensor<8xf32> loc("x")) -> (tensor<8xf32> {jax.result_info = "log_x"}) {
  %0 = stablehlo.log %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

# Adam's second moment, unnamed: its value flows into a sqrt through a multiply by a scalar,
# an add and a divide by a scalar, so random inputs make it non-negative.
ADAM_MODULE = """\
func.func public @main(%v: tensor<16xf32> loc("state"), %g: tensor<16xf32> loc("g"))
    -> (tensor<16xf32> {jax.result_info = "update"}) {
  %c = stablehlo.constant dense<0.999> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<16xf32>
  %0 = stablehlo.multiply %b, %v : tensor<16xf32>
  %1 = stablehlo.multiply %g, %g : tensor<16xf32>
  %2 = stablehlo.add %0, %1 : tensor<16xf32>
  %h = stablehlo.constant dense<0.5> : tensor<16xf32>
  %3 = stablehlo.divide %2, %h : tensor<16xf32>
  %4 = stablehlo.sqrt %3 : tensor<16xf32>
  %5 = stablehlo.divide %g, %4 : tensor<16xf32>
  return %5 : tensor<16xf32>
}
"""

RAISE_LINE = USER_MODULE.splitlines().index('    raise RuntimeError("no step today")') + 1
Result = subprocess.CompletedProcess


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
    rewrites = run_cli_many({
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
    (work / "log.mlir").write_text(LOG_MODULE)
    (work / "adam.mlir").write_text(ADAM_MODULE)
    return work


@pytest.fixture(scope="module")
def results(work: Path) -> dict[str, Result]:
    """Every command the tests below look at, run once, concurrently."""
    return run_cli_many({
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
        "compare_fp8_mode": ["compare", "step.mlir", "fp8.mlir", "--seed", "0", "--fp8"],
        "run_fp8_seed": ["run", "fp8.mlir", "--seed", "0", "-o", "out_fp8.npz"],
        "run_fp8_inputs": ["run", "fp8.mlir", "--inputs", "seed0.npz", "-o",
                           "out_fp8_inputs.npz"],
        "run_fp8_raw": ["run", "fp8.mlir", "--seed", "0", "--raw", "-o", "out_fp8_raw.npz"],
        "run_log": ["run", "log.mlir", "--seed", "0"],
        "run_adam": ["run", "adam.mlir", "--seed", "0"],
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
        "fp8_too_few": ["run", "fp8.mlir", "--inputs", "too_few.npz"],
        "fp8_wrong_shape": ["run", "fp8.mlir", "--inputs", "wrong_shape.npz"],
        "min_snr_fails": ["compare", "step.mlir", "fp8.mlir", "--seed", "0", "--min-snr",
                          "100"],
        "scalar_rtol_fails": ["compare", "step.mlir", "fp8.mlir", "--seed", "0", "--fp8",
                              "--scalar-rtol", "1e-9"],
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
    checked_in = MLP_STEP.read_text()
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
    # the output is named by its pytree path (jax.result_info), in the table too
    assert re.match(r"error: output \d+ \(result\[.*\]\): max rel error \S+ > rtol 1e-06",
                    line), line
    rows = table_rows(result.stdout)  # the table is printed before the verdict
    assert len(rows) == MLP_OUTPUTS
    assert [row[1] for row in rows][-2:] == ["result[0][2]['w']", "result[1]"]
    assert all(row[-1] == "0" for row in rows)  # no NaN/Inf appeared
    snrs = [float(row[6]) for row in rows]
    assert all(10 < snr < 200 for snr in snrs), snrs  # FP8: lossy, but signal survives


def test_compare_fp8_passes_loose_rtol(results: dict[str, Result]) -> None:
    # FP8 dots (E4M3 forward, E5M2 gradients) on unit-normal parameters: the worst output's
    # max rel error was about 0.39 at seed 0 when this test was written.
    result = results["compare_fp8_loose"]
    assert_ok(result)
    max_rel = [float(row[4]) for row in table_rows(result.stdout)]
    assert max(max_rel) > 1e-3, max_rel


# ----- run --------------------------------------------------------------------------------


def test_run_seed_and_inputs_agree(work: Path, results: dict[str, Result]) -> None:
    for name in ("run_seed", "run_inputs"):
        assert_ok(results[name])
        lines = results[name].stdout.strip().splitlines()
        assert [line.split(" (")[0] for line in lines] == [f"output {i}" for i in
                                                           range(MLP_OUTPUTS)]
        assert all(" nan 0 " in line and line.endswith("inf 0") for line in lines), lines
    assert "output 6 (result[1]): tensor<f32>" in results["run_seed"].stdout  # the loss
    signature = entry_signature((work / "step.mlir").read_text())
    with np.load(work / "out_seed.npz") as by_seed, np.load(work / "out_inputs.npz") as given:
        assert by_seed.files == [f"arr_{i}" for i in range(MLP_OUTPUTS)]
        for i, spec in enumerate(signature.results):
            assert by_seed[f"arr_{i}"].shape == spec.shape
            assert by_seed[f"arr_{i}"].dtype == spec.dtype
            np.testing.assert_array_equal(by_seed[f"arr_{i}"], given[f"arr_{i}"])


def test_run_scaled_rewrite_in_the_original_signature(work: Path,
                                                       results: dict[str, Result]) -> None:
    # The FP8 rewrite takes (data, scale) pairs; run draws (or reads) the original step's
    # inputs, splits them (power-of-two scales from the RMS) and joins the outputs back.
    signature = entry_signature((work / "step.mlir").read_text())
    for name, path in (("run_fp8_seed", "out_fp8.npz"), ("run_fp8_inputs", "out_fp8_inputs.npz")):
        result = results[name]
        assert_ok(result)
        assert result.stderr == ""  # no NaN/Inf warning
        lines = result.stdout.strip().splitlines()
        assert len(lines) == MLP_OUTPUTS, lines
        assert lines[0].startswith("output 0 (result[0][0]['b']): tensor<64xf32>"), lines
        assert all(" nan 0 " in line and line.endswith("inf 0") for line in lines), lines
        with np.load(work / path) as joined:
            assert [joined[f"arr_{i}"].dtype for i in range(MLP_OUTPUTS)] == [
                spec.dtype for spec in signature.results]
            assert [joined[f"arr_{i}"].shape for i in range(MLP_OUTPUTS)] == [
                spec.shape for spec in signature.results]
    with np.load(work / "out_fp8.npz") as fp8, np.load(work / "out_seed.npz") as original:
        loss, reference = float(fp8[f"arr_{MLP_OUTPUTS - 1}"]), float(
            original[f"arr_{MLP_OUTPUTS - 1}"])
        assert abs(loss - reference) <= 0.05 * abs(reference), (loss, reference)
        np.testing.assert_array_equal(fp8["arr_0"], np.load(work / "out_fp8_inputs.npz")["arr_0"])


def test_run_scaled_rewrite_raw(work: Path, results: dict[str, Result]) -> None:
    result = results["run_fp8_raw"]
    assert_ok(result)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2 * MLP_OUTPUTS
    assert lines[0].startswith("output 0 (result[0][0]['b'].data): tensor<64xf16>"), lines
    assert lines[1].startswith("output 1 (result[0][0]['b'].scale): tensor<f32>"), lines
    with np.load(work / "out_fp8_raw.npz") as raw:
        scales = [float(raw[f"arr_{i}"]) for i in range(1, 2 * MLP_OUTPUTS, 2)]
    assert all(s > 0 and np.frexp(s)[0] == 0.5 for s in scales), scales  # powers of two


def test_run_warns_when_outputs_turn_nonfinite(results: dict[str, Result]) -> None:
    result = results["run_log"]
    assert_ok(result)
    assert re.fullmatch(r"warning: 1 of 1 outputs have NaN or Inf, the inputs none: "
                        r"output 0 \(log_x\)\n", result.stderr), result.stderr


def test_run_random_squares_are_not_negative(results: dict[str, Result]) -> None:
    # sqrt(0.999 v + g^2): NaN wherever a unit-normal v is negative enough
    result = results["run_adam"]
    assert_ok(result)
    assert result.stderr == ""
    assert result.stdout.startswith("output 0 (update): tensor<16xf32>")
    assert " nan 0 " in result.stdout


def test_compare_fp8_mode_passes_the_fp8_rewrite(results: dict[str, Result]) -> None:
    result = results["compare_fp8_mode"]
    assert_ok(result)
    assert "checks: SNR >= " in result.stdout.splitlines()[0]


@pytest.mark.parametrize(("case", "mentions"), [
    ("min_snr_fails", ("output 0 (result[0][0]['b'])", "dB < 100 dB", "7 of 7 outputs fail")),
    ("scalar_rtol_fails", ("output 6 (result[1])", "rel error", "> 1e-09 (a scalar")),
], ids=["min-snr", "scalar-rtol"])
def test_compare_snr_and_scalar_checks_fail(results: dict[str, Result], case: str,
                                            mentions: tuple[str, ...]) -> None:
    assert_one_error_line(results[case], *mentions)
    assert len(table_rows(results[case].stdout)) == MLP_OUTPUTS


# ----- errors -----------------------------------------------------------------------------

ERRORS: dict[str, tuple[str, ...]] = {
    # case: words its one error line must contain
    "not_a_zip": ("not_a_zip.npz", "not an .npz"),
    "truncated": ("truncated.npz",),
    "missing_npz": ("missing.npz",),
    "too_few": ("7 arrays", "8 arguments"),
    "wrong_shape": ("argument 3 (params[1]['w'])", "(3, 3)", "tensor<64x64xf32>"),
    "wrong_dtype": ("argument 0", "float64", "tensor<64xf32>"),
    "seed_and_inputs": ("--inputs", "--seed"),
    "missing_module_file": ("missing.mlir",),
    "incompatible": ("incompatible", "8 arguments"),
    # a scaled rewrite takes inputs in the original signature, or its own (data, scale) pairs
    "fp8_too_few": ("7 arrays", "8 arguments in the original signature", "16 as (data, "),
    "fp8_wrong_shape": ("argument 3 (params[1]['w'])", "(3, 3)", "tensor<64x64xf32>"),
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
