"""The leaves of a step's argument and result pytrees as the scaled calling convention sees
them: one ``LeafSpec`` per flat leaf, and where each one's (data, scale) pair and bank slot
sit in the rewritten module's flat signature.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.dtypes import DATA_NUMPY_DTYPES
from scalify_hlo.errors import ScalifyError
from scalify_hlo.flat_pairs import flat_positions
from scalify_hlo.scaled_array import ScaledArray, is_scaled_leaf
from scalify_hlo.symbols import entry_function


def is_scaled_dtype(dtype: Any) -> bool:
    return jnp.dtype(dtype) in DATA_NUMPY_DTYPES


def is_key(value: Any) -> bool:
    """A typed PRNG key array (``jax.random.key``): it crosses the exported module as its
    uint32 key data and is wrapped again on the other side."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """One flat argument or result of the original function."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    key_impl: str | None = None  # a PRNG key array's implementation; dtype is its data's
    # How the step stores it: "" (data * scale) or "sqrt" (a square, by its signed square
    # root: Adam's second moment under the default policy; docs/scaled-signature.md).
    encoding: str = ""

    @property
    def scaled(self) -> bool:
        return is_scaled_dtype(self.dtype)


def specs_of_tree(tree: Any) -> tuple[list[LeafSpec], Any]:
    with_path, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_scaled_leaf)
    specs = []
    for path, leaf in with_path:
        if isinstance(leaf, ScaledArray):
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf.data)),
                                  np.dtype(np.float32)))
        elif is_key(leaf):
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf)),
                                  np.dtype(np.uint32), str(jax.random.key_impl(leaf))))
        else:  # the dtype jax.jit gives the leaf (a numpy float64 is float32 without x64)
            dtype = _array_dtype(leaf, f"args{jax.tree_util.keystr(path)}")
            specs.append(LeafSpec(jax.tree_util.keystr(path), tuple(np.shape(leaf)),
                                  np.dtype(jax.dtypes.canonicalize_dtype(dtype))))
    return specs, treedef


def _array_dtype(leaf: Any, name: str) -> np.dtype:
    """The dtype of an argument leaf, or a one-line error naming its path where jax cannot
    make an array of it (a string, an arbitrary object: JAX's own error is a long TypeError
    that names neither the argument nor what to do)."""
    try:
        dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else jnp.asarray(leaf).dtype)
    except (TypeError, ValueError):
        dtype = None
    # ml_dtypes' types (bfloat16, the FP8 formats) are numpy kind "V" too: only a void
    # that is not one of them (a record) is refused.
    if dtype is None or dtype.kind in "OSU" or (
            dtype.kind == "V" and not jnp.issubdtype(dtype, jnp.number)):
        raise ScalifyError(f"{name}: a {type(leaf).__name__} is not an array; compile_scaled "
                           "takes arrays, ScaledArrays and numbers as arguments (make other "
                           "values static: close over them or use functools.partial)")
    return dtype


def example_of(leaf: Any, spec: LeafSpec) -> jax.ShapeDtypeStruct:
    if spec.key_impl is not None:
        data = jax.random.key_data(leaf)
        return jax.ShapeDtypeStruct(data.shape, data.dtype)
    source = leaf.data if isinstance(leaf, ScaledArray) else leaf
    # A committed array's sharding, as jax.jit keeps it; an uncommitted one (made by
    # jnp.asarray, on the default device) goes where the step's other arguments are, as
    # under jax.jit: given its device, parameters beside a batch sharded over 4 devices were
    # refused ("incompatible devices").
    sharding = (source.sharding if isinstance(source, jax.Array)
                and getattr(source, "committed", True) else None)
    return jax.ShapeDtypeStruct(spec.shape, spec.dtype, sharding=sharding,
                                weak_type=_weakly_typed(leaf))


def _weakly_typed(leaf: Any) -> bool:
    """Whether ``jax.jit`` traces ``leaf`` weakly typed (a Python int, float or complex, an
    array made from one, a ``ShapeDtypeStruct`` that says so): a learning rate given as
    ``0.1`` must not promote a bfloat16 update to float32, which it did when the step was
    exported at a strong float32."""
    return type(leaf) in (int, float, complex) or bool(getattr(leaf, "weak_type", False))


def spec_positions(specs: list[LeafSpec]) -> list[int]:
    """Per leaf, the position of its value (or data) in the flat scaled signature."""
    return flat_positions(spec.scaled for spec in specs)


def with_encodings(specs: list[LeafSpec], sqrt_indices: tuple[int, ...]) -> list[LeafSpec]:
    """``specs`` with the encoding of each one whose data (at its flat position in the
    scaled signature) is listed in ``sqrt_indices``."""
    encoded = set(sqrt_indices)
    return [dataclasses.replace(spec, encoding="sqrt") if position in encoded else spec
            for spec, position in zip(specs, spec_positions(specs), strict=True)]


def first_same_scale(module: ir.Module, out_specs: list[LeafSpec]) -> list[int]:
    """Per scaled output of the rewritten module, the index (among scaled outputs) of the
    first one that returns the same SSA value as its scale."""
    firsts: list[int] = []
    block = entry_function(module).regions[0].blocks[0]
    returned = list(block.operations[len(block.operations) - 1].operands)
    first_of: dict[ir.Value, int] = {}  # values hash and compare by identity
    for spec, position in zip(out_specs, spec_positions(out_specs), strict=True):
        if spec.scaled:
            firsts.append(first_of.setdefault(returned[position + 1], len(firsts)))
    return firsts


def arg_bank_slots(in_specs: list[LeafSpec], out_specs: list[LeafSpec],
               out_tree: Any) -> list[int | None]:
    """Per argument, the index of its scale in a bank made by ``scale_args`` (None where it
    has no scale): the index of the output at the same path with the same shape, if any, so
    that a step's state sits where the step's outputs put it; else after all outputs."""
    out_paths = [jax.tree_util.keystr(path) for path, _ in
                 jax.tree_util.tree_flatten_with_path(
                     jax.tree.unflatten(out_tree, range(len(out_specs))))[0]]
    out_index: dict[tuple[str, tuple[int, ...]], int] = {}
    position = 0
    for path, spec in zip(out_paths, out_specs, strict=True):
        if spec.scaled:
            out_index[(path, spec.shape)] = position
            position += 1
    slots: list[int | None] = []
    taken: set[int] = set()
    for spec in in_specs:
        slot = out_index.get((spec.path, spec.shape)) if spec.scaled else None
        if spec.scaled and (slot is None or slot in taken):
            slot = position
            position += 1
        if slot is not None:
            taken.add(slot)
        slots.append(slot)
    return slots


def leaf_data_dtypes(avals: tuple[Any, ...], specs: list[LeafSpec]) -> list[Any]:
    return [avals[position].dtype if spec.scaled else None
            for spec, position in zip(specs, spec_positions(specs), strict=True)]
