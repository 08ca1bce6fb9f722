"""``compile_scaled``: export a JAX function, rewrite it, and call the result like the function.

The rewritten module is wrapped in a ``jax.export.Exported`` (a public route that composes
with ``jax.jit``, ``lax.scan`` and ``fori_loop``): its flat signature is the scaled calling
convention, and ``ScaledStep`` converts pytrees of arrays and ``ScaledArray``s to it and back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from scalify_hlo.dtypes import DATA_DTYPE_ALIASES
from scalify_hlo.errors import PipelineError, ScalifyError
from scalify_hlo.leaf_specs import LeafSpec
from scalify_hlo.policy import Policy
from scalify_hlo.rewrites import ModulePass
from scalify_hlo.rewrites.fp8_dots import Fp8Dots
from scalify_hlo.rewrites.registry import parse_pipeline
from scalify_hlo.rewrites.scalify import Scalify
from scalify_hlo.scaled_step import ScaledStep
from scalify_hlo.step_report import Report

__all__ = ["LeafSpec", "Report", "ScaledStep", "compile_scaled", "export"]


def export(fn: Callable[..., Any], *args: Any) -> str:
    """The StableHLO text of ``jax.jit(fn)`` at ``args``, with locations (JAX's name stack)."""
    return jax.jit(fn).lower(*args).as_text(debug_info=True)


def compile_scaled(fn: Callable[..., Any], *args: Any, policy: Policy | None = None,
                   pipeline: str | None = None, return_scaled: bool = True,
                   check_scales: bool = False, target: str | None = None) -> ScaledStep:
    """Export ``fn`` at ``args``, rewrite it with ``policy`` (or an explicit ``pipeline``; or
    ``Policy.for_target(target)``; without any of them, the policy of jax's default backend
    and device: f16 data and FP8 dots on CPU and FP8 GPUs, bf16 data on TPUs) and
    return a step that takes the same pytrees (floating leaves as arrays or ``ScaledArray``s)
    and returns ``ScaledArray``s for floating outputs (plain arrays if not ``return_scaled``).
    On a CPU backend a bf16 policy's (or pipeline's) output head reads its operands in f32
    (XLA:CPU has no bf16 x bf16 -> f32 dot; ``Policy.fp8_head_operands``).

    A ScaledArray argument's scale may be any finite positive number (docs/scaled-signature.md);
    a bad one (0, negative, inf, NaN) is refused with its path when it is on the host, and
    when it is on the device with ``check_scales`` (which waits for its value on every call).
    Inside the caller's ``jax.jit`` a traced scale is taken as a power of two unless
    ``check_scales`` (then it is split, a multiply of its data per call).
    """
    if target is not None and (policy is not None or pipeline is not None):
        raise ScalifyError("compile_scaled takes a target or a policy/pipeline, not both "
                           "(Policy.for_target(target, ...) combines them)")
    if pipeline is None:
        chosen: str | list[ModulePass] = _runnable_here(
            (policy or Policy.for_target(target)).passes())
    else:
        chosen = _runnable_pipeline(pipeline)
    return ScaledStep(fn, args, chosen, return_scaled, check_scales)


def _runnable_pipeline(pipeline: str) -> str | list[ModulePass]:
    """An explicit pipeline as ``_runnable_here`` leaves it: the text itself where nothing
    changes (the step's ``pipeline`` is what the caller wrote) or where it does not parse
    (the rewrite reports that), else the changed passes (the step's ``pipeline`` names them)."""
    try:
        passes = parse_pipeline(pipeline)
    except PipelineError:
        return pipeline
    runnable = _runnable_here(passes)
    return pipeline if runnable == passes else runnable


def _runnable_here(passes: list[ModulePass]) -> list[ModulePass]:
    """The passes, with a bf16 output head fed f32 converts of its operands where jax runs
    on a CPU: each fp8-dots that keeps the head out of FP8 (it produces f32) reads its
    operands in f32 (``head-operands=f32``, ``Policy.fp8_head_operands="float32"``), because
    XLA:CPU has no bf16 x bf16 -> f32 dot ("Unsupported element type for DotThunk" at the
    first call). The converts are exact, so the step computes what the chip would; TPU
    targets feed the head so everywhere. One rule for a policy's passes and a pipeline's."""
    if jax.default_backend() != "cpu" or not any(
            isinstance(p, Scalify) and DATA_DTYPE_ALIASES.get(p.data_dtype, p.data_dtype)
            == "bf16" for p in passes):
        return passes
    return [dataclasses.replace(p, head_operands="f32")
            if isinstance(p, Fp8Dots) and p.output_head == "keep"
            and p.head_operands == "data" else p for p in passes]
