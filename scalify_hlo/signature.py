"""The public (data, scale) calling convention, on the host side.

A scaled module's entry function takes each floating argument of the original as two
consecutive values, ``data`` and a rank-0 f32 ``scale``, and returns each floating result the
same way (``original = data * scale``). These helpers read an entry signature from MLIR text,
split inputs into that convention and put outputs back together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo import module_io
from scalify_hlo.dtypes import (
    DATA_DTYPES,
    ELEMENT_DTYPES,
    EXPONENT_RANGES,
    FP8_MAX,
    FP8_NUMPY_FORMATS,
    FP8_TOP_EXPONENT,
    STORAGE_DTYPES,
)
from scalify_hlo.errors import ScalifyError
from scalify_hlo.flat_pairs import flat_positions
from scalify_hlo.names import ENCODING_ATTR, SQRT_ENCODING, string_attr
from scalify_hlo.scaled_array import zero_tensor_scale
from scalify_hlo.symbols import SCALE_ARGS_ATTR, entry_function


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    element: str  # MLIR element type name: f32, bf16, i32, ...

    @property
    def is_scaled(self) -> bool:
        """A float the scaled convention splits (in an original signature)."""
        return self.element in DATA_DTYPES

    @property
    def is_data_half(self) -> bool:
        """An element type a data half of a scaled signature may have (FP8 too: state
        stored in 8 bits, ``moment-format``)."""
        return self.element in STORAGE_DTYPES

    @property
    def dtype(self) -> np.dtype:
        if self.element in ELEMENT_DTYPES:
            return ELEMENT_DTYPES[self.element]
        raise ScalifyError(f"unsupported element type {self.element} for host arrays")


@dataclass(frozen=True)
class EntrySignature:
    inputs: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    # Indices of the inputs listed as scales (SCALE_ARGS_ATTR): each one scales the input
    # before it. Not part of equality: a signature is its types.
    scale_inputs: tuple[int, ...] = field(default=(), compare=False)
    # Indices of the inputs and results whose data holds a signed square root (``sqrt``
    # encoding, ``scalify.encoding``): ``original = x * |x|``, ``x = data * scale``.
    sqrt_inputs: tuple[int, ...] = field(default=(), compare=False)
    sqrt_results: tuple[int, ...] = field(default=(), compare=False)

    def original_encodings(self, original: EntrySignature
                           ) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
        """Per input and per result of ``original`` (whose scaled form this is), whether it
        crosses this signature as a signed square root."""
        return (_per_original(original.inputs, set(self.sqrt_inputs)),
                _per_original(original.results, set(self.sqrt_results)))


def _per_original(specs: tuple[TensorSpec, ...], encoded: set[int]) -> tuple[bool, ...]:
    return tuple(position in encoded
                 for position in flat_positions(spec.is_scaled for spec in specs))


def _spec(t: ir.Type) -> TensorSpec:
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise ScalifyError(f"entry signature has a non-static tensor type {t}")
    return TensorSpec(tuple(t.shape), str(t.element_type))


def entry_signature(source: str | bytes, filename: str = "-") -> EntrySignature:
    """The argument and result types of a module's entry function."""
    with module_io.ir_context():
        return signature_of(module_io.parse_module(source, filename))


def signature_of(module: ir.Module) -> EntrySignature:
    """``entry_signature`` of a module already in memory (no second parse of its text)."""
    func = entry_function(module)
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    signature = signature_of_type(function_type)
    return replace(signature, scale_inputs=_scale_inputs(func, signature.inputs),
                   sqrt_inputs=_sqrt_encoded(func, "arg_attrs"),
                   sqrt_results=_sqrt_encoded(func, "res_attrs"))


def _sqrt_encoded(func: ir.Operation, attrs_name: str) -> tuple[int, ...]:
    """The indices of the arguments or results whose data is ``scalify.encoding = "sqrt"``."""
    if attrs_name not in func.attributes:
        return ()
    attrs = func.attributes[attrs_name]
    return tuple(index for index in range(len(ir.ArrayAttr(attrs)))
                 if string_attr(attrs, index, ENCODING_ATTR) == SQRT_ENCODING)


def encode_sqrt(x: np.ndarray) -> np.ndarray:
    """The signed square root ``sign(x) sqrt(|x|)`` of a value stored ``sqrt``-encoded."""
    x = np.asarray(x)
    return np.sign(x) * np.sqrt(np.abs(x))


def decode_sqrt(x: np.ndarray) -> np.ndarray:
    """The value ``x * |x|`` of a signed square root ``x``."""
    x = np.asarray(x)
    return x * np.abs(x)


def _scale_inputs(func: ir.Operation, inputs: tuple[TensorSpec, ...]) -> tuple[int, ...]:
    """The indices of the arguments listed as scales (``SCALE_ARGS_ATTR``) that are one:
    a rank-0 f32 after a scaled tensor."""
    if SCALE_ARGS_ATTR not in func.attributes:
        return ()
    listed = ir.DenseI64ArrayAttr(func.attributes[SCALE_ARGS_ATTR])
    return tuple(index for index in listed if 0 < index < len(inputs)
                 and inputs[index - 1].is_data_half and inputs[index] == TensorSpec((), "f32"))


def signature_of_type(function_type: ir.Type) -> EntrySignature:
    """The ``EntrySignature`` of a function type (``scalify.original_type`` too)."""
    function_type = ir.FunctionType(function_type)
    return EntrySignature(tuple(_spec(t) for t in function_type.inputs),
                          tuple(_spec(t) for t in function_type.results))


