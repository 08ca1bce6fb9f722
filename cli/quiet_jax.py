"""Import jax with the CUDA plugin's start-up noise dropped from stderr.

Why: with the ``gpu-aot`` extra (the CUDA plugin, for compiling for an H100 without one) on a
machine without a GPU driver, ``import jax`` makes the plugin's C++ logging print six lines
("Could not find cuda drivers ...") to stderr before absl's logging is set up, so neither
``TF_CPP_MIN_LOG_LEVEL`` nor Python's logging reach them. Every ``scalify-hlo`` call, ``--help``
and a one-line error included, then began with them. The command line imports jax once with
stderr captured to a file and writes back every line except those two known ones.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

# The lines the CUDA plugin prints when it finds no driver; nothing else is dropped.
_NO_DRIVER_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    r"STDERR|I\d{4} [\d:. ]+\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your "
    r"machine, GPU will not be used\.)$")


def without_driver_noise(text: str) -> str:
    """``text`` without the CUDA plugin's no-driver lines."""
    kept = [line for line in text.splitlines(keepends=True)
            if not _NO_DRIVER_NOISE.match(line.rstrip("\n"))]
    return "".join(kept)


def import_jax_quietly() -> None:
    """Import jax once, dropping only the plugin's no-driver lines from what it writes to
    stderr (file descriptor 2, where C++ writes); an import that fails still shows all."""
    if "jax" in sys.modules:
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr to capture (an embedding host)
        import jax  # noqa: F401
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            import jax  # noqa: F401

            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            text = text if failed else without_driver_noise(text)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()
