"""Host-side inputs and outputs of a module's entry function: random inputs, ``.npz`` files,
summaries, and running an original module beside its scaled rewrite to compare outputs.

The CLI's ``run`` and ``compare`` commands are thin shells over these functions.

* ``.npz`` files hold one array per argument (or result), in order, named ``arr_0, arr_1,
  ...`` (what ``np.savez(path, *arrays)`` writes) or ``arg0, arg1, ...``. numpy cannot name
  bf16 or FP8 dtypes in a file: such arrays are stored as raw 2- or 1-byte void values and
  read back by viewing them as the dtype the signature expects.
* Two modules can be compared when their entry signatures are equal, or when one is the
  other's scaled rewrite (``docs/scaled-signature.md``): then inputs are given in the
  original signature, split into (data, scale) pairs for the scaled module, and its outputs
  are joined back (``data * scale``) before the comparison.
"""

from __future__ import annotations

import io
import math
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalify_hlo import module_io
from scalify_hlo.dtypes import DATA_DTYPES, FLOAT_DTYPES, STORAGE_DTYPES
from scalify_hlo.errors import ScalifyError
from scalify_hlo.flat_pairs import flat_positions, flat_size
from scalify_hlo.names import label
from scalify_hlo.scaled_array import check_scale, is_pow2, split_scale
from scalify_hlo.signature import (
    ELEMENT_DTYPES,
    EntrySignature,
    TensorSpec,
    entry_signature,
    join_outputs,
    split_inputs,
)

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_NAME_RE = re.compile(r"^(?:arr_|arg)(\d+)$")


class InputError(ScalifyError):
    """Inputs that do not fit a module's entry signature, or an unreadable ``.npz`` file."""


# ----- modules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedModule:
    """A module ready to run: MLIR text (what XLA compiles) and its entry signature."""

    text: str
    signature: EntrySignature
    name: str


def load_module(source: bytes | str, filename: str = "-") -> LoadedModule:
    """Read MLIR text, bytecode or a portable artifact; raises ScalifyError if invalid."""
    signature = entry_signature(source, filename)
    if isinstance(source, bytes) and source.startswith(module_io.BYTECODE_MAGIC):
        with module_io.ir_context():
            text = module_io.module_to_text(module_io.parse_module(source, filename))
    else:
        text = source.decode("utf-8") if isinstance(source, bytes) else source
    return LoadedModule(text, signature, filename)


def spec_str(spec: TensorSpec) -> str:
    """``tensor<8x4xf32>``, as MLIR writes the type."""
    return "tensor<" + "".join(f"{d}x" for d in spec.shape) + spec.element + ">"


def element_name(dtype: np.dtype) -> str:
    """The MLIR element type name of a numpy dtype (``f32``), or numpy's name."""
    for name, known in ELEMENT_DTYPES.items():
        if known == dtype:
            return name
    return str(dtype)


# ----- inputs -----------------------------------------------------------------------------


def random_inputs(signature: EntrySignature, rng: np.random.Generator) -> list[np.ndarray]:
    """Unit-normal floats and small non-negative integers (valid token ids and counters);
    scale arguments of a scaled module are 1."""
    scales = set(signature.scale_inputs)
    return [
        np.float32(1.0) if index in scales
        else rng.standard_normal(spec.shape).astype(spec.dtype) if spec.element in FLOAT_DTYPES
        else rng.integers(0, 4, spec.shape).astype(spec.dtype)
        for index, spec in enumerate(signature.inputs)
    ]


def read_npz(data: bytes, filename: str) -> list[np.ndarray]:
    """The arrays of an ``.npz`` archive in argument order (``arr_0, ...`` or ``arg0, ...``)."""
    if data.startswith(_NPY_MAGIC):
        raise InputError(f"{filename}: a single .npy array, not an .npz archive "
                         f"(write one with np.savez(path, *arrays))")
    if not data.startswith(_ZIP_MAGIC):
        raise InputError(f"{filename}: not an .npz archive (not a zip file)")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{filename}: corrupt .npz archive: {_one_line(exc)}") from None
    with archive:
        indexed: dict[int, str] = {}
        styles = set()
        for name in archive.files:
            match = _NAME_RE.match(name)
            if match is None:
                raise InputError(f"{filename}: unexpected array '{name}' (name the arrays arr_0, "
                                 f"arr_1, ... or arg0, arg1, ... in argument order)")
            styles.add(name[:3])
            indexed[int(match.group(1))] = name
        if len(styles) > 1:
            raise InputError(f"{filename}: mixes arr_N and argN names; use one or the other")
        for index in range(len(indexed)):
            if index not in indexed:
                missing = ("arr_" if styles == {"arr"} else "arg") + str(index)
                raise InputError(f"{filename}: has {len(indexed)} arrays but no '{missing}'")
        arrays = []
        for index in range(len(indexed)):
            name = indexed[index]
            try:
                arrays.append(archive[name])
            except Exception as exc:  # zipfile, zlib and numpy's format errors all mean corrupt
                raise InputError(f"{filename}: cannot read array '{name}': "
                                 f"{_one_line(exc)}") from None
    return arrays


