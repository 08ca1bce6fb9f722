"""Argument values as a ``ScaledStep`` takes them: host values made arrays, ScaledArrays
with checked power-of-two scales, PRNG keys and scale types checked, arrays committed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scalify_hlo.errors import ScalifyError
from scalify_hlo.leaf_specs import LeafSpec, is_key, is_scaled_dtype
from scalify_hlo.scaled_array import (
    ScaledArray,
    as_scaled,
    check_scale,
    is_known_pow2,
    is_pow2,
    scale_type_error,
    split_pow2,
)

# Host values that jax.jit takes where the step takes an array, converting them itself.
HOST_TYPES = (bool, int, float, complex, np.generic, np.ndarray)

# Where an argument's scale comes from (ScaledStep._flatten): a plain array, a ScaledArray
# with a power-of-two scale of its own, one with another scale (split in the program), or
# ``bank * BANK_STRIDE + index`` (element ``index`` of the call's bank ``bank``).
PLAIN, OWN, SPLIT, BANK_STRIDE = -1, -2, -3, 1 << 20


def is_host_value(value: Any) -> bool:
    return isinstance(value, HOST_TYPES)


def as_jax_value(leaf: Any) -> Any:
    """A Python or numpy scalar or array (Flax's ``TrainState.create`` sets ``step=0``), also
    as a ScaledArray's data, as ``jax.jit`` takes it: ``jnp.asarray``, whose dtype is the
    one the step was compiled for from such a value (int32, float32 without x64)."""
    if isinstance(leaf, ScaledArray):
        return ScaledArray(as_jax_value(leaf.data), leaf.scale) if is_host_value(
            leaf.data) else leaf
    return jnp.asarray(leaf) if is_host_value(leaf) else leaf


def scaled_arg(leaf: Any, dtype: Any, name: str, encoding: str = "") -> ScaledArray:
    """``leaf`` as ``scale_args`` hands it out: data of ``dtype`` and a power-of-two scale,
    in the argument's ``encoding``. A ScaledArray's scale is read and checked (once:
    scale_args starts a loop), and one that is not a power of two is split (``split_pow2``,
    as a call would split it)."""
    if isinstance(leaf, ScaledArray) and not is_known_pow2(scale := leaf.scale):
        if isinstance(scale, jax.core.Tracer):  # scale_args inside jax.jit
            check_scale_type(name, scale)
            leaf = _with_encoding(split_pow2(leaf.data, scale, dtype), leaf.encoding)
        else:
            value = check_scale(np.asarray(scale), name)
            if not is_pow2(value):
                leaf = _with_encoding(split_pow2(leaf.data, value, dtype), leaf.encoding)
    return as_scaled(leaf, dtype, encoding)


def _with_encoding(value: ScaledArray, encoding: str) -> ScaledArray:
    return ScaledArray(value.data, value.scale, encoding)


def check_scale_type(name: str, scale: Any) -> None:
    """A ScaledArray argument's scale is a real scalar (checked when the step is traced)."""
    error = scale_type_error(tuple(np.shape(scale)), getattr(scale, "dtype", np.float32))
    if error is not None:
        raise ScalifyError(f"{name}: {error}")


def check_key(name: str, value: Any, spec: LeafSpec) -> None:
    """A PRNG key argument against the compiled step's: a key array of the same
    implementation and shape where the step took one, and nowhere else."""
    if spec.key_impl is None:
        raise ScalifyError(f"{name}: a PRNG key array where the step takes {spec.dtype}")
    if not is_key(value):
        raise ScalifyError(f"{name}: the step takes a PRNG key array ({spec.key_impl}), got "
                           f"{getattr(value, 'dtype', type(value).__name__)}")
    impl, shape = str(jax.random.key_impl(value)), tuple(np.shape(value))
    if impl != spec.key_impl or shape != spec.shape:
        raise ScalifyError(f"{name}: a {impl} key array of shape {shape} where the step takes "
                           f"{spec.key_impl} keys of shape {spec.shape}")


def committed_value(value: Any) -> Any:
    """``value`` committed to the device it is on. A step's outputs are committed arrays, and
    ``jax.jit`` compiles again when an argument's commitment changes: ``scale_args`` hands
    out committed arrays so that the first call and a loop feeding outputs back run one
    program (it compiled twice)."""
    if isinstance(value, jax.Array) and not value.committed:
        return jax.device_put(value, value.sharding)
    return value


def bank_number(banks: list[Any], bank: Any) -> int:
    """``bank``'s position in ``banks`` (by identity), appended if new."""
    for number, known in enumerate(banks):
        if known is bank:
            return number
    banks.append(bank)
    return len(banks) - 1


def check_leaves(flat: list[Any], layout: tuple[int, ...],
                 in_specs: list[LeafSpec]) -> None:
    """Shapes and dtypes of a call's leaves against the compiled step's (``layout``: where
    each one's scale comes from, see ``ScaledStep._flatten``): run when ``jax.jit`` traces
    the step, i.e. once per layout, shapes and dtypes (the check costs more than a small
    step's dispatch)."""
    for leaf, code, spec in zip(flat, layout[:len(flat)], in_specs, strict=True):
        name = f"args{spec.path}"
        source = leaf[0] if code in (OWN, SPLIT) else leaf
        if spec.key_impl is not None or is_key(source):
            check_key(name, source, spec)
            continue
        if isinstance(source, (dict, list, tuple)) or not hasattr(source, "shape"):
            raise ScalifyError(f"{name}: a {type(source).__name__} where the step takes "
                               "an array")
        shape = tuple(np.shape(source))
        if shape != spec.shape:
            raise ScalifyError(f"{name}: shape {shape} does not match the compiled step's "
                               f"{spec.shape}")
        dtype = np.dtype(source.dtype)
        if code != PLAIN:
            if not spec.scaled:
                raise ScalifyError(f"{name}: a ScaledArray where the step takes "
                                   f"{spec.dtype}")
            if code in (OWN, SPLIT):
                check_scale_type(name, leaf[1])
        elif spec.scaled != is_scaled_dtype(dtype) or (not spec.scaled and
                                                         dtype != spec.dtype):
            raise ScalifyError(f"{name}: dtype {dtype} does not match the compiled step's "
                               f"{spec.dtype}")
