"""``ScaledArray``: a JAX pytree of ``(data, scale)`` with ``value = data * scale``.

Training state (weights, optimizer moments) stays a ``ScaledArray`` from one step to the
next, so FP16 data with a power-of-two scale is what lives in memory between steps.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from scalify_hlo.dtypes import (
    DATA_DTYPES,
    DATA_NUMPY_DTYPES,
    EXPONENT_RANGES,
    FP8_MAX,
    FP8_NUMPY_FORMATS,
    FP8_TOP_EXPONENT,
)
from scalify_hlo.errors import ScalifyError

# (smallest normal, largest) exponent of f32: the range of a scale.
_F32_EXPONENTS = EXPONENT_RANGES["f32"]
# How far pow2_scale shifts values down before squaring them where their squares overflow.
_SQUARE_SHIFT = 65
# The MLIR name of each data dtype, by numpy dtype.
_MLIR_NAMES = dict(zip(DATA_NUMPY_DTYPES, DATA_DTYPES, strict=True))
# An all-zero tensor's scale with f16 data: the smallest normal f32 power of two, so that a
# zero-initialized moment never dominates a common (max) scale; its data is 0 at any scale.
# f32/bf16 data take one operand's scale instead (scalify's common-scale=auto), where a
# zero tensor is better at scale 1 so that what is added to it stays near unit scale.
ZERO_SCALE = 2.0 ** EXPONENT_RANGES["f32"][0]
# A ScaledArray's encoding: "" (``value = data * scale``) or "sqrt" (the data holds the signed
# square root: ``value = x * |x|`` with ``x = data * scale``; squares between steps, such as
# Adam's second moment, see docs/scaled-signature.md).
SQRT = "sqrt"
ENCODINGS = ("", SQRT)


def zero_tensor_scale(dtype: Any) -> float:
    return ZERO_SCALE if jnp.dtype(dtype) == jnp.dtype(jnp.float16) else 1.0


@jax.jit
def _unstack(vector: jax.Array) -> tuple[jax.Array, ...]:
    return tuple(vector[i] for i in range(vector.shape[0]))


# Scale arrays this library made, all powers of two (a step's output scales, as_scaled's),
# by id: a step passes them on as they are, where it splits any other scale that lives on
# the device (it cannot read its value without waiting for it). Entries leave with their
# array.
_POW2_SCALES: weakref.WeakValueDictionary[int, jax.Array] = weakref.WeakValueDictionary()


def _mark_pow2(*scales: Any) -> None:
    for scale in scales:
        if isinstance(scale, jax.Array) and not isinstance(scale, jax.core.Tracer):
            _POW2_SCALES[id(scale)] = scale


def is_known_pow2(scale: Any) -> bool:
    """Whether ``scale`` is an array this library made as a power of two."""
    return _POW2_SCALES.get(id(scale)) is scale


class ScaleBank:
    """The scales of one step's outputs as one f32 vector, each a power of two (a step
    trusts a bank's elements to be: build banks with ``ScaledStep.scale_args``).

    Its elements are read when one is first asked for, all at once (one dispatch, not one
    per scale); a step fed ScaledArrays of a bank takes the vector itself.
    """

    __slots__ = ("vector", "_elements", "delayed")

    def __init__(self, vector: jax.Array) -> None:
        self.vector = vector
        self._elements: tuple[jax.Array, ...] | None = None
        # Whether the vector ends with the exponents a step with delayed statistics measured
        # (after its scales): a step fed this bank applies them.
        self.delayed = False

    def element(self, index: int) -> jax.Array:
        if self._elements is None:
            self._elements = _unstack(self.vector)
            _mark_pow2(*self._elements)
        return self._elements[index]


@jax.tree_util.register_pytree_node_class
class ScaledArray:
    """``data * scale``: data in a low-precision dtype, scale a rank-0 f32.

    The scale is any finite positive number; the ones this library makes are powers of two.
    A step compiled by ``compile_scaled`` splits any other scale into a power of two and a
    factor that it multiplies into the data, and refuses a zero, negative, infinite or NaN
    scale where it can see it without waiting for the device (docs/scaled-signature.md).

    A step compiled by ``compile_scaled`` returns all its scales in one ``ScaleBank`` (one
    buffer per call instead of one per scale): its ``ScaledArray`` outputs hold the bank and
    their index in it, and ``scale`` reads the element when first asked for. Feeding such
    outputs back to the step passes the bank's vector, not the elements.

    ``encoding`` "sqrt": the data holds the signed square root of the value (a step stores
    squares that way between calls); ``unscale()`` returns the value either way.
    """

    __slots__ = ("data", "_scale", "_bank", "_index", "encoding")

    def __init__(self, data: Any, scale: Any, encoding: str = "") -> None:
        if encoding not in ENCODINGS:
            raise ScalifyError(f"unknown ScaledArray encoding {encoding!r} (use '' or 'sqrt')")
        self.data = data
        self._scale = scale
        self._bank: Any = None
        self._index = -1
        self.encoding = encoding

    @classmethod
    def in_bank(cls, data: Any, bank: ScaleBank, index: int) -> ScaledArray:
        """``data`` whose scale is element ``index`` of ``bank``, read when asked for."""
        return banked(data, bank, index)

    @property
    def scale(self) -> Any:
        if self._scale is None and self._bank is not None:
            self._scale = self._bank.element(self._index)
        return self._scale

    @scale.setter
    def scale(self, value: Any) -> None:
        self._scale, self._bank, self._index = value, None, -1

    @property
    def bank(self) -> tuple[ScaleBank, int] | None:
        """The bank this scale lives in and its index there; None for a scale of its own."""
        return None if self._bank is None else (self._bank, self._index)

    def tree_flatten(self) -> tuple[tuple[Any, Any], str | None]:
        return (self.data, self.scale), self.encoding or None

    @classmethod
    def tree_unflatten(cls, aux: str | None, children: tuple[Any, Any]) -> ScaledArray:
        return cls(*children, encoding=aux or "")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.data))

    @property
    def dtype(self) -> np.dtype:
        return jnp.asarray(self.data).dtype if not hasattr(self.data, "dtype") else self.data.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def unscale(self, dtype: Any = jnp.float32) -> jax.Array:
        """The represented value, computed in f32 and cast to ``dtype``."""
        value = jnp.asarray(self.data, jnp.float32) * jnp.asarray(self.scale, jnp.float32)
        if self.encoding == SQRT:
            value = value * jnp.abs(value)
        return value.astype(dtype)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The value (``np.asarray(loss)``, ``jnp.asarray``), in f32: numpy otherwise made a
        0-d object array holding the pair, and ``jnp.asarray`` failed."""
        value = np.asarray(self.unscale())
        return value if dtype is None else value.astype(dtype)

    def __jax_array__(self) -> jax.Array:
        """The value for ``jnp.asarray`` and jax.numpy functions, in f32 (read through
        ``__array__`` and ``dtype``, it was cast to the data's dtype: f16 overflowed)."""
        return self.unscale()

    def __float__(self) -> float:
        """``float(loss)`` of a scalar step output, as of a jax scalar."""
        return float(self.unscale())

    def __repr__(self) -> str:
        encoding = f", encoding={self.encoding!r}" if self.encoding else ""
        return f"ScaledArray(data={self.data!r}, scale={self.scale!r}{encoding})"