def pow2_scale_of(x: np.ndarray, data_dtype: np.dtype | None = None) -> np.float32:
    """A power of two near the RMS of the finite values of ``x``.

    An all-zero tensor (zero-initialized biases, optimizer moments) with f16 data gets the
    smallest normal scale: its data is 0 at any scale, and a tiny scale never wins a common
    scale (max) over the values it is later combined with, which would push those below
    f16's range. With f32/bf16 data (first-operand common scale) it gets 1.
    """
    values = np.asarray(x, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size and not finite.any():
        return np.float32(zero_tensor_scale(data_dtype or np.float32))
    rms = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
    if rms == 0.0 or not np.isfinite(rms):
        return np.float32(1.0)
    exponent = int(np.clip(np.round(np.log2(rms)), *EXPONENT_RANGES["f32"]))
    return np.float32(2.0 ** exponent)


def split_inputs(original: EntrySignature, inputs: Sequence[np.ndarray],
                 scales: Sequence[float | None] | None = None,
                 data_dtype: np.dtype | Sequence[np.dtype | None] | None = None,
                 encoded: Sequence[bool] = ()) -> list[np.ndarray]:
    """Flatten original inputs into the scaled convention: floats become (x / s, s).

    ``scales`` gives one power of two per input (None or missing: from the RMS);
    ``data_dtype`` one dtype for all data, or one per input (see ``input_data_dtypes``);
    ``encoded`` per input, whether it is ``sqrt``-encoded (``original_encodings``): its
    signed square root is split, and a scale given for it is the root's.
    """
    if len(inputs) != len(original.inputs):
        raise ScalifyError(f"expected {len(original.inputs)} inputs, got {len(inputs)}")
    flat: list[np.ndarray] = []
    for index, (spec, x) in enumerate(zip(original.inputs, inputs, strict=True)):
        x = np.asarray(x)
        if not spec.is_scaled:
            flat.append(x.astype(spec.dtype, copy=False))
            continue
        if index < len(encoded) and encoded[index]:
            x = encode_sqrt(x.astype(np.float64))
        scale = scales[index] if scales is not None and index < len(scales) else None
        dtype = (data_dtype[index] if isinstance(data_dtype, (list, tuple))
                 else data_dtype)
        fp8 = FP8_NUMPY_FORMATS.get(np.dtype(dtype)) if dtype is not None else None
        if scale is None:
            scale = fp8_scale_of(x, fp8) if fp8 else pow2_scale_of(x, dtype)
        else:
            scale = _checked_scale(scale, index)
        data = x.astype(np.float64) / np.float64(scale)
        if fp8:  # a convert to FP8 does not saturate: finite values are clamped first
            data = np.where(np.isfinite(data), np.clip(data, -FP8_MAX[fp8], FP8_MAX[fp8]), data)
        flat += [data.astype(dtype or np.float32), np.asarray(scale, dtype=np.float32)]
    return flat


def fp8_scale_of(x: np.ndarray, fmt: str) -> np.float32:
    """The power of two that puts the amax of the finite values of ``x`` in the top binade of
    the FP8 format ``fmt`` (MLIR name), as a step stores FP8 state: the tensor keeps the
    format's whole range below its largest element. An all-zero tensor gets f16 data's zero
    scale (FP8 state sits beside f16 data), 1 when nothing is finite."""
    values = np.asarray(x, dtype=np.float64)
    finite = np.abs(values[np.isfinite(values)])
    if not finite.size:
        return np.float32(1.0)
    amax = float(finite.max())
    if amax == 0.0:
        return np.float32(zero_tensor_scale(np.float16))
    exponent = np.frexp(amax)[1] - 1 - FP8_TOP_EXPONENT[fmt]  # floor(log2(amax)) - top
    return np.float32(2.0 ** int(np.clip(exponent, *EXPONENT_RANGES["f32"])))


def _checked_scale(scale: float, index: int) -> np.float32:
    """A scale as the rewritten program reads it: a positive normal f32 power of two (its
    exponent is read from the bits, so 3.0 would silently act as 2.0)."""
    value = np.float32(scale)
    mantissa, _ = np.frexp(value)
    if not (np.isfinite(value) and value >= np.finfo(np.float32).tiny and mantissa == 0.5):
        raise ScalifyError(f"input {index}: scale {float(scale)!r} is not a positive normal "
                           f"power of two")
    return value


def input_data_dtypes(original: EntrySignature, scaled: EntrySignature) -> list[np.dtype | None]:
    """Per original input, the numpy dtype of its data in the ``scaled`` module's signature
    (None for unscaled inputs): what ``split_inputs`` needs for a module whose data types
    differ between inputs."""
    specs = original.inputs
    return [np.dtype(ELEMENT_DTYPES[scaled.inputs[position].element]) if spec.is_scaled
            else None
            for spec, position in zip(specs, flat_positions(s.is_scaled for s in specs),
                                      strict=True)]


def join_outputs(original: EntrySignature, raw: Sequence[np.ndarray],
                 encoded: Sequence[bool] = ()) -> list[np.ndarray]:
    """Regroup a scaled module's outputs into the original ones (``data * scale`` in f32,
    squared back for the results ``encoded`` as signed square roots)."""
    joined: list[np.ndarray] = []
    specs = original.results
    positions = flat_positions(spec.is_scaled for spec in specs)
    for index, (spec, position) in enumerate(zip(specs, positions, strict=True)):
        if spec.is_scaled:
            data, scale = raw[position], raw[position + 1]
            value = (np.asarray(data, np.float32) * np.float32(scale)).astype(np.float32)
            if index < len(encoded) and encoded[index]:
                value = decode_sqrt(value)
            joined.append(value)
        else:
            joined.append(np.asarray(raw[position]))
    return joined
