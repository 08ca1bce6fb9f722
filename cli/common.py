"""What every command shares: the user-error type, reading inputs, atomic output files."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from scalify_hlo.errors import ScalifyError

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
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write '{path}': {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp_name, 0o666 & ~_current_umask())  # mkstemp creates files as 0600
        os.replace(temp_name, target)
    except OSError as exc:
        Path(temp_name).unlink(missing_ok=True)
        raise UserError(f"cannot write '{path}': {exc.strerror or exc}") from None


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