_new_scaled = object.__new__


def banked(data: Any, bank: ScaleBank, index: int, encoding: str = "") -> ScaledArray:
    """``ScaledArray.in_bank`` without the classmethod call: a step makes one per scaled
    output on every call."""
    value = _new_scaled(ScaledArray)
    value.data, value._scale, value._bank, value._index = data, None, bank, index
    value.encoding = encoding
    return value


def pow2_scale(x: Any, dtype: Any = jnp.float16) -> jax.Array:
    """A power of two near the RMS of the finite values of ``x`` (traceable, so it can run
    inside ``jit``); ``zero_tensor_scale(dtype)`` for an all-zero tensor, 1 when nothing is
    finite."""
    x = jnp.asarray(x, jnp.float32)
    finite = jnp.isfinite(x)
    values = jnp.where(finite, x, 0.0)
    # Three f32 sums, one reducer: on a sharded x each statistic is an all-reduce, and XLA
    # combines same-reducer all-reduces into one (a sum, an any, an all and an int sum were
    # four per call). Counts of 0/1 in f32 are exact up to 2^24 elements and never round a
    # nonzero count to 0.
    finite_count = jnp.sum(finite.astype(jnp.float32))
    nonzero_count = jnp.sum((values != 0).astype(jnp.float32))
    # A square overflows from |x| = 2^64 and flushes to zero below 2^-63: where the plain
    # sum of squares does either, the squares of x * 2^-65 or x * 2^65 give the RMS. Without
    # them a tensor with an element above 1.8e19 took the largest scale, one whose elements
    # are all below 1e-19 scale 1, and their f16 data held zeros.
    count = jnp.maximum(finite_count, 1.0)
    plain = jnp.sum(values * values)
    down = values * jnp.float32(2.0**-_SQUARE_SHIFT)
    up = values * jnp.float32(2.0**_SQUARE_SHIFT)
    rms = jnp.where(
        ~jnp.isfinite(plain),
        jnp.sqrt(jnp.sum(down * down) / count) * jnp.float32(2.0**_SQUARE_SHIFT),
        jnp.where(plain < jnp.float32(2.0**-60),
                  jnp.sqrt(jnp.sum(up * up) / count) * jnp.float32(2.0**-_SQUARE_SHIFT),
                  jnp.sqrt(plain / count)))
    # At most 2^126: data is the value divided by the scale, which XLA:CPU computes as a
    # product with the scale's reciprocal, and 2^-127 is subnormal (flushed: 3e38 / 2^127
    # came out 0). The data of a value near f32's largest is then below 4.
    exponent = jnp.clip(jnp.round(jnp.log2(jnp.where(rms > 0, rms, 1.0))),
                        _F32_EXPONENTS[0], _F32_EXPONENTS[1] - 1)
    # ldexp, not exp2: XLA's exp2 is not exact at most integer exponents.
    scale = jnp.ldexp(jnp.float32(1.0), exponent.astype(jnp.int32))
    all_zero = jnp.logical_and(finite_count > 0, nonzero_count == 0)
    return jnp.where(all_zero, jnp.float32(zero_tensor_scale(dtype)),
                     jnp.where(rms > 0, scale, 1.0))


