"""What every command shares: the user-error type, reading inputs, atomic output files."""

from __future__ import annotations

import sys
from pathlib import Path

from scalify_hlo.errors import ScalifyError
from scalify_hlo.files import atomic_write

EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 70


class UserError(ScalifyError):
    """An error in how the command was used that click's own checks do not catch."""


def read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read '{path}': {exc.strerror or exc}") from None


def write_output(path: str, data: bytes) -> None:
    """Write to stdout, or atomically to a file (temporary file in the same folder, renamed)."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise UserError(f"cannot write '{path}': {exc.strerror or exc}") from None
