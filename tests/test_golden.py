"""Golden tests: every ``testdata/**/*.mlir`` file with RUN lines, run the way LLVM lit does.

The ``test_runner_*`` tests check the runner itself and need neither scalify-hlo nor its CLI.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_zygote import CliZygote
from tests.lit_runner import (
    REPO_ROOT,
    LitFailure,
    discover,
    display_path,
    failing_checks,
    parse_run_lines,
    run_file,
)

GOLDEN_FILES = discover(REPO_ROOT / "testdata")


@pytest.fixture(scope="module")
def zygote() -> Iterator[CliZygote]:
    """One warm interpreter forks every ``scalify-hlo`` of the golden RUN lines."""
    started = CliZygote()
    yield started
    started.close()


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[display_path(p) for p in GOLDEN_FILES])
def test_golden(path: Path, tmp_path: Path, zygote: CliZygote) -> None:
    message = None
    try:
        run_file(path, tmp_path, zygote)
    except LitFailure as failure:
        message = str(failure)
    if message is not None:  # outside `except`, so pytest shows no exception chain
        pytest.fail(message, pytrace=False)


# --- self-tests of the runner ----------------------------------------------------------------


def _write(tmp_path: Path, text: str, name: str = "case.mlir") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _failure(path: Path, tmp_path: Path) -> str:
    with pytest.raises(LitFailure) as info:
        run_file(path, tmp_path / "out")
    return str(info.value)


def test_runner_passes_matching_checks(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "// RUN: cat %s | filecheck %s\n"
        "// RUN: echo 'a b' | filecheck %s --check-prefix ECHO\n"
        "// CHECK: some text\n"
        "// ECHO: a b\n",
    )
    run_file(path, tmp_path / "out")


def test_runner_reports_failing_check_location(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "// RUN: cat %s | filecheck %s\n"
        "// CHECK: RUN\n"
        "// CHECK-NEXT: {{never}} matched\n",
    )
    message = _failure(path, tmp_path)
    assert f"{path}:1: RUN line failed with exit code 1" in message
    assert f"$ cat {path} | filecheck {path}" in message
    assert f"failing CHECK at {path}:3" in message
    assert "Couldn't match" in message  # FileCheck's own diagnostic


def test_runner_maps_check_file_to_repo_relative_path() -> None:
    """However FileCheck names the check file, it is reported relative to the repository."""
    path = REPO_ROOT / "tests" / "lit_runner.py"  # any file inside the repository
    for named in (str(path), "./tests/lit_runner.py", "tests/../tests/lit_runner.py"):
        stderr = f"{named}:7: error: Couldn't match \"x\".\nCurrent position at <stdin>:1:1\n"
        assert failing_checks(stderr, path) == ["tests/lit_runner.py:7"]


def test_runner_joins_continued_run_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "// RUN: echo one \\\n"
        "// RUN:   two | filecheck %s\n"
        "// RUN: true\n"
        "// CHECK: one two\n",
    )
    assert [(r.line, r.command) for r in parse_run_lines(path)] == [
        (1, "echo one two | filecheck %s"),
        (3, "true"),
    ]
    run_file(path, tmp_path / "out")


def test_runner_substitutions(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "// RUN: echo '100%% done' > %t\n"
        "// RUN: filecheck %s --input-file %t\n"
        "// RUN: test -f %S/case.mlir\n"
        "// CHECK: 100% done\n",
    )
    run_file(path, tmp_path / "out")
    assert (tmp_path / "out" / "case.mlir.tmp").read_text() == "100% done\n"


def test_runner_not_applies_to_one_command_of_a_pipeline(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "// RUN: not sh -c 'echo failed; exit 1' | filecheck %s\n"
        "// RUN: not not true\n"
        "// CHECK: failed\n",
    )
    run_file(path, tmp_path / "out")


@pytest.mark.parametrize("command", ["not true", "not sh -c 'kill -SEGV $$'", "false | cat"])
def test_runner_fails_bad_exit_status(tmp_path: Path, command: str) -> None:
    path = _write(tmp_path, f"// RUN: {command}\n")
    assert "RUN line failed with exit code" in _failure(path, tmp_path)


def test_runner_uses_the_interpreters_bin_dir_first(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    if shutil.which("filecheck", path=str(bin_dir)) is None:
        pytest.skip("filecheck is not installed beside sys.executable")
    path = _write(tmp_path, f"// RUN: command -v filecheck | filecheck %s\n// CHECK: {bin_dir}/\n")
    run_file(path, tmp_path / "out")


def test_discover_only_files_with_run_lines(tmp_path: Path) -> None:
    _write(tmp_path, "// A comment.\n// RUN: true\n// CHECK: x\n", "a.mlir")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", "  // RUN: true\n", "b.mlir")
    _write(tmp_path, "module {}\n", "no_run.mlir")
    _write(tmp_path, "// RUN: true\n", "not_mlir.txt")
    assert discover(tmp_path) == [tmp_path / "a.mlir", tmp_path / "sub" / "b.mlir"]


def test_zygote_cli_ends_as_the_console_script_does(tmp_path: Path, zygote: CliZygote) -> None:
    """Through the zygote, a pipeline of two ``scalify-hlo``s feeds one into the other, a
    malformed module fails with the CLI's one-line error (``not`` passes), and a wrong CHECK
    fails the RUN line."""
    module = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { return %a : tensor<2xf32> }"
    path = _write(
        tmp_path,
        "// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32}' \\\n"
        "// RUN:   | scalify-hlo rewrite - --pipeline simplify | filecheck %s\n"
        "// RUN: echo 'garbage' | not scalify-hlo rewrite - 2>&1 \\\n"
        "// RUN:   | filecheck %s --check-prefix ERR\n"
        "// CHECK: func.func @main\n"
        "// ERR: error:\n"
        f"{module}\n",
    )
    run_file(path, tmp_path / "out", zygote)
    wrong = _write(tmp_path, f"// RUN: scalify-hlo rewrite %s | filecheck %s\n"
                   f"// CHECK: no-such-text\n{module}\n", name="wrong.mlir")
    with pytest.raises(LitFailure, match="failing CHECK at"):
        run_file(wrong, tmp_path / "out", zygote)
