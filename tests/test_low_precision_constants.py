"""Constants of bf16 and the FP8 formats, which the MLIR bindings neither convert to numpy
nor export as a buffer: a bf16 model's closed-over weights were an internal error."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_mlir

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.rewrites.constant_values import read_dense

FORMATS = {"bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
           "f8E5M2": ml_dtypes.float8_e5m2}


def _values(dtype: type) -> np.ndarray:
    special = np.inf if dtype is not ml_dtypes.float8_e4m3fn else 448.0
    return np.array([1.5, -0.0, 3.25, special, np.nan, 1e-2, -2.0, 0.1],
                    np.float32).astype(dtype)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("size", [8, 3000], ids=["decimal", "hex"])
def test_a_dense_constant_reads_back_bit_exact(name: str, size: int) -> None:
    """A small attribute prints as decimals (NaN and inf as bits), a large one as hex."""
    values = np.resize(_values(FORMATS[name]), size)
    bits = f"u{values.itemsize}"
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        if size == 8:
            text = "[[" + ", ".join(f"0x{b:X}" for b in values.view(bits)) + "]]"
            attr = ir.Attribute.parse(f"dense<{text}> : tensor<1x8x{name}>")
            values = values.reshape(1, 8)
        else:
            attr = ir.Attribute.parse(f'dense<"0x{values.tobytes().hex()}"> : '
                                      f"tensor<{size}x{name}>")
        read = read_dense(attr)
    assert read.dtype == values.dtype and read.shape == values.shape
    assert np.array_equal(read.view(bits), values.view(bits))


_W = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32)


def _step(x: jax.Array) -> jax.Array:
    """A bf16 matmul against closed-over bf16 weights, plus FP8-stored weights: both become
    dense constants of those types in the exported program."""
    bf16 = (x.astype(jnp.bfloat16) @ _W.astype(ml_dtypes.bfloat16)).astype(jnp.float32)
    return bf16 + x @ _W.astype(ml_dtypes.float8_e4m3fn).astype(jnp.float32)


@pytest.mark.parametrize("data_dtype, tolerance", [("float32", 1e-6), ("float16", 3e-3)])
def test_a_step_with_low_precision_constants_rewrites(data_dtype: str,
                                                      tolerance: float) -> None:
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    expected = np.asarray(jax.jit(_step)(x))
    step = compile_scaled(_step, x, policy=Policy(data_dtype=data_dtype, fp8_dots=False),
                          return_scaled=False)
    got = np.asarray(step(x))
    assert np.max(np.abs(got - expected)) <= tolerance * np.max(np.abs(expected))
