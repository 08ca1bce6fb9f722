"""The ``scalify-hlo`` command line as a user meets it: errors, input/output plumbing, formats.

Every error must be one ``error: ...`` line on stderr with exit status 1 and no traceback; an
error in how the command was called (click's usage errors) is one such line too, with exit
status 2.
"""

from __future__ import annotations

import functools
import random
import subprocess
from pathlib import Path

import jax
import pytest
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_mlir

from scalify_hlo.errors import ScalifyError
from scalify_hlo.runner import run_executable
from tests import helpers

BYTECODE_MAGIC = b"ML\xefR"

VALID_MODULE = """\
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<4xi32> {jax.result_info = "result[1]"}) {
    %0 = call @g(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.negate %arg1 : tensor<4xi32>
    return %0, %1 : tensor<4xf32>, tensor<4xi32>
  }
  func.func private @g(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""  # noqa: E501  (one line per op, as MLIR prints it)

# The error is on line 2: %undefined is used but never defined.
MALFORMED_MODULE = """\
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %undefined : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

BAD_INPUTS: dict[str, bytes] = {
    "malformed": MALFORMED_MODULE.encode(),
    "empty": b"",
    "random_bytes": random.Random(0).randbytes(512),
    "bytecode_magic_then_junk": BYTECODE_MAGIC + random.Random(1).randbytes(64),
    "bytecode_magic_only": BYTECODE_MAGIC,
}

BAD_PIPELINES: dict[str, tuple[str, str | None]] = {
    # id: (pipeline, a word the error message must contain)
    "unknown_pass": ("inline,no-such-pass,cse", "no-such-pass"),
    "unknown_option": ("scalify{bogus=1}", "bogus"),
    "mistyped_option_value": ("scalify{strict=maybe}", "maybe"),
    "unbalanced_open_brace": ("inline,scalify{strict=true", None),
    "unbalanced_close_brace": ("inline,scalify}", None),
}


# Bytes in and out: the CLI reads and writes MLIR bytecode here.
run_cli = functools.partial(helpers.run_cli, stdin=b"")


def assert_clean_error(
    result: subprocess.CompletedProcess[bytes],
    *,
    mentions: tuple[str, ...] = (),
    usage_error_ok: bool = False,
) -> str:
    """A failure with no traceback and one ``error: `` line (exit 2 allowed for a usage error).

    Returns stderr.
    """
    stderr = result.stderr.decode(errors="replace")
    assert "Traceback" not in stderr, stderr
    assert result.returncode != 0, stderr
    for word in mentions:
        assert word in stderr, f"{word!r} not in stderr: {stderr}"
    lines = stderr.removesuffix("\n").split("\n")
    assert len(lines) == 1 and lines[0].strip(), f"expected one line on stderr, got: {stderr!r}"
    assert lines[0].startswith("error: "), stderr
    assert result.returncode == 1 or (usage_error_ok and result.returncode == 2), stderr
    return stderr


def parse_text(text: str) -> ir.Module:
    """Parse and verify MLIR text (raises ir.MLIRError if it is not a valid module)."""
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert module.operation.verify()
        return module


@pytest.fixture
def valid_file(tmp_path: Path) -> Path:
    path = tmp_path / "valid.mlir"
    path.write_text(VALID_MODULE)
    return path


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_error_line(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "bad.mlir").write_bytes(content)
    result = run_cli("rewrite", "bad.mlir", "--pipeline", "cse", cwd=tmp_path)
    stderr = assert_clean_error(result)
    assert result.stdout == b""
    if content == MALFORMED_MODULE.encode():
        assert stderr.startswith("error: bad.mlir:2:"), stderr  # FILE:LINE:COL: message


def test_bad_input_on_stdin_is_one_error_line(tmp_path: Path) -> None:
    result = run_cli("rewrite", "-", stdin=MALFORMED_MODULE.encode(), cwd=tmp_path)
    assert_clean_error(result)
    assert result.stdout == b""


