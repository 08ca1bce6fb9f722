"""``ScaledArray``: a JAX pytree of ``(data, scale)`` with ``value = data * scale``.

Training state (weights, optimizer moments) stays a ``ScaledArray`` from one step to the
next, so FP16 data with a power-of-two scale is what lives in memory between steps.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# An all-zero tensor's scale with f16 data: the smallest normal f32 power of two, so that a
# zero-initialized moment never dominates a common (max) scale; its data is 0 at any scale.
# f32/bf16 data take the first operand's scale instead (scalify's common-scale=auto), where a
# zero tensor is better at scale 1 so that what is added to it stays near unit scale.
ZERO_SCALE = 2.0 ** -126


def zero_tensor_scale(dtype: Any) -> float:
    return ZERO_SCALE if jnp.dtype(dtype) == jnp.dtype(jnp.float16) else 1.0


@jax.jit
def _unstack(vector: jax.Array) -> tuple[jax.Array, ...]:
    return tuple(vector[i] for i in range(vector.shape[0]))


class ScaleBank:
    """The scales of one step's outputs as one f32 vector.

    Its elements are read when one is first asked for, all at once (one dispatch, not one
    per scale); a step fed ScaledArrays of a bank takes the vector itself.
    """

    __slots__ = ("vector", "_elements")

    def __init__(self, vector: jax.Array) -> None:
        self.vector = vector
        self._elements: tuple[jax.Array, ...] | None = None

    def element(self, index: int) -> jax.Array:
        if self._elements is None:
            self._elements = _unstack(self.vector)
        return self._elements[index]


@jax.tree_util.register_pytree_node_class
class ScaledArray:
    """``data * scale``: data in a low-precision dtype, scale a rank-0 f32 power of two.

    A step compiled by ``compile_scaled`` returns all its scales in one ``ScaleBank`` (one
    buffer per call instead of one per scale): its ``ScaledArray`` outputs hold the bank and
    their index in it, and ``scale`` reads the element when first asked for. Feeding such
    outputs back to the step passes the bank's vector, not the elements.
    """

    __slots__ = ("data", "_scale", "_bank", "_index")

    def __init__(self, data: Any, scale: Any) -> None:
        self.data = data
        self._scale = scale
        self._bank: Any = None
        self._index = -1

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

    def tree_flatten(self) -> tuple[tuple[Any, Any], None]:
        return (self.data, self.scale), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple[Any, Any]) -> ScaledArray:
        return cls(*children)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.data))

    @property
    def dtype(self) -> np.dtype:
        return jnp.asarray(self.data).dtype if not hasattr(self.data, "dtype") else self.data.dtype

    def unscale(self, dtype: Any = jnp.float32) -> jax.Array:
        """The represented value, computed in f32 and cast to ``dtype``."""
        value = jnp.asarray(self.data, jnp.float32) * jnp.asarray(self.scale, jnp.float32)
        return value.astype(dtype)

    def __repr__(self) -> str:
        return f"ScaledArray(data={self.data!r}, scale={self.scale!r})"


_new_scaled = object.__new__


def banked(data: Any, bank: ScaleBank, index: int) -> ScaledArray:
    """``ScaledArray.in_bank`` without the classmethod call: a step makes one per scaled
    output on every call."""
    value = _new_scaled(ScaledArray)
    value.data, value._scale, value._bank, value._index = data, None, bank, index
    return value


def pow2_scale(x: Any, dtype: Any = jnp.float16) -> jax.Array:
    """A power of two near the RMS of the finite values of ``x`` (traceable, so it can run
    inside ``jit``); ``zero_tensor_scale(dtype)`` for an all-zero tensor, 1 when nothing is
    finite."""
    x = jnp.asarray(x, jnp.float32)
    finite = jnp.isfinite(x)
    values = jnp.where(finite, x, 0.0)
    count = jnp.maximum(jnp.sum(finite), 1)
    rms = jnp.sqrt(jnp.sum(values * values) / count)
    exponent = jnp.clip(jnp.round(jnp.log2(jnp.where(rms > 0, rms, 1.0))), -126, 127)
    # ldexp, not exp2: XLA's exp2 is not exact at most integer exponents.
    scale = jnp.ldexp(jnp.float32(1.0), exponent.astype(jnp.int32))
    all_zero = jnp.logical_and(jnp.any(finite), jnp.all(values == 0))
    return jnp.where(all_zero, jnp.float32(zero_tensor_scale(dtype)),
                     jnp.where(rms > 0, scale, 1.0))


def as_scaled(x: Any, dtype: Any = jnp.float16) -> ScaledArray:
    """Split ``x`` into data of ``dtype`` and a power-of-two scale from its RMS."""
    if isinstance(x, ScaledArray):
        return ScaledArray(jnp.asarray(x.data).astype(dtype), jnp.asarray(x.scale, jnp.float32))
    scale = pow2_scale(x, dtype)
    data = (jnp.asarray(x, jnp.float32) / scale).astype(dtype)
    return ScaledArray(data, scale)


def is_scalable(x: Any) -> bool:
    """Floating leaves that the scaled convention splits (f16, bf16, f32)."""
    if isinstance(x, ScaledArray):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.dtype(dtype) in (
        jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32))


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