def check_inputs(signature: EntrySignature, arrays: Sequence[np.ndarray],
                 source: str = "inputs", takes: str = "the entry function",
                 names: Sequence[str | None] = ()) -> list[np.ndarray]:
    """``arrays`` checked against the entry signature: count, shape and exact dtype.

    Raw void arrays of the right size are viewed as bf16 / FP8 (how ``.npz`` stores them).
    ``source`` names the arrays, ``takes`` the function and ``names`` its arguments' paths
    in error messages.
    """
    if len(arrays) != len(signature.inputs):
        raise InputError(f"{source}: {len(arrays)} arrays, but {takes} takes "
                         f"{len(signature.inputs)} arguments")
    checked = []
    for index, (spec, array) in enumerate(zip(signature.inputs, arrays, strict=True)):
        array = np.asarray(array)
        expected = spec.dtype
        if (array.dtype != expected and array.dtype.kind == "V" and expected.kind == "V"
                and array.dtype.names is None and array.dtype.itemsize == expected.itemsize):
            array = array.view(expected)
        if tuple(array.shape) != spec.shape:
            raise InputError(f"{source}: argument {label(index, names)}: shape "
                             f"{tuple(array.shape)}, "
                             f"expected {spec_str(spec)}")
        if array.dtype != expected:
            raise InputError(f"{source}: argument {label(index, names)}: dtype "
                             f"{array.dtype}, expected "
                             f"{spec_str(spec)} ({expected})")
        checked.append(array)
    return split_scales(signature, checked, source)


def split_scales(signature: EntrySignature, arrays: list[np.ndarray],
                 source: str = "inputs") -> list[np.ndarray]:
    """``arrays`` with each scale argument of a scaled module (``signature.scale_inputs``)
    checked and made a power of two, as ``compile_scaled`` does: the module reads a scale's
    exponent only. Any finite positive scale is split into a power of two and a factor
    multiplied into the data before it (in f64, rounded once to the data's dtype); 0,
    negative, infinite and NaN scales are refused."""
    arrays = list(arrays)
    for index in signature.scale_inputs:
        value = check_scale(arrays[index], f"{source}: argument {index} (the scale of "
                                           f"argument {index - 1})")
        if is_pow2(value):
            continue
        pow2, factor = split_scale(value)
        data = arrays[index - 1]
        arrays[index - 1] = (data.astype(np.float64) * factor).astype(data.dtype)
        arrays[index] = np.asarray(pow2, np.float32)
    return arrays


def load_inputs(data: bytes, filename: str, signature: EntrySignature,
                takes: str = "the entry function",
                names: Sequence[str | None] = ()) -> list[np.ndarray]:
    """Read an ``.npz`` file's bytes and check its arrays against ``signature``."""
    return check_inputs(signature, read_npz(data, filename), filename, takes, names)


def npz_bytes(arrays: Sequence[np.ndarray]) -> bytes:
    """An ``.npz`` archive of ``arrays`` named ``arr_0, arr_1, ...``."""
    buffer = io.BytesIO()
    np.savez(buffer, *[np.asarray(a) for a in arrays])
    return buffer.getvalue()


def summarize(array: np.ndarray) -> str:
    """``tensor<8x4xf32> min -1.2 max 3.4 mean 0.05 nan 0 inf 0`` (min/max/mean of finite
    values; ``-`` when there are none)."""
    array = np.asarray(array)
    values = array.astype(np.float64)
    finite = values[np.isfinite(values)]
    spec = spec_str(TensorSpec(tuple(array.shape), element_name(array.dtype)))
    if finite.size:
        stats = f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}"
    else:
        stats = "min -  max -  mean -"
    return (f"{spec}  {stats}  nan {int(np.isnan(values).sum())}  "
            f"inf {int(np.isinf(values).sum())}")


# ----- original vs scaled -----------------------------------------------------------------


