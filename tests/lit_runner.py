"""A small lit-style runner for golden ``.mlir`` files.

Each ``// RUN:`` line of a file (a trailing ``\\`` continues it on the next RUN line) is run as
one ``bash -o pipefail -c`` command, with the repository root as working directory and the
directory of ``sys.executable`` first on ``PATH``, so that ``scalify-hlo`` and ``filecheck``
resolve to the virtualenv's (or, given a ``CliZygote``, ``scalify-hlo`` to a shim that forks it
from a warm interpreter: ``cli_zygote.py``). Substitutions, as in LLVM lit:

* ``%s``: the file's path (relative to the repository root when it lies inside it),
* ``%S``: the file's directory, ``%t``: a temporary path unique to the file, ``%%``: ``%``.

``not CMD ...`` succeeds when ``CMD`` exits with an ordinary failure (1 to 127) and fails when it
succeeds or dies from a signal. As in lit, it applies to one command of a pipeline only:
``not scalify-hlo ... 2>&1 | filecheck %s`` expects scalify-hlo to fail and FileCheck to pass.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.cli_zygote import CliZygote
from tests.helpers import REPO_ROOT

RUN_TIMEOUT_S = 300

_RUN_RE = re.compile(r"//\s*RUN:(?P<command>.*)$", re.M)
_SUBST_RE = re.compile(r"%[%sSt]")
# FileCheck's diagnostics start with `CHECK-FILE:LINE[:COL]: error:`.
_FILECHECK_DIAG_RE = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+)(?::\d+)?: error:", re.M)
# `not` as a shell function: it wraps one command, so in a pipeline it negates only that one.
_PRELUDE = 'not() { "$@"; local rc=$?; [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; }\n'


class LitFailure(Exception):
    """A RUN line failed; the message says which, how, and where FileCheck stopped."""


@dataclass(frozen=True)
class RunLine:
    """One (joined) RUN command and the 1-based line number it starts on."""

    line: int
    command: str


def display_path(path: Path) -> str:
    """``path`` relative to the repository root if it is inside it, else absolute."""
    path = path.resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def has_run_lines(path: Path) -> bool:
    return _RUN_RE.search(path.read_text(errors="replace")) is not None


def discover(root: Path) -> list[Path]:
    """Every ``*.mlir`` file under ``root`` with at least one RUN line, sorted."""
    return sorted(p for p in root.rglob("*.mlir") if p.is_file() and has_run_lines(p))


def parse_run_lines(path: Path) -> list[RunLine]:
    """The RUN commands of ``path``, with ``\\``-continued lines joined."""
    runs: list[RunLine] = []
    pending: list[str] = []
    start = 0
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        match = _RUN_RE.search(text)
        if match is None:
            continue
        if not pending:
            start = number
        part = match.group("command").strip()
        if part.endswith("\\"):
            pending.append(part[:-1].strip())
            continue
        runs.append(RunLine(start, " ".join([*pending, part]).strip()))
        pending = []
    if pending:
        raise LitFailure(f"{display_path(path)}:{start}: RUN line ends with a continuation '\\'")
    return runs


def substitute(command: str, path: Path, tmp_dir: Path) -> str:
    """Apply lit's ``%s``, ``%S``, ``%t`` and ``%%`` substitutions."""
    values = {
        "%%": "%",
        "%s": shlex.quote(display_path(path)),
        "%S": shlex.quote(display_path(path.parent)),
        "%t": shlex.quote(str(tmp_dir / f"{path.name}.tmp")),
    }
    return _SUBST_RE.sub(lambda m: values[m.group(0)], command)


def _environment(zygote: CliZygote | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env if zygote is None else zygote.environment(env)


def failing_checks(stderr: str, path: Path) -> list[str]:
    """``FILE:LINE`` of each check FileCheck reports, mapped to the repository-relative path."""
    locations = []
    for match in _FILECHECK_DIAG_RE.finditer(stderr):
        named = Path(match.group("file"))
        named = named if named.is_absolute() else REPO_ROOT / named
        same = named.exists() and named.resolve() == path.resolve()
        shown = display_path(path) if same else match.group("file")
        locations.append(f"{shown}:{match.group('line')}")
    return locations


def _tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def run_file(path: Path, tmp_dir: Path, zygote: CliZygote | None = None) -> None:
    """Run every RUN line of ``path`` in order; raise LitFailure at the first one that fails.
    With ``zygote``, ``scalify-hlo`` is forked from it instead of started afresh."""
    path = path.resolve()
    runs = parse_run_lines(path)
    if not runs:
        raise LitFailure(f"{display_path(path)}: no RUN lines")
    tmp_dir.mkdir(parents=True, exist_ok=True)
    for run in runs:
        command = substitute(run.command, path, tmp_dir)
        try:
            proc = subprocess.run(
                ["bash", "-o", "pipefail", "-c", _PRELUDE + command],
                cwd=REPO_ROOT,
                env=_environment(zygote),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=RUN_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise LitFailure(
                f"{display_path(path)}:{run.line}: RUN line timed out after {RUN_TIMEOUT_S}s\n"
                f"$ {command}"
            ) from None
        if proc.returncode == 0:
            continue
        lines = [
            f"{display_path(path)}:{run.line}: RUN line failed with exit code {proc.returncode}",
            f"$ {command}",
        ]
        lines += [f"failing CHECK at {loc}" for loc in failing_checks(proc.stderr, path)]
        lines += ["--- stderr ---", _tail(proc.stderr.rstrip())]
        if proc.stdout.strip():
            lines += ["--- stdout ---", _tail(proc.stdout.rstrip())]
        raise LitFailure("\n".join(lines))
