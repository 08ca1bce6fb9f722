"""Helpers to feed a scalified module and compare its outputs with the original module's.

The ``scalify`` pass turns every floating argument and result of ``@main`` into two consecutive
values ``(data, scale)`` with ``value = data * scale``; ``scale`` is a rank-0 f32 power of two.
Integer and boolean values stay single and in place. These helpers do the conversion on the
numpy side so that a test can run the original module on ``inputs`` and the rewritten module on
``scaled_inputs(inputs)`` and compare ``unscale_outputs(...)`` with the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from scalify_hlo.signature import ELEMENT_DTYPES

DEFAULT_DATA_DTYPE = np.dtype(np.float32)

_ELEMENT_TYPES: dict[str, np.dtype] = ELEMENT_DTYPES


def is_floating(dtype: np.dtype | type) -> bool:
    """True for numpy floats and the ml_dtypes floats (bf16, fp8), which numpy calls 'V'."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    try:
        ml_dtypes.finfo(dtype)
    except ValueError:
        return False
    return dtype.kind != "c"


@dataclass(frozen=True)
class TensorSig:
    """One argument or result type of ``@main``: static shape and numpy element type."""

    shape: tuple[int, ...]
    dtype: np.dtype
    mlir: str

    @property
    def floating(self) -> bool:
        return is_floating(self.dtype)


def main_signature(text: str) -> tuple[list[TensorSig], list[TensorSig]]:
    """Argument and result types of ``@main`` in a module, read with the MLIR bindings.

    Parsing (not regex) so that attributes such as ``{jax.result_info = ...}`` never confuse it.
    """
    from jax.extend.mlir import ir
    from jax.interpreters import mlir as jax_mlir

    ctx = jax_mlir.make_ir_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        for op in module.body.operations:
            if op.operation.name != "func.func":
                continue
            if ir.StringAttr(op.attributes["sym_name"]).value != "main":
                continue
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return [_tensor_sig(t) for t in ftype.inputs], [_tensor_sig(t) for t in ftype.results]
    raise ValueError("module has no func.func @main")


def _tensor_sig(mlir_type) -> TensorSig:
    from jax.extend.mlir import ir

    ranked = ir.RankedTensorType(mlir_type)
    element = str(ranked.element_type)
    if element not in _ELEMENT_TYPES:
        raise ValueError(f"unsupported element type {element} in {mlir_type}")
    return TensorSig(tuple(ranked.shape), _ELEMENT_TYPES[element], str(mlir_type))


def split_scaled(
    x: np.ndarray,
    rng: np.random.Generator,
    lo: int = -40,
    hi: int = 40,
    data_dtype: np.dtype | type = DEFAULT_DATA_DTYPE,
) -> tuple[np.ndarray, np.float32]:
    """Split ``x`` into ``(data, scale)`` with ``scale = 2**k``, k uniform in ``[lo, hi]``.

    Dividing by a power of two is exact unless the data leaves the normal range of
    ``data_dtype``; that is checked here, because an inexact split would make every later
    mismatch the harness's fault rather than the pass's.
    """
    k = int(rng.integers(lo, hi + 1))
    scale = np.float32(2.0**k)
    wide = np.asarray(x).astype(np.float64)
    data = (wide / np.float64(scale)).astype(data_dtype)
    back = data.astype(np.float64) * np.float64(scale)
    same = (back == wide) | (np.isnan(back) & np.isnan(wide))
    if not np.all(same):
        raise ValueError(f"input is not exactly representable as data * 2**{k} in {data_dtype}")
    return data, scale


def scaled_inputs(
    inputs: Sequence[np.ndarray],
    rng: np.random.Generator,
    lo: int = -40,
    hi: int = 40,
    data_dtypes: Sequence[np.dtype] | None = None,
) -> list[np.ndarray]:
    """Inputs of the scalified module: each float becomes ``data, scale``; others stay.

    ``data_dtypes`` (one per floating input, e.g. read from the rewritten signature) picks the
    data element type; by default it is f32, the type of ``scalify{data-dtype=f32}``.
    """
    out: list[np.ndarray] = []
    float_index = 0
    for x in inputs:
        x = np.asarray(x)
        if is_floating(x.dtype):
            dtype = DEFAULT_DATA_DTYPE if data_dtypes is None else data_dtypes[float_index]
            float_index += 1
            data, scale = split_scaled(x, rng, lo, hi, dtype)
            out.extend([data, np.asarray(scale, dtype=np.float32)])
        else:
            out.append(x)
    return out


def expected_scaled_signature(
    original: Sequence[TensorSig | np.ndarray | np.dtype],
) -> list[tuple[tuple[int, ...] | None, bool]]:
    """(shape, is_scale) slots the rewritten signature must have; shape None means any."""
    slots: list[tuple[tuple[int, ...] | None, bool]] = []
    for item in original:
        shape = tuple(item.shape) if isinstance(item, TensorSig | np.ndarray) else None
        if is_floating(_dtype_of(item)):
            slots.extend([(shape, False), ((), True)])
        else:
            slots.append((shape, False))
    return slots


def _dtype_of(item: TensorSig | np.ndarray | np.dtype | type) -> np.dtype:
    if isinstance(item, TensorSig | np.ndarray):
        return np.dtype(item.dtype)
    return np.dtype(item)


