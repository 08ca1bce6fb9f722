"""Atomic output files: every file the tool writes appears whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``, with
    the permissions an ordinary ``open(path, "wb")`` would give (``mkstemp`` makes 0600).
    Raises ``OSError``; the temporary file never outlives a failure."""
    target = Path(path)
    handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp_name, 0o666 & ~_current_umask())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