def _scaled_match(specs: tuple[TensorSpec, ...],
                  flat: tuple[TensorSpec, ...]) -> list[str | None] | None:
    """Per spec, the data dtype of its (data, scale) pair in ``flat`` (None: unscaled), or
    None when ``flat`` is not ``specs`` in the scaled convention."""
    if flat_size(spec.is_scaled for spec in specs) != len(flat):
        return None
    dtypes: list[str | None] = []
    for spec, position in zip(specs, flat_positions(s.is_scaled for s in specs), strict=True):
        if spec.is_scaled:
            data, scale = flat[position], flat[position + 1]
            if (data.shape != spec.shape or data.element not in STORAGE_DTYPES
                    or scale != TensorSpec((), "f32")):
                return None
            dtypes.append(data.element)
        else:
            if flat[position] != spec:
                return None
            dtypes.append(None)
    return dtypes


def scaled_data_dtypes(original: EntrySignature,
                       candidate: EntrySignature) -> tuple[str | None, ...] | None:
    """Per input of ``original``, the data dtype ``candidate`` takes it in (None for unscaled
    inputs), if ``candidate`` is the scaled form of ``original``; else None. Data dtypes may
    differ between inputs (f32 for Adam's second moment next to f16 elsewhere)."""
    if candidate == original:
        return None
    inputs = _scaled_match(original.inputs, candidate.inputs)
    results = _scaled_match(original.results, candidate.results)
    if inputs is None or results is None:
        return None
    return tuple(inputs)


def scaled_data_dtype(original: EntrySignature, candidate: EntrySignature) -> str | None:
    """The data dtype(s) if ``candidate`` is the scaled form of ``original`` (``f16``, or
    ``f16+f32`` when they differ), else None."""
    dtypes = scaled_data_dtypes(original, candidate)
    if dtypes is None:
        return None
    distinct = sorted({d for d in dtypes if d is not None}) or [DATA_DTYPES[0]]
    return "+".join(distinct)


@dataclass(frozen=True)
class Pairing:
    """How two modules' signatures relate: equal, or one the scaled rewrite of the other.

    ``original`` is the signature inputs are given in; ``scaled`` is 0 or 1 for the module
    that takes (data, scale) pairs (None when both signatures are equal).
    """

    original: EntrySignature
    scaled: int | None = None
    data_dtype: str | None = None
    input_data_dtypes: tuple[str | None, ...] = ()
    # Per original input and result: whether the scaled module takes or returns it as a
    # signed square root (``sqrt`` encoding, docs/scaled-signature.md).
    encoded_inputs: tuple[bool, ...] = ()
    encoded_results: tuple[bool, ...] = ()


def pair_signatures(a: LoadedModule, b: LoadedModule) -> Pairing:
    """Relate two modules' entry signatures; raises InputError when they cannot be compared."""
    if a.signature == b.signature:
        return Pairing(a.signature)
    for original, scaled, side in ((a.signature, b.signature, 1), (b.signature, a.signature, 0)):
        dtypes = scaled_data_dtypes(original, scaled)
        if dtypes is not None:
            encoded_inputs, encoded_results = scaled.original_encodings(original)
            return Pairing(original, side, scaled_data_dtype(original, scaled), dtypes,
                           encoded_inputs, encoded_results)
    raise InputError(f"incompatible entry signatures: {_first_difference(a, b)}; neither "
                     f"module is the other or its scaled rewrite")


def _first_difference(a: LoadedModule, b: LoadedModule) -> str:
    for kind, left, right in (("argument", a.signature.inputs, b.signature.inputs),
                              ("result", a.signature.results, b.signature.results)):
        if len(left) != len(right):
            return f"{a.name} has {len(left)} {kind}s, {b.name} {len(right)}"
        for index, (x, y) in enumerate(zip(left, right, strict=True)):
            if x != y:
                return f"{kind} {index} is {spec_str(x)} in {a.name}, {spec_str(y)} in {b.name}"
    return "they differ"  # not reached: equal signatures pair


def original_name(pairing: Pairing, names: tuple[str, str]) -> str:
    """The module whose signature the inputs are given in (the unscaled one)."""
    return names[1 - pairing.scaled] if pairing.scaled is not None else names[0]


def describe_pairing(pairing: Pairing, names: tuple[str, str]) -> str:
    if pairing.scaled is None:
        return "same entry signature"
    scaled, original = names[pairing.scaled], names[1 - pairing.scaled]
    return f"{scaled} is the scaled rewrite of {original} ({pairing.data_dtype} data)"