def _check_scale(scale: np.ndarray, position: int) -> float:
    scale = np.asarray(scale)
    if scale.shape != () or scale.dtype != np.float32:
        raise AssertionError(
            f"result {position}: a scale must be a rank-0 f32, got {scale.dtype}{scale.shape}"
        )
    value = float(scale)
    mantissa, _ = np.frexp(value)
    if not np.isfinite(value) or value <= 0 or mantissa != 0.5:
        raise AssertionError(f"result {position}: scale {value!r} is not a finite power of two")
    return value


def unscale_outputs(
    original: Sequence[TensorSig | np.ndarray | np.dtype | type],
    raw_outputs: Sequence[np.ndarray],
) -> list[np.ndarray]:
    """Regroup the scalified module's outputs into values of the original result types.

    ``original`` gives the original results' dtypes (reference arrays, dtypes or the
    ``TensorSig`` list of the original ``@main``). ``data * scale`` is formed in f64, where it is
    exact, then cast to the original dtype, so only the final cast can round or overflow, as
    the original program's own result would. Every scale must be a finite power of two.
    """
    values: list[np.ndarray] = []
    pos = 0
    for item in original:
        dtype = _dtype_of(item)
        if pos >= len(raw_outputs):
            raise AssertionError(f"rewritten module returned only {len(raw_outputs)} values")
        if is_floating(dtype):
            if pos + 1 >= len(raw_outputs):
                raise AssertionError(f"result {pos} has no scale after it")
            data = np.asarray(raw_outputs[pos])
            scale = _check_scale(raw_outputs[pos + 1], pos + 1)
            if not is_floating(data.dtype):
                raise AssertionError(f"result {pos}: data has non-float dtype {data.dtype}")
            with np.errstate(over="ignore", invalid="ignore"):
                values.append((data.astype(np.float64) * scale).astype(dtype))
            pos += 2
        else:
            values.append(np.asarray(raw_outputs[pos]))
            pos += 1
    if pos != len(raw_outputs):
        raise AssertionError(f"rewritten module returned {len(raw_outputs)} values, used {pos}")
    return values


def assert_matches(
    ref: Sequence[np.ndarray],
    got: Sequence[np.ndarray],
    rtol: float,
    atol: float = 0.0,
) -> None:
    """Assert that ``got`` reproduces ``ref`` value by value.

    * Non-float results (indices, booleans) must be equal.
    * NaN must be at the same positions; +Inf and -Inf at the same positions with their signs.
    * Finite values: ``|got - ref| <= rtol * |ref| + atol``. ``atol`` defaults to 0 on purpose:
      a scale error of any power of two, or a small value lost to a large one by a bad common
      scale, is a relative error, and with exact power-of-two rescaling the scalified program
      rounds exactly as the original, so a few ulps (rtol ~1e-6 is about 8 f32 ulps) is room
      enough for a differently fused transcendental. Where ``ref`` is exactly 0 this demands an
      exact 0 (zero tensors must stay zero); the sign of a zero is not compared.
    """
    assert len(ref) == len(got), f"{len(ref)} reference results, {len(got)} rewritten results"
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        r = np.asarray(r)
        g = np.asarray(g)
        assert r.shape == g.shape, f"result {i}: shape {g.shape}, expected {r.shape}"
        if not is_floating(r.dtype):
            assert g.dtype == r.dtype, f"result {i}: dtype {g.dtype}, expected {r.dtype}"
            bad = np.flatnonzero(r.ravel() != g.ravel())
            assert bad.size == 0, (
                f"result {i}: {bad.size} of {r.size} elements differ, first at flat index "
                f"{bad[0]}: got {g.ravel()[bad[0]]!r}, expected {r.ravel()[bad[0]]!r}"
            )
            continue
        assert is_floating(g.dtype), f"result {i}: dtype {g.dtype}, expected a float"
        r64 = r.astype(np.float64).ravel()
        g64 = g.astype(np.float64).ravel()
        _same_positions(i, "NaN", np.isnan(r64), np.isnan(g64), r64, g64)
        _same_positions(i, "+Inf", r64 == np.inf, g64 == np.inf, r64, g64)
        _same_positions(i, "-Inf", r64 == -np.inf, g64 == -np.inf, r64, g64)
        finite = np.isfinite(r64)
        with np.errstate(invalid="ignore"):
            err = np.where(finite, np.abs(g64 - r64), 0.0)
        allowed = rtol * np.abs(r64) + atol
        bad = np.flatnonzero(finite & (err > allowed))
        if bad.size:
            rel = err[bad] / np.maximum(np.abs(r64[bad]), np.finfo(np.float64).tiny)
            worst = bad[int(np.argmax(rel))]
            raise AssertionError(
                f"result {i}: {bad.size} of {r.size} finite values off by more than "
                f"rtol={rtol} atol={atol}; worst at flat index {worst}: got {g64[worst]!r}, "
                f"expected {r64[worst]!r} (relative error {rel.max():.3g})"
            )


def _same_positions(
    index: int, what: str, in_ref: np.ndarray, in_got: np.ndarray, r: np.ndarray, g: np.ndarray
) -> None:
    diff = np.flatnonzero(in_ref != in_got)
    if diff.size:
        j = diff[0]
        raise AssertionError(
            f"result {index}: {what} positions differ at {diff.size} elements, first at flat "
            f"index {j}: got {g[j]!r}, expected {r[j]!r}"
        )