def fp8_format(dtype: Any) -> str | None:
    """The MLIR name of an FP8 dtype (``float8_e4m3fn`` -> ``f8E4M3FN``), else None."""
    return FP8_NUMPY_FORMATS.get(jnp.dtype(dtype))


def fp8_scale(x: Any, dtype: Any) -> jax.Array:
    """The power of two that puts the amax of the finite values of ``x`` in the top binade of
    the FP8 ``dtype``, as a step stores FP8 state (traceable): the tensor keeps the format's
    whole range below its largest element. An all-zero tensor gets f16 data's zero scale
    (FP8 state sits beside f16 data), 1 when nothing is finite."""
    x = jnp.asarray(x, jnp.float32)
    finite = jnp.isfinite(x)
    amax = jnp.max(jnp.where(finite, jnp.abs(x), 0.0))
    exponent = jnp.frexp(amax)[1] - 1 - FP8_TOP_EXPONENT[fp8_format(dtype)]
    scale = jnp.ldexp(jnp.float32(1.0), jnp.clip(exponent, *_F32_EXPONENTS).astype(jnp.int32))
    return jnp.where(amax > 0, scale, jnp.where(jnp.any(finite), jnp.float32(ZERO_SCALE), 1.0))


def to_fp8(value: Any, scale: Any, dtype: Any) -> jax.Array:
    """``value / scale`` as FP8 data of ``dtype``, finite values clamped to its largest
    finite value first (a convert to FP8 does not saturate: E4M3FN turns 465 into NaN)."""
    data = jnp.asarray(value, jnp.float32) / scale
    limit = FP8_MAX[fp8_format(dtype)]
    return jnp.where(jnp.isfinite(data), jnp.clip(data, -limit, limit), data).astype(dtype)


