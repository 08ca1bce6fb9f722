"""What many test files share: the repository's folders, the CLI run as a user runs it, a
benchmark script imported as a module, XLA's fusion count, and a module with forward and
backward dots.

Importable as ``tests.helpers`` (pytest puts the repository root on ``sys.path``: ``pythonpath``
in pyproject.toml); standard library only, so that ``lit_runner`` can use it without importing
scalify-hlo.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTDATA = REPO_ROOT / "testdata"
GOLDEN = TESTDATA / "golden"
STEPS = TESTDATA / "steps"  # exported sample steps (testdata/export_steps.py)
MLP_STEP = STEPS / "mlp_step.mlir"
# XLA_FLAGS of every test process (tests/conftest.py says why).
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"


def simulated_devices_flags(count: int) -> str:
    """XLA_FLAGS for ``count`` simulated CPU devices. XLA:CPU aborts the process when a
    collective's threads do not all arrive within 40 s, which a loaded 2-core machine running
    8 device threads beside other tests can miss: the tests give them 10 minutes."""
    return (f"--xla_force_host_platform_device_count={count} "
            "--xla_cpu_collective_call_terminate_timeout_seconds=600 "
            "--xla_cpu_collective_call_warn_stuck_timeout_seconds=300 " + TEST_XLA_FLAGS)


def import_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/NAME.py`` imported as a module (it imports ``common`` from its
    own folder, which is on ``sys.path`` only while it is imported)."""
    folder = str(REPO_ROOT / "benchmarks")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


def run_cli(*args: str | Path, cwd: Path | None = None, stdin: str | bytes = "",
            timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m scalify_hlo.cli ARGS`` with this interpreter, stdout and stderr captured.

    stdin is empty unless given, so a command that reads it never waits on the terminal;
    output is text, or bytes when ``stdin`` is bytes (the CLI can write MLIR bytecode).
    """
    return subprocess.run([sys.executable, "-m", "scalify_hlo.cli", *map(str, args)], cwd=cwd,
                          input=stdin, capture_output=True, text=isinstance(stdin, str),
                          timeout=timeout)


def run_cli_many(commands: Mapping[str, Sequence[str | Path]],
                 cwd: Path) -> dict[str, subprocess.CompletedProcess]:
    """Independent CLI commands (arguments by name) run concurrently; their results by name.
    Each command is a process of its own that imports JAX: a few at a time save minutes."""
    workers = max(2, min(len(commands), os.cpu_count() or 2, 6))
    with ThreadPoolExecutor(workers) as pool:
        futures = {name: pool.submit(run_cli, *args, cwd=cwd) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def fusion_count(hlo_text: str) -> int:
    """XLA's fusions (loop nests and library calls) in a compiled module's HLO text."""
    return len(re.findall(r" fusion\(", hlo_text))


def backward_dots_module(batch: int, d_in: int, d_out: int) -> str:
    """A forward dot y = x @ w and its two backward dots, located as JAX locates them (under
    ``transpose(jvp(...))``), so that fp8-dots gives the gradient operands the E5M2 format."""
    x, w, y = f"tensor<{batch}x{d_in}xf32>", f"tensor<{d_in}x{d_out}xf32>", \
        f"tensor<{batch}x{d_out}xf32>"
    return f"""
func.func public @main(%x: {x}, %w: {w}, %g: {y})
    -> ({y}, {x}, {w}) {{
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
    : ({x}, {w}) -> {y} loc("jit(step)/jvp(loss)/dot")
  %dy = stablehlo.negate %g : {y} loc("jit(step)/transpose(jvp(loss))/neg")
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1]
    : ({y}, {w}) -> {x}
    loc("jit(step)/transpose(jvp(loss))/dot_general")
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0]
    : ({x}, {y}) -> {w}
    loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %y, %dx, %dw : {y}, {x}, {w}
}}
"""
