"""Compile and run a StableHLO module with XLA on this machine's default backend."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.extend import backend as jax_backend

from scalify_hlo.errors import ScalifyError

# One of JAX's LAPACK custom-call targets (lapack_spotrf_ffi, ...) in MLIR text, pretty
# (``custom_call @lapack_...``) or generic (``call_target_name = "lapack_..."``); a false
# match only loads LAPACK once more.
_LAPACK_TARGET = re.compile(r'[@"](lapack_\w+)')


def _client():
    return jax_backend.get_backend()


def _lapack_initializer() -> Callable[[], None] | None:
    """What JAX calls before it runs a module with LAPACK custom calls on CPU (when it lowers
    a ``jnp.linalg`` op, or deserializes an exported module): it loads the LAPACK routines
    that the ``lapack_*_ffi`` targets, registered when jax is imported, call through. None
    if this jax has neither of the places it has lived in."""
    try:
        from jax._src.lax import linalg

        return linalg.initialize_lapack
    except (ImportError, AttributeError):
        pass
    try:
        from jaxlib.cpu import _lapack

        return _lapack.initialize
    except (ImportError, AttributeError):
        return None


def prepare_custom_calls(text: str, platform: str) -> None:
    """Make the module's CPU custom calls runnable as JAX does before it runs one: XLA
    compiles a ``lapack_*`` call without LAPACK loaded, and running it then dies of a
    segmentation fault. Refuses the module when this jax cannot load LAPACK."""
    if platform != "cpu":
        return
    match = _LAPACK_TARGET.search(text)
    if match is None:
        return
    initialize = _lapack_initializer()
    if initialize is None:
        raise ScalifyError(f"the module calls LAPACK (custom call @{match.group(1)}) and "
                           "this jax cannot load LAPACK outside its own lowering")
    initialize()


def compile_module(text: str):
    """Compile MLIR text for one device of the default backend."""
    client = _client()
    prepare_custom_calls(text, client.platform)
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
    """Run once and copy the outputs to the host. The copy is inside the ``try``: XLA
    dispatches asynchronously, and an error of the run itself (XLA:CPU's "Unsupported element
    type for DotThunk", say) is raised where an output is first read."""
    device = executable.local_devices()[0]
    buffers = [jax.device_put(np.asarray(x), device) for x in inputs]
    try:
        return [np.asarray(out) for out in executable.execute(buffers)]
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScalifyError(f"XLA could not run the module: {first}") from None


def compiled_hlo_text(text: str) -> str:
    """The optimized HLO XLA produced for the module (to count fusions or FP8 GEMMs)."""
    return compile_module(text).hlo_modules()[0].to_string()