def as_scaled(x: Any, dtype: Any = jnp.float16, encoding: str | None = None) -> ScaledArray:
    """Split ``x`` into data of ``dtype`` and a power-of-two scale from its RMS (from its
    amax in the format's top binade for an FP8 ``dtype``); with ``encoding="sqrt"`` the
    data holds the signed square root (the scale is the root's). A ScaledArray keeps its
    encoding unless ``encoding`` names another one, and its data unless it must become FP8
    (then it is unscaled and split again)."""
    if isinstance(x, ScaledArray):
        same = encoding is None or encoding == x.encoding
        if same and (fp8_format(dtype) is None or jnp.dtype(x.dtype) == jnp.dtype(dtype)):
            data, scale = jnp.asarray(x.data), jnp.asarray(x.scale, jnp.float32)
            if data.dtype != jnp.dtype(dtype):
                data, scale = _fitted(data, scale, dtype)
            return ScaledArray(data.astype(dtype), scale, x.encoding)
        encoding = x.encoding if encoding is None else encoding
        x = x.unscale()
    encoding = encoding or ""
    value = jnp.asarray(x, jnp.float32)
    if encoding == SQRT:
        value = jnp.sign(value) * jnp.sqrt(jnp.abs(value))
    if fp8_format(dtype) is not None:
        scale = fp8_scale(value, dtype)
        data = to_fp8(value, scale, dtype)
    else:
        scale = pow2_scale(value, dtype)
        data = (value / scale).astype(dtype)
    _mark_pow2(scale)
    return ScaledArray(data, scale, encoding)


def _fitted(data: Any, scale: jax.Array, dtype: Any) -> tuple[jax.Array, jax.Array]:
    """``data`` and ``scale`` with a power of two moved from the data to the scale where the
    data's largest magnitude is outside ``dtype``'s exponent range (f32 data of 1e5 or 1e-9
    given to an f16 step: the cast made inf or 0 of it); elsewhere as they are, so that a
    scale the caller chose is kept. The value ``data * scale`` is the same (traceable)."""
    limits = EXPONENT_RANGES.get(_MLIR_NAMES.get(jnp.dtype(dtype)))
    if (limits is None or limits == _F32_EXPONENTS  # f32 and bf16 hold f32's range
            or not jnp.issubdtype(data.dtype, jnp.floating)):
        return data, scale
    values = data.astype(jnp.float32)
    amax = jnp.max(jnp.where(jnp.isfinite(values), jnp.abs(values), 0.0), initial=0.0)
    exponent = jnp.frexp(amax)[1] - 1  # amax in [2^exponent, 2^(exponent + 1))
    factor = pow2_scale(values, dtype)
    moved = scale * factor
    # From 2^15 on: f16's largest, 65504, is in that binade, and a larger value rounds to inf.
    fit = ((amax > 0) & ((exponent < limits[0]) | (exponent >= limits[1]))
           & jnp.isfinite(moved) & (moved > 0))
    return jnp.where(fit, values / factor, data), jnp.where(fit, moved, scale)


# ----- scales that are not powers of two ----------------------------------------------------
_MIN_NORMAL_EXPONENT, _MAX_EXPONENT = _F32_EXPONENTS
_F32_MAX = float(np.finfo(np.float32).max)


def scale_type_error(shape: tuple[int, ...], dtype: Any) -> str | None:
    """Why a scale of this shape and dtype is not a real scalar, or None."""
    if shape != ():
        return f"a scale of shape {shape}, expected a scalar"
    kind = np.dtype(dtype).kind
    if kind in "fiu":
        return None
    if kind in "bcOSU" or not (jnp.issubdtype(dtype, jnp.floating)  # bfloat16 is kind V
                               or jnp.issubdtype(dtype, jnp.integer)):
        return f"a scale of dtype {np.dtype(dtype)}, expected a real number"
    return None


def check_scale(scale: Any, name: str) -> float:
    """A scale given on the host (a Python or numpy number or rank-0 array) as a float in f32;
    a one-line error naming ``name`` when it is not a finite positive number. (Run on every
    call that gets such a scale: a Python number takes the short way.)"""
    if type(scale) is float or type(scale) is int:
        value = float(scale)
    else:
        array = np.asarray(scale)
        error = scale_type_error(array.shape, array.dtype)
        if error is not None:
            raise ScalifyError(f"{name}: {error}")
        value = float(array)
    if is_pow2(value):
        return value
    rounded = float(np.float32(value)) if 0.0 < value <= _F32_MAX else 0.0  # also NaN
    if not (math.isfinite(rounded) and rounded > 0.0):
        raise ScalifyError(f"{name}: scale {value!r} is not a finite positive f32 number")
    return rounded


