"""A process that uses scalify-hlo exits cleanly, on success and on every failure path.

MLIR's Python bindings abort the interpreter at exit when a context is left entered or an
MLIR object outlives its context badly (``terminate called ...``, SIGABRT, status 134). Each
scenario below runs in a fresh interpreter, the CLI or the Python API, and must end with the
expected status (0 or 1), never a signal, and without 'Abort' or 'terminate called' on
stderr. Scenarios run two at a time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "scalify-hlo")
TIMEOUT_S = 180

VALID = """\
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  %1 = stablehlo.tanh %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""
MALFORMED = VALID.replace("%arg1 : tensor<4xf32>\n", "%undefined : tensor<4xf32>\n")
CUSTOM_CALL = """\
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @unknown_target(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
SPLIT = VALID + "// -----\n" + MALFORMED
STRICT = "scalify{data-dtype=f32 strict=true}"


@dataclass(frozen=True)
class Scenario:
    """A command line, or Python code for ``python -c``, and the exit status it must have."""

    expected: int
    argv: tuple[str, ...] = ()
    code: str = ""
    stdin: str | None = None


def _py(code: str, expected: int) -> Scenario:
    prelude = (f"import sys\nVALID = {VALID!r}\nMALFORMED = {MALFORMED!r}\n"
               f"CUSTOM_CALL = {CUSTOM_CALL!r}\n")
    return Scenario(expected, code=prelude + textwrap.dedent(code))


SCENARIOS: dict[str, Scenario] = {
    # ----- the CLI
    "cli_ok": Scenario(0, ("rewrite", "{valid}", "-o", "{tmp}/out.mlir")),
    "cli_ok_stdout_f32": Scenario(0, ("rewrite", "{valid}", "--pipeline",
                                      "scalify{data-dtype=f32},simplify")),
    "cli_ok_bytecode": Scenario(0, ("rewrite", "{valid}", "--emit", "bytecode", "-o",
                                    "{tmp}/out.mlirbc")),
    "cli_ok_portable": Scenario(0, ("rewrite", "{valid}", "--emit", "portable", "-o",
                                    "{tmp}/out.vhlo")),
    "cli_ok_stdin": Scenario(0, ("rewrite", "-", "--print-ir-after-all", "--stats"),
                             stdin=VALID),
    "cli_ok_warning": Scenario(0, ("rewrite", "{custom_call}", "--pipeline",
                                   "scalify{data-dtype=f32}")),
    "cli_passes": Scenario(0, ("passes",)),
    "cli_version": Scenario(0, ("--version",)),
    "cli_bad_module": Scenario(1, ("rewrite", "{malformed}", "-o", "{tmp}/out.mlir")),
    "cli_bad_stdin": Scenario(1, ("rewrite", "-"), stdin="garbage"),
    "cli_unknown_pass": Scenario(1, ("rewrite", "{valid}", "--pipeline", "inline,no-such")),
    "cli_strict_error": Scenario(1, ("rewrite", "{custom_call}", "--pipeline", STRICT)),
    "cli_missing_file": Scenario(1, ("rewrite", "{tmp}/missing.mlir")),
    "cli_split_with_error": Scenario(1, ("rewrite", "{split}", "--split-input-file")),
    "cli_unwritable_output": Scenario(1, ("rewrite", "{valid}", "-o", "{tmp}/no/dir/x")),
    # ----- the Python API
    "api_ok": _py("""
        from scalify_hlo.api import rewrite_text
        assert "stablehlo" in rewrite_text(VALID)
        """, 0),
    "api_ok_then_run": _py("""
        import numpy as np
        from scalify_hlo.api import rewrite_text
        from scalify_hlo.runner import run_module
        from scalify_hlo.signature import entry_signature, join_outputs, split_inputs
        text = rewrite_text(VALID, "scalify{data-dtype=f32},simplify")
        sig = entry_signature(VALID)
        x = np.arange(4, dtype=np.float32)
        out = join_outputs(sig, run_module(text, split_inputs(sig, [x, x])))
        assert np.allclose(out[0], np.tanh(x * x))
        """, 0),
    "api_bad_module_caught": _py("""
        from scalify_hlo.api import rewrite_text
        from scalify_hlo.errors import ScalifyError
        try:
            rewrite_text(MALFORMED)
        except ScalifyError as exc:
            print(exc)
        else:
            sys.exit(3)
        """, 0),
    "api_bad_module_uncaught": _py("""
        from scalify_hlo.api import rewrite_text
        rewrite_text(MALFORMED)
        """, 1),
    "api_unknown_pass_uncaught": _py("""
        from scalify_hlo.api import rewrite_text
        rewrite_text(VALID, "inline,no-such-pass")
        """, 1),
    "api_strict_uncaught": _py(f"""
        from scalify_hlo.api import rewrite_text
        rewrite_text(CUSTOM_CALL, "{STRICT}")
        """, 1),
    "api_result_kept_alive": _py("""
        from scalify_hlo.api import rewrite_module_source
        results = [rewrite_module_source(t, "scalify{data-dtype=f32}")
                   for t in (VALID, MALFORMED, CUSTOM_CALL)]
        assert results[1].error and results[0].output and results[2].context.warnings
        KEEP = results  # alive until interpreter shutdown
        """, 0),
    "api_signature_of_bad_module": _py("""
        from scalify_hlo.signature import entry_signature
        entry_signature(MALFORMED)
        """, 1),
    "api_error_inside_context": _py("""
        from scalify_hlo import module_io
        with module_io.ir_context():
            module = module_io.parse_module(VALID)
            raise RuntimeError("user code fails with a module alive")
        """, 1),
    "api_module_escapes_context": _py("""
        from scalify_hlo import module_io
        with module_io.ir_context():
            module = module_io.parse_module(VALID)
        LEAKED = module  # outlives its context until shutdown
        """, 0),
    "api_compile_error_uncaught": _py("""
        from scalify_hlo.runner import compile_module
        compile_module(CUSTOM_CALL)
        """, 1),
    "api_sys_exit_inside_context": _py("""
        from scalify_hlo import module_io
        with module_io.ir_context():
            module = module_io.parse_module(VALID)
            sys.exit(1)
        """, 1),
}


@dataclass(frozen=True)
class Ended:
    returncode: int
    stderr: str


def _substitute(arg: str, values: dict[str, Path]) -> str:
    """``{name}`` -> path (pipelines keep their own braces)."""
    for name, value in values.items():
        arg = arg.replace(f"{{{name}}}", str(value))
    return arg


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ended]:
    """Run every scenario once, two at a time."""
    tmp = tmp_path_factory.mktemp("exit")
    files = {"valid": VALID, "malformed": MALFORMED, "custom_call": CUSTOM_CALL, "split": SPLIT}
    paths = {name: tmp / f"{name}.mlir" for name in files}
    for name, text in files.items():
        paths[name].write_text(text)

    def run(item: tuple[str, Scenario]) -> tuple[str, Ended]:
        name, scenario = item
        if scenario.code:
            argv = [sys.executable, "-c", scenario.code]
        else:
            argv = [CLI] + [_substitute(a, {"tmp": tmp, **paths}) for a in scenario.argv]
        proc = subprocess.run(argv, input=scenario.stdin or "", capture_output=True, text=True,
                              errors="replace", timeout=TIMEOUT_S, cwd=tmp)
        return name, Ended(proc.returncode, proc.stderr)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, SCENARIOS.items()))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_exits_cleanly(name: str, ended: dict[str, Ended]) -> None:
    result = ended[name]
    assert "terminate called" not in result.stderr, result.stderr[-2000:]
    assert "Abort" not in result.stderr, result.stderr[-2000:]
    assert result.returncode >= 0, f"killed by signal {-result.returncode}: {result.stderr}"
    assert result.returncode == SCENARIOS[name].expected, result.stderr[-2000:]
    if not SCENARIOS[name].code and result.returncode == 1:
        lines = [line for line in result.stderr.splitlines() if not line.startswith("warning:")]
        assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