def split_for(pairing: Pairing, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``inputs`` (in ``pairing.original``'s signature) as the scaled module takes them:
    (data, scale) pairs in each input's data dtype, scales from the RMS."""
    dtypes = [ELEMENT_DTYPES[d] if d is not None else None for d in pairing.input_data_dtypes]
    return split_inputs(pairing.original, inputs, data_dtype=dtypes,
                        encoded=pairing.encoded_inputs)


def run_pair(pairing: Pairing, modules: tuple[LoadedModule, LoadedModule],
             inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run both modules on ``inputs`` (in ``pairing.original``'s signature); the scaled one
    gets them split into (data, scale) with power-of-two scales from the RMS, and its outputs
    come back joined. Returns both output lists in the original signature."""
    from scalify_hlo.runner import run_module  # imports jax's runtime; only when running

    outputs = []
    for side, module in enumerate(modules):
        if side == pairing.scaled:
            raw = run_module(module.text, split_for(pairing, inputs))
            outputs.append(join_outputs(pairing.original, raw, pairing.encoded_results))
        else:
            outputs.append(run_module(module.text, list(inputs)))
    return outputs[0], outputs[1]


# ----- comparing outputs ------------------------------------------------------------------


@dataclass(frozen=True)
class OutputDiff:
    """How far an output is from the reference one.

    * ``max_abs``: max |a - b| over the positions where both are finite;
    * ``max_rel``: ``max_abs / max |a|`` (a: the reference; finite values), the error relative
      to the tensor's largest magnitude; 0 when both are all zero, inf when only a is;
    * ``max_elem_rel``: max |a - b| / |a| over the positions where a != 0 (informational:
      large where a cancels to nearly zero);
    * ``snr_db``: 10 log10(sum a^2 / sum (a - b)^2), inf when equal;
    * ``nonfinite_mismatch``: positions where NaN or +-Inf in one is not the same in the other.
    """

    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    max_elem_rel: float
    snr_db: float
    nonfinite_mismatch: int


def compare_arrays(reference: np.ndarray, other: np.ndarray) -> OutputDiff:
    a = np.asarray(reference).astype(np.float64)
    b = np.asarray(other).astype(np.float64)
    if a.shape != b.shape:
        raise InputError(f"output shapes differ: {a.shape} and {b.shape}")
    both = np.isfinite(a) & np.isfinite(b)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf_differs = (np.isinf(a) | np.isinf(b)) & ~nan_a & ~nan_b & (a != b)
    mismatch = int(((nan_a != nan_b) | inf_differs).sum())
    fa, fb = a[both], b[both]
    diff = np.abs(fa - fb)
    max_abs = float(diff.max()) if diff.size else 0.0
    finite_a = a[np.isfinite(a)]
    scale = float(np.abs(finite_a).max()) if finite_a.size else 0.0
    max_rel = max_abs / scale if scale else (0.0 if max_abs == 0 else math.inf)
    nonzero = fa != 0
    max_elem_rel = float((diff[nonzero] / np.abs(fa[nonzero])).max()) if nonzero.any() else 0.0
    noise = float(np.sum(diff * diff))
    signal = float(np.sum(fa * fa))
    if noise == 0:
        snr = math.inf
    elif signal == 0:
        snr = -math.inf
    else:
        snr = 10.0 * math.log10(signal / noise)
    return OutputDiff(tuple(a.shape), max_abs, max_rel, max_elem_rel, snr, mismatch)


def compare_outputs(reference: Sequence[np.ndarray],
                    other: Sequence[np.ndarray]) -> list[OutputDiff]:
    if len(reference) != len(other):
        raise InputError(f"{len(reference)} outputs against {len(other)}")
    return [compare_arrays(a, b) for a, b in zip(reference, other, strict=True)]


def diff_table(diffs: Sequence[OutputDiff], names: Sequence[str | None] = ()) -> str:
    """One row per output: index, path (a ``name`` column when the module names its
    results), shape, max abs / rel / elementwise rel error, SNR."""
    named = any(names)
    rows = [("output", *(("name",) if named else ()), "shape", "max abs err", "max rel err",
             "max elem rel", "SNR dB", "NaN/Inf diff")]
    for index, d in enumerate(diffs):
        name = (names[index] if index < len(names) else None) or "-"
        rows.append((str(index), *((name,) if named else ()), str(d.shape), f"{d.max_abs:.3g}",
                     f"{d.max_rel:.3g}", f"{d.max_elem_rel:.3g}", f"{d.snr_db:.1f}",
                     str(d.nonfinite_mismatch)))
    left = 3 if named else 2  # left-aligned columns: output, name, shape
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i < left else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
                     .rstrip() for row in rows)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
