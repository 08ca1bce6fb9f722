"""Compile and run a StableHLO module with XLA on this machine's default backend."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.extend import backend as jax_backend

from scalify_hlo.errors import ScalifyError


def _client():
    return jax_backend.get_backend()


def compile_module(text: str):
    """Compile MLIR text for one device of the default backend."""
    client = _client()
    options = jax_backend.get_compile_options(1, 1)
    try:
        return client.compile_and_load(text, client.devices()[:1], options)
    except Exception as exc:  # XLA raises XlaRuntimeError with multi-line messages
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScalifyError(f"XLA could not compile the module: {first}") from None


def run_module(text: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile ``text`` and run it once on ``inputs``; returns host numpy arrays."""
    executable = compile_module(text)
    return run_executable(executable, inputs)


def run_executable(executable, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    device = executable.local_devices()[0]
    buffers = [jax.device_put(np.asarray(x), device) for x in inputs]
    try:
        outputs = executable.execute(buffers)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScalifyError(f"XLA could not run the module: {first}") from None
    return [np.asarray(out) for out in outputs]


def compiled_hlo_text(text: str) -> str:
    """The optimized HLO XLA produced for the module (to count fusions or FP8 GEMMs)."""
    return compile_module(text).hlo_modules()[0].to_string()