def is_pow2(value: float) -> bool:
    """Whether a positive f32 ``value`` is a normal power of two (the scales a rewritten
    module takes as they are)."""
    mantissa, exponent = math.frexp(value)
    return mantissa == 0.5 and _MIN_NORMAL_EXPONENT <= exponent - 1 <= _MAX_EXPONENT


def split_scale(value: float) -> tuple[float, float]:
    """``(pow2, factor)`` with ``pow2 * factor == value`` exactly, for a finite positive f32
    ``value``: ``pow2`` a normal f32 power of two, ``value`` rounded up to one (``factor`` in
    (0.5, 1], so data multiplied by it never grows), 2^-126 below the normal range
    (``factor`` < 0.5: a subnormal scale moves its missing bits into the data), at most
    2^127 (``factor`` up to 2 above it)."""
    mantissa, exponent = math.frexp(value)  # value = mantissa * 2**exponent, mantissa in [0.5, 1)
    if mantissa == 0.5:
        exponent -= 1
    exponent = min(max(exponent, _MIN_NORMAL_EXPONENT), _MAX_EXPONENT)
    return math.ldexp(1.0, exponent), math.ldexp(value, -exponent)


def split_pow2(data: Any, scale: Any, dtype: Any) -> ScaledArray:
    """``data * scale`` as ``dtype`` data and a power-of-two scale (``split_scale``, traced):
    the factor is multiplied into the data in f32 and rounded once to ``dtype``; a power of
    two leaves the data as it is. Built from the scale's bits, so that a subnormal scale is
    exact where XLA flushes subnormal f32 arithmetic to zero. A scale that is not positive
    keeps the value ``data * scale`` too: its sign goes to the factor, 0 gives zero data;
    an infinite or NaN scale is the factor, with scale 1."""
    s = jnp.asarray(scale, jnp.float32)
    bits = lax.bitcast_convert_type(s, jnp.int32)
    field = lax.shift_right_logical(bits, jnp.int32(23)) & 0xFF  # the biased exponent
    mantissa = bits & 0x7FFFFF
    sign = bits & jnp.int32(-(1 << 31))
    round_up = (mantissa != 0).astype(jnp.int32)
    exponent = jnp.where(field == 0, _MIN_NORMAL_EXPONENT,
                         jnp.minimum(field - 127 + round_up, _MAX_EXPONENT))
    normal = lax.bitcast_convert_type(sign | mantissa | ((field - exponent) << 23),
                                      jnp.float32)
    subnormal = mantissa.astype(jnp.float32) * jnp.float32(2.0 ** -23)
    subnormal = jnp.where(sign != 0, -subnormal, subnormal)
    finite = field != 0xFF
    factor = jnp.where(field == 0, subnormal, jnp.where(finite, normal, s))
    exponent = jnp.where(finite, exponent, 0)
    pow2 = lax.bitcast_convert_type((exponent + 127) << 23, jnp.float32)
    scaled = jnp.asarray(data, jnp.float32) * factor
    if fp8_format(dtype) is not None and jnp.dtype(jnp.asarray(data).dtype) != jnp.dtype(dtype):
        # Wider data made FP8: its amax moves to the format's top binade (both powers of two).
        shift = fp8_scale(scaled, dtype)
        return ScaledArray(to_fp8(scaled, shift, dtype), pow2 * shift)
    scaled, pow2 = _fitted(scaled, pow2, dtype)
    return ScaledArray(scaled.astype(dtype), pow2)


def is_scalable(x: Any) -> bool:
    """Floating leaves that the scaled convention splits (f16, bf16, f32)."""
    if isinstance(x, ScaledArray):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.dtype(dtype) in DATA_NUMPY_DTYPES


def is_scaled_leaf(x: Any) -> bool:
    return isinstance(x, ScaledArray)


def scale_tree(tree: Any, dtype: Any = jnp.float16) -> Any:
    """Every floating leaf of a parameter or optimizer-state tree as a ``ScaledArray``."""
    return jax.tree.map(lambda x: as_scaled(x, dtype) if is_scalable(x) else x, tree,
                        is_leaf=is_scaled_leaf)


def unscale_tree(tree: Any, dtype: Any = jnp.float32) -> Any:
    """Every ``ScaledArray`` leaf replaced by its value."""
    return jax.tree.map(lambda x: x.unscale(dtype) if isinstance(x, ScaledArray) else x, tree,
                        is_leaf=is_scaled_leaf)
