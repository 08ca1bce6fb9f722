"""Running one module in its original signature: what ``scalify-hlo run`` does with a scaled
rewrite, and the random inputs that ``run`` and ``compare`` draw.

A scaled rewrite (``scalify.original_type`` on its entry function, checked against its
signature by the same pattern ``compare`` pairs two modules by) takes inputs in the original
signature: they are split into (data, power-of-two scale) pairs, scales from the RMS, and the
outputs are joined back (``data * scale``) in the original dtypes. Random inputs hold squares
(``module_info.ModuleInfo.square_inputs``) as ``|x|``: Adam's second moment must not be
negative, or ``sqrt(nu)`` is NaN in the original program too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalify_hlo.flat_pairs import flat_positions as pair_positions
from scalify_hlo.inputs import (
    InputError,
    LoadedModule,
    Pairing,
    check_inputs,
    random_inputs,
    read_npz,
    scaled_data_dtype,
    scaled_data_dtypes,
)
from scalify_hlo.module_info import ModuleInfo, is_square_name
from scalify_hlo.names import whole_name
from scalify_hlo.signature import EntrySignature, TensorSpec


def pair_module(module: LoadedModule, info: ModuleInfo) -> Pairing | None:
    """The module as the scaled rewrite of its recorded original signature, or None for a
    plain module (no ``scalify.original_type``, or nothing was split)."""
    if info.original is None:
        return None
    if info.delayed:
        raise InputError(f"{module.name}: it returns the exponents of {info.delayed} delayed "
                         "statistics (scalify.delayed_exponents, the scalify pass's "
                         "delayed-statistics option, auto for a partitioned module), which the "
                         "next call takes: run the step through compile_scaled, which carries "
                         "them from one call to the next, or rewrite it with "
                         "delayed-statistics=none")
    dtypes = scaled_data_dtypes(info.original, module.signature)
    if dtypes is None:
        if info.original != module.signature:
            raise InputError(f"{module.name}: its entry signature is not the scaled form of "
                             f"the original one it records (scalify.original_type)")
        return None
    encoded_inputs, encoded_results = module.signature.original_encodings(info.original)
    return Pairing(info.original, 0, scaled_data_dtype(info.original, module.signature), dtypes,
                   encoded_inputs, encoded_results)


def flat_positions(specs: Sequence[TensorSpec]) -> list[int]:
    """Per original value, the position of its (data) value in the scaled signature."""
    return pair_positions(spec.is_scaled for spec in specs)


def collapse_names(specs: Sequence[TensorSpec],
                   flat_names: Sequence[str | None]) -> tuple[str | None, ...]:
    """The original values' names from a scaled module's (``p['w'].data`` -> ``p['w']``)."""
    return tuple(whole_name(flat_names[p]) if p < len(flat_names) else None
                 for p in flat_positions(specs))


def original_names(pairing: Pairing | None,
                   info: ModuleInfo) -> tuple[tuple[str | None, ...], tuple[str | None, ...]]:
    """Input and result names in the signature inputs are given in."""
    if pairing is None or pairing.scaled is None:
        return info.input_names, info.result_names
    return (collapse_names(pairing.original.inputs, info.input_names),
            collapse_names(pairing.original.results, info.result_names))


def original_squares(pairing: Pairing | None, info: ModuleInfo,
                     names: Sequence[str | None]) -> frozenset[int]:
    """The original inputs that hold squares: found in the module (its data half, for a
    scaled module), or named so."""
    if pairing is None or pairing.scaled is None:
        found = info.square_inputs
    else:
        found = frozenset(i for i, p in enumerate(flat_positions(pairing.original.inputs))
                          if p in info.square_inputs)
    return found | {i for i, name in enumerate(names) if is_square_name(name)}


def random_step_inputs(signature: EntrySignature, rng: np.random.Generator,
                       squares: frozenset[int] = frozenset()) -> list[np.ndarray]:
    """``random_inputs``, with ``|x|`` for the inputs in ``squares``."""
    arrays = random_inputs(signature, rng)
    return [np.abs(x) if i in squares else x for i, x in enumerate(arrays)]


def load_run_inputs(data: bytes, filename: str, module: LoadedModule, pairing: Pairing | None,
                    names: Sequence[str | None],
                    flat_names: Sequence[str | None]) -> tuple[list[np.ndarray], bool]:
    """An ``.npz`` file's arrays for ``module``: in the original signature (True) or, for a
    scaled module, already as (data, scale) pairs (False)."""
    arrays = read_npz(data, filename)
    if pairing is None:
        return check_inputs(module.signature, arrays, filename, module.name, names), True
    if len(arrays) == len(module.signature.inputs):
        return check_inputs(module.signature, arrays, filename, module.name, flat_names), False
    if len(arrays) != len(pairing.original.inputs):
        raise InputError(f"{filename}: {len(arrays)} arrays, but {module.name} takes "
                         f"{len(pairing.original.inputs)} arguments in the original signature "
                         f"(or {len(module.signature.inputs)} as (data, scale) pairs)")
    return check_inputs(pairing.original, arrays, filename,
                        f"{module.name}'s original signature", names), True


def joined_in_original_dtypes(signature: EntrySignature,
                              joined: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``join_outputs``'s f32 values in the original results' dtypes."""
    return [np.asarray(x).astype(spec.dtype, copy=False)
            for x, spec in zip(joined, signature.results, strict=True)]


def new_nonfinite(inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> list[int]:
    """The outputs with NaN or Inf when no input has any (none when an input does)."""
    if any(_has_nonfinite(x) for x in inputs):
        return []
    return [index for index, x in enumerate(outputs) if _has_nonfinite(x)]


def _has_nonfinite(x: np.ndarray) -> bool:
    x = np.asarray(x)
    if x.dtype.kind not in "fcV":
        return False
    return not bool(np.isfinite(x.astype(np.float64)).all())

