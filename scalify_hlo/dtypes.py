"""The element-type facts every layer shares: which floats carry a (data, scale) pair, their
numpy spellings and user-facing names, their exponent ranges, and the FP8 formats.

One module at the bottom of the layering (no MLIR, no jax), so that the passes, the scaled
signature and the Python API read one declaration instead of keeping copies in step.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# The data dtypes of a scaled rewrite, by MLIR name, in the order options list them (f32 first:
# the exact mode, and the dtype a host input defaults to).
DATA_DTYPES = ("f32", "f16", "bf16")
# User-facing names of the data dtypes (Policy fields, ``data-dtype=float16``), by MLIR name.
DATA_DTYPE_ALIASES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}

# The FP8 formats of dot operands, by MLIR name: the largest finite value (what a cast clamps
# to) and the exponent an operand's amax is brought to: the largest binade that stays below it
# (E4M3FN: [128, 256) <= 448; E5M2: [16384, 32768) <= 57344).
FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
FP8_FORMATS = tuple(FP8_MAX)
FP8_TOP_EXPONENT = {"f8E4M3FN": 7, "f8E5M2": 14}
# (smallest normal exponent, largest exponent) of each FP8 format: E5M2 has f16's normals.
FP8_EXPONENT_RANGES = {"f8E4M3FN": (-6, 8), "f8E5M2": (-14, 15)}
# User-facing names of the FP8 formats (Policy fields), by MLIR name.
FP8_FORMAT_ALIASES = {"float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2"}
# The smallest normal exponent of each FP8 format (below it, subnormals with fewer bits).
FP8_MIN_NORMAL_EXPONENT = {"f8E4M3FN": -6, "f8E5M2": -14}
# The exponent of each FP8 format's smallest subnormal (the smallest normal's, less the
# mantissa bits): E5M2 shares f16's normals but not its subnormals, which reach 2^-24.
FP8_SMALLEST_EXPONENT = {"f8E4M3FN": -9, "f8E5M2": -16}
# The element types a data half of the scaled signature may have: the data dtypes, and FP8
# for training state stored in 8 bits (an optimizer's first moment, ``moment-format``).
STORAGE_DTYPES = (*DATA_DTYPES, *FP8_FORMATS)

# MLIR float element type name -> numpy scalar type: the ones the rewrite computes in, and
# every narrow float jax can hand a step as an argument (quantized weights, FP8 state).
FLOAT_DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                "f64": np.float64, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
                "f8E5M2": ml_dtypes.float8_e5m2, "f8E4M3": ml_dtypes.float8_e4m3,
                "f8E3M4": ml_dtypes.float8_e3m4, "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
                "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
                "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz,
                "f8E8M0FNU": ml_dtypes.float8_e8m0fnu, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
                "f6E2M3FN": ml_dtypes.float6_e2m3fn, "f6E3M2FN": ml_dtypes.float6_e3m2fn}
_INTEGER_DTYPES = {"i1": np.bool_, "i2": ml_dtypes.int2, "i4": ml_dtypes.int4, "i8": np.int8,
                   "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui2": ml_dtypes.uint2,
                   "ui4": ml_dtypes.uint4, "ui8": np.uint8, "ui16": np.uint16,
                   "ui32": np.uint32, "ui64": np.uint64}
_COMPLEX_DTYPES = {"complex<f32>": np.complex64, "complex<f64>": np.complex128}
# MLIR element type name -> numpy dtype, for every element type a host array can have.
ELEMENT_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(t)
    for name, t in {**FLOAT_DTYPES, **_INTEGER_DTYPES, **_COMPLEX_DTYPES}.items()}
# The numpy dtypes of the data dtypes: the leaves a scaled signature splits.
DATA_NUMPY_DTYPES = tuple(ELEMENT_DTYPES[name] for name in DATA_DTYPES)
# FP8 numpy dtype -> MLIR name (a data half stored in FP8, ``fp8_storage``).
FP8_NUMPY_FORMATS = {ELEMENT_DTYPES[name]: name for name in FP8_FORMATS}

# (smallest normal exponent, largest exponent) of each data dtype.
EXPONENT_RANGES = {"f32": (-126, 127), "bf16": (-126, 127), "f16": (-14, 15)}
# The exponents of the powers of two a constant of each data dtype holds exactly: the normal
# range, and for f16 its subnormals too (XLA keeps them; f32 and bf16 ones may be flushed).
EXACT_POW2_EXPONENTS = {"f32": EXPONENT_RANGES["f32"], "bf16": EXPONENT_RANGES["bf16"],
                        "f16": (-24, EXPONENT_RANGES["f16"][1])}
# (exponent bits, explicit significand bits) of each data dtype: what a reduce_precision that
# rounds wider data as the narrower type does takes.
FLOAT_BITS = {"f32": (8, 23), "bf16": (8, 7), "f16": (5, 10)}


def exponent_bits(name: str) -> int | None:
    """The exponent bits of a data dtype (None for other types)."""
    bits = FLOAT_BITS.get(name)
    return bits[0] if bits is not None else None


def rounding_bits(own: str, data: str) -> tuple[int, int] | None:
    """The (exponent bits, significand bits) that round ``data`` (a dtype name) as a value of
    type ``own`` rounds, in data's exponent range (the scale keeps the data off own's range
    limits); None where data has no more significand bits than own (nothing to round)."""
    own_bits, data_bits = FLOAT_BITS.get(own), FLOAT_BITS.get(data)
    if own_bits is None or data_bits is None or own_bits[1] >= data_bits[1]:
        return None
    return data_bits[0], own_bits[1]
# The largest finite value of each data dtype.
LARGEST_FINITE = {"f32": float(np.finfo(np.float32).max), "bf16": 3.3895313892515355e38,
                  "f16": 65504.0}
