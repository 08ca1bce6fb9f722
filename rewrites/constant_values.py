"""Values of constants read at rewrite time: the splat of a dense attribute, a constant
behind broadcasts, a dense attribute as numpy. Scale decisions (static exponents, folding)
read constants; emitting IR is ``emitter``'s job."""

from __future__ import annotations

import math

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import defining_op, numpy_dtype
from scalify_hlo.scale import LARGEST_FINITE


def splat_scalar(attr: ir.Attribute) -> float | None:
    """The single value of a splat float/int dense attribute, without materializing it."""
    dense = ir.DenseElementsAttr(attr)
    if not dense.is_splat:
        return None
    value = dense.get_splat_value()
    if isinstance(value, ir.FloatAttr):
        return float(ir.FloatAttr(value).value)
    if isinstance(value, ir.IntegerAttr):
        return float(ir.IntegerAttr(value).value)
    return None


def constant_splat(op: ir.Operation) -> float | None:
    """The single value of a splat ``stablehlo.constant`` op; None for any other: a complex
    one (reading its ``value`` attribute raises a TypeError in these bindings, which escaped
    the guard analysis of ``square_values`` as a traceback: an FFT's gradient) and a
    ``dense_resource`` blob (not a DenseElementsAttr: a ValueError, which escaped the
    integer-constant convert of ``rule_convert`` as an internal error)."""
    try:
        return splat_scalar(op.attributes["value"])
    except (KeyError, TypeError, ValueError):
        return None


def splat_constant_value(value: ir.Value) -> float | None:
    """The value of a splat constant, or of a broadcast of one; None otherwise."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name == "stablehlo.broadcast_in_dim":
        return splat_constant_value(op.operands[0])
    if op.name != "stablehlo.constant":
        return None
    return constant_splat(op)


def distinct_values(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense attribute, a splat as one element: enough for scale decisions."""
    scalar = splat_scalar(attr)
    if scalar is not None:
        return np.array([scalar], dtype=np.float64)
    return read_dense(attr).astype(np.float64)


def read_dense(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense elements attribute as a numpy array of the element's dtype."""
    dense = ir.DenseElementsAttr(attr)
    shaped = ir.ShapedType(dense.type)
    dtype = numpy_dtype(shaped.element_type)
    if dense.is_splat:
        scalar = np.array(ir.FloatAttr(dense.get_splat_value()).value, dtype=np.float64)
        return np.full(shaped.shape, scalar.astype(dtype), dtype=dtype)
    array = np.array(dense)
    if array.dtype == dtype:
        return array.copy()
    try:
        return np.frombuffer(memoryview(dense), dtype=dtype).reshape(shaped.shape).copy()
    except BufferError:  # bf16 and the FP8 formats: these bindings export no buffer
        return _read_printed(str(dense), dtype).reshape(shaped.shape)


def _read_printed(text: str, dtype: np.dtype) -> np.ndarray:
    """The values of a dense attribute from its printed form, for element types the bindings
    neither convert nor export as a buffer. MLIR prints a large attribute as its storage in
    hex (``dense<"0x...">``) and a small one as a nested list of decimals with 7 significant
    digits (exact for these types of at most 16 bits) and NaN or inf as the element's bits
    in hex, so both forms read back exactly."""
    printed = text.rpartition(" : ")[0]  # dense<...> : tensor<...>
    body = printed[printed.index("<") + 1:printed.rindex(">")].strip()
    if body.startswith('"0x'):
        return np.frombuffer(bytes.fromhex(body[3:-1]), dtype=dtype).copy()
    bits_dtype = np.dtype(f"u{np.dtype(dtype).itemsize}")
    tokens = body.replace("[", " ").replace("]", " ").split(",")
    values = np.empty(len(tokens), dtype=dtype)
    for at, token in enumerate(tokens):
        token = token.strip()
        if token.lower().startswith("0x"):
            values[at] = np.array(int(token, 16), dtype=bits_dtype).view(dtype)
        else:
            values[at] = float(token)
    return values


# Below this magnitude no rounding of data reaches f32's largest.
NEAR_F32_MAX = LARGEST_FINITE["f32"] / 2


def finite_data(values: np.ndarray, exp: int, data_type: ir.Type) -> np.ndarray:
    """``values / 2^exp`` as data of ``data_type``'s element, rounded to nearest, except
    that a finite value whose rounded data times ``2^exp`` is past f32's largest is rounded
    toward zero: f32's largest (``jnp.finfo(f32).max``, a common fill value) has 24 mantissa
    bits, which round up to 2.0 in f16 or bf16 data, and 2.0 * 2^127 is inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        divided = values / 2.0 ** exp
        if not np.any(np.abs(values) >= NEAR_F32_MAX):
            return divided
        rounded = np.asarray(divided).astype(numpy_dtype(ir.ShapedType(data_type).element_type))
        overflows = np.isfinite(values) & (np.abs(rounded.astype(np.float64) * 2.0 ** exp)
                                           > LARGEST_FINITE["f32"])
        toward_zero = np.nextafter(rounded, np.zeros_like(rounded))
    return np.where(overflows, toward_zero, rounded).astype(np.float64)


def finite_splat(value: float, exp: int, data_type: ir.Type) -> float:
    """``finite_data`` of one value (a splat's), without numpy's per-call cost where no
    rounding can reach f32's largest (most constants are splats)."""
    if abs(value) >= NEAR_F32_MAX:
        return float(finite_data(np.float64(value), exp, data_type))
    try:
        return math.ldexp(value, -exp)  # value / 2^exp, exactly rounded
    except OverflowError:  # past f64's range: inf, as the quotient is
        return math.copysign(math.inf, value)