def test_missing_input_file(tmp_path: Path) -> None:
    result = run_cli("rewrite", "does-not-exist.mlir", cwd=tmp_path)
    assert_clean_error(result, mentions=("does-not-exist.mlir",), usage_error_ok=True)


@pytest.mark.parametrize(("pipeline", "culprit"), BAD_PIPELINES.values(), ids=BAD_PIPELINES.keys())
def test_bad_pipeline(valid_file: Path, pipeline: str, culprit: str | None) -> None:
    result = run_cli("rewrite", valid_file, "--pipeline", pipeline, cwd=valid_file.parent)
    assert_clean_error(result, mentions=(culprit,) if culprit else (), usage_error_ok=True)
    assert result.stdout == b""


def test_bad_emit_value(valid_file: Path) -> None:
    result = run_cli("rewrite", valid_file, "--emit", "yaml", cwd=valid_file.parent)
    assert_clean_error(result, mentions=("yaml",), usage_error_ok=True)
    assert result.stdout == b""


@pytest.mark.parametrize("split", [False, True], ids=["whole_file", "split_input_file"])
def test_failed_rewrite_leaves_output_file_untouched(tmp_path: Path, split: bool) -> None:
    (tmp_path / "bad.mlir").write_text(MALFORMED_MODULE)
    out = tmp_path / "out.mlir"
    out.write_bytes(b"precious previous output\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    flags = ["--split-input-file"] if split else []
    result = run_cli("rewrite", "bad.mlir", "-o", "out.mlir", *flags, cwd=tmp_path)
    assert_clean_error(result)
    assert out.read_bytes() == b"precious previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary file left


# --- input and output --------------------------------------------------------------------------


def test_output_file_is_complete_and_parses(valid_file: Path) -> None:
    out = valid_file.parent / "out.mlir"
    out.write_text("stale content that must be replaced entirely\n" * 1000)
    result = run_cli("rewrite", valid_file, "--pipeline", "inline", "-o", out, cwd=out.parent)
    assert result.returncode == 0, result.stderr.decode()
    assert b"func.func" not in result.stdout  # the module goes to -o, not to stdout
    text = out.read_text()
    assert "stale" not in text
    parse_text(text)
    assert "func.func public @main" in text and "stablehlo.multiply" in text


def test_stdin_to_stdout(tmp_path: Path) -> None:
    result = run_cli(
        "rewrite", "-", "--pipeline", "inline", stdin=VALID_MODULE.encode(), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    parse_text(text)
    assert "func.func public @main" in text and "stablehlo.multiply" in text


@pytest.mark.parametrize("emit", ["bytecode", "portable"])
def test_binary_formats_round_trip(valid_file: Path, emit: str) -> None:
    cwd = valid_file.parent
    direct = run_cli("rewrite", valid_file, "--pipeline", "inline", cwd=cwd)
    assert direct.returncode == 0, direct.stderr.decode()

    binary = cwd / "x.mlirbc"
    written = run_cli(
        "rewrite", valid_file, "--pipeline", "inline", "--emit", emit, "-o", binary, cwd=cwd
    )
    assert written.returncode == 0, written.stderr.decode()
    assert binary.read_bytes().startswith(BYTECODE_MAGIC)

    read_back = run_cli("rewrite", binary, "--pipeline", "inline", cwd=cwd)
    assert read_back.returncode == 0, read_back.stderr.decode()
    parse_text(read_back.stdout.decode())
    assert read_back.stdout.decode() == direct.stdout.decode()

    from_stdin = run_cli("rewrite", "-", "--pipeline", "inline", stdin=binary.read_bytes(), cwd=cwd)
    assert from_stdin.returncode == 0, from_stdin.stderr.decode()
    assert from_stdin.stdout == read_back.stdout


def test_passes_lists_every_pass(tmp_path: Path) -> None:
    result = run_cli("passes", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    listing = result.stdout.decode()
    for name in ("inline", "canonicalize", "cse", "symbol-dce", "scalify", "simplify"):
        assert any(line.startswith(name) for line in listing.splitlines()), (name, listing)
    for option in ("data-dtype", "strict"):
        assert option in listing


# --- regressions found by the fuzzer (benchmarks/fuzz.py) -------------------------------------
DATA = Path(__file__).resolve().parent / "data"


def _rewrite_file(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return helpers.run_cli("rewrite", path, *extra, timeout=60)


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


def test_bytecode_that_aborts_the_reader_is_a_one_line_error() -> None:
    """This input makes MLIR's bytecode reader emit a non-UTF-8 diagnostic, on which the
    bindings call std::terminate; it is parsed in a forked child first."""
    _assert_one_line_error(_rewrite_file(DATA / "bytecode_abort.mlirbc"), "malformed MLIR bytecode")


def test_deep_nesting_is_a_one_line_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.mlir"
    deep.write_text("func.func @f() {\n" + "(" * 20000 + "\n}\n")
    _assert_one_line_error(_rewrite_file(deep), "nesting deeper than")


def test_recursive_calls_are_a_one_line_error(tmp_path: Path) -> None:
    recursive = tmp_path / "recursive.mlir"
    recursive.write_text("""
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @f(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
""")
    _assert_one_line_error(_rewrite_file(recursive, "--pipeline", "inline"), "recursive call")


@pytest.mark.parametrize("args, mentions", [
    (["compare", "a.mlir", "b.mlir", "--rtol", "x"], ("--rtol", "x")),
    (["rewrite"], ("IN",)),
    (["rewrite", "a.mlir", "--no-such-flag"], ("--no-such-flag",)),
    (["no-such-command"], ("no-such-command",)),
], ids=["bad-value", "missing-argument", "unknown-option", "unknown-command"])
def test_usage_errors_are_one_line(tmp_path: Path, args: list[str],
                                   mentions: tuple[str, ...]) -> None:
    result = run_cli(*args, cwd=tmp_path)
    stderr = assert_clean_error(result, mentions=mentions, usage_error_ok=True)
    assert result.returncode == 2 and "--help" in stderr, stderr


@pytest.mark.parametrize("mode", ["measure", "use"])
def test_run_refuses_a_module_with_delayed_statistics(tmp_path: Path, mode: str) -> None:
    """Its exponents go from one call to the next, which a single run cannot give it."""
    rewritten = tmp_path / "delayed.mlir"
    done = helpers.run_cli("rewrite", helpers.GOLDEN / "scalify" / "delayed-statistics.mlir",
                           "--split-input-file", "--pipeline",
                           f"scalify{{delayed-statistics={mode}}}", "-o", rewritten)
    assert done.returncode == 0, done.stderr
    first = rewritten.read_text().split("// -----")[0]
    rewritten.write_text(first)
    result = helpers.run_cli("run", rewritten)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "delayed statistics" in result.stderr, result.stderr


class _FailsWhenRead:
    """An output whose run failed: XLA dispatches asynchronously and raises on the read."""

    def __array__(self, *args: object, **kwargs: object) -> object:
        raise RuntimeError("UNIMPLEMENTED: Unsupported element type for DotThunk::Execute: "
                           "BF16 x BF16 = F32\nsecond line")


class _Executable:
    def local_devices(self) -> list[object]:
        return jax.devices("cpu")[:1]

    def execute(self, buffers: list[object]) -> list[object]:
        return [_FailsWhenRead()]


def test_a_run_that_fails_when_its_output_is_read_is_one_user_error_line() -> None:
    """XLA:CPU reports some failures of a run (no bf16 x bf16 -> f32 dot) only where an
    output is first read: that is still the module's run failing, said in one line, not an
    internal error of the tool."""
    with pytest.raises(ScalifyError) as raised:
        run_executable(_Executable(), [])
    assert str(raised.value) == ("XLA could not run the module: UNIMPLEMENTED: Unsupported "
                                 "element type for DotThunk::Execute: BF16 x BF16 = F32")
