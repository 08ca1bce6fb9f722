"""An independent numpy + ml_dtypes interpreter for scaled (FP8) StableHLO modules.

Why: the ``fp8-dots`` and ``scalify`` passes claim that a rewritten module computes a precise,
predictable function of its inputs: clamp, round-to-nearest-even into FP8, an exact FP8 x FP8
product summed in f32, and f16 elementwise arithmetic around it. Running the module on XLA:CPU
only shows what XLA does; this interpreter states what the ops *should* do, written from the
StableHLO op semantics with numpy and ml_dtypes and sharing no numerics with XLA or with the
rewrite passes. The MLIR bindings are used only to parse the module and read attributes.

Numerics, written from the StableHLO semantics and checked against XLA:CPU by
``tests/test_fp8_emulation.py``:

* Elementwise ops run in the op's element type. For f16, numpy evaluates ``+ - * /`` by
  rounding the exact f32 result to f16; f32 carries at least ``2 * 11 + 2`` significand bits,
  so that double rounding equals one correctly rounded f16 operation, which is also what
  XLA:CPU computes (LLVM promotes half arithmetic to float and truncates after each op),
  except that inside a fusion it may keep a product in f32 and round ``a * b + c`` once
  (one ulp apart; judged like the ops below).
* ``convert`` goes through ml_dtypes: round to nearest even, NaN (E4M3FN) or inf (E5M2) on
  overflow; that is why the pass clamps first.
* ``dot_general`` forms every product in f64 (exact for FP8, f16 and bf16 operands), sums in
  f64 and rounds to the result type once. For FP8 operands that is also XLA's f32 result
  whenever every partial sum is exact in f32, in any order: the products of one output are
  multiples of their smallest power-of-two quantum ``u``, and their absolute sum stays within
  ``2^24 u``. Each dot records whether that holds for all its outputs (``DotRecord``), so a
  test can tell "identical because order cannot matter" from "identical on these inputs".
* ``reduce`` folds the reduced elements in index order, rounding to the element type after
  each step (numpy's ``np.add.reduce`` is pairwise and accumulates f16 in f32, so it is not
  used). StableHLO leaves the order of a reduction to the implementation, and XLA:CPU does
  use another (it marks reductions ``reassoc`` and LLVM vectorizes them).
* Transcendental ops (``exponential``, ``log``, ...) are computed by numpy in their element
  type; XLA uses its own approximations, which may differ by an ulp or two.

For these (and for dots, whose f32 accumulation order is XLA's too),
:func:`implementation_defined_positions` lists the ops, :func:`with_probes`
makes XLA return their results, and ``Fp8Emulator.run(..., overrides=...)`` continues from
XLA's values after judging them against its own (``judge_replacement``), so that everything
else is compared bit for bit.

Unsupported ops raise ``UnsupportedOpError`` naming the op and its location.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from jax.extend.mlir import ir

from scalify_hlo import module_io
from scalify_hlo.rewrites.constant_values import read_dense
from scalify_hlo.signature import ELEMENT_DTYPES
from scalify_hlo.symbols import entry_function

DTYPES: dict[str, np.dtype] = ELEMENT_DTYPES

# Types numpy has no arithmetic for: computed in f32 and rounded once (exact for bf16 + - *).
_VIA_F32 = {"bf16", "f8E4M3FN", "f8E5M2"}

TRANSCENDENTAL_OPS = frozenset({
    "stablehlo.exponential", "stablehlo.log", "stablehlo.tanh", "stablehlo.logistic",
    "stablehlo.log_plus_one", "stablehlo.exponential_minus_one", "stablehlo.sine",
    "stablehlo.cosine", "stablehlo.power", "stablehlo.rsqrt", "stablehlo.sqrt",
    "stablehlo.cbrt", "stablehlo.atan2",
})


class UnsupportedOpError(NotImplementedError):
    """The module contains an op (or an op form) that this emulator does not implement."""


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "stablehlo.negate": np.negative,
    "stablehlo.abs": np.abs,
    "stablehlo.sign": np.sign,
    "stablehlo.floor": np.floor,
    "stablehlo.ceil": np.ceil,
    "stablehlo.not": np.logical_not,
    "stablehlo.exponential": np.exp,
    "stablehlo.log": np.log,
    "stablehlo.tanh": np.tanh,
    "stablehlo.logistic": _logistic,
    "stablehlo.log_plus_one": np.log1p,
    "stablehlo.exponential_minus_one": np.expm1,
    "stablehlo.sine": np.sin,
    "stablehlo.cosine": np.cos,
    "stablehlo.sqrt": np.sqrt,
    "stablehlo.rsqrt": lambda x: 1.0 / np.sqrt(x),
    "stablehlo.cbrt": np.cbrt,
    "stablehlo.is_finite": np.isfinite,
}

_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "stablehlo.add": np.add,
    "stablehlo.subtract": np.subtract,
    "stablehlo.multiply": np.multiply,
    "stablehlo.divide": np.divide,
    "stablehlo.maximum": np.maximum,  # propagates NaN, as StableHLO's maximum does
    "stablehlo.minimum": np.minimum,
    "stablehlo.power": np.power,
    "stablehlo.atan2": np.arctan2,
    "stablehlo.and": lambda a, b: a & b if a.dtype != np.bool_ else np.logical_and(a, b),
    "stablehlo.or": lambda a, b: a | b if a.dtype != np.bool_ else np.logical_or(a, b),
    # The i32 exponent arithmetic of runtime scales.
    "stablehlo.shift_left": lambda a, b: np.left_shift(a, b),
    "stablehlo.shift_right_logical": lambda a, b: (
        a.view(np.uint32) >> b.astype(np.uint32)).view(np.int32),
    "stablehlo.shift_right_arithmetic": np.right_shift,
}

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
    "GT": np.greater, "GE": np.greater_equal,
}


def element_name(t: ir.Type) -> str:
    return str(ir.ShapedType(t).element_type)


def dtype_of(t: ir.Type) -> np.dtype:
    name = element_name(t)
    if name not in DTYPES:
        raise UnsupportedOpError(f"element type {name} is not supported by the emulator")
    return DTYPES[name]


def shape_of(t: ir.Type) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(t).shape)


def _i64_array(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _int_list(text: str, key: str) -> list[int]:
    match = re.search(key + r"\s*=\s*\[([^\]]*)\]", text)
    return [int(x) for x in match.group(1).split(",") if x.strip()] if match else []


def _enum_word(attr: ir.Attribute) -> str:
    """``#stablehlo<comparison_direction GT>`` -> ``GT``."""
    return str(attr).rstrip(">").split()[-1]


def _apply(fn: Callable[..., np.ndarray], result_type: ir.Type, *args: np.ndarray) -> np.ndarray:
    """Apply ``fn`` in the result's element type (f16 and f32 natively, others via f32)."""
    dtype = dtype_of(result_type)
    name = element_name(result_type)
    if name in _VIA_F32:
        args = tuple(a.astype(np.float32) if a.dtype == dtype else a for a in args)
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*args))
    return out.astype(dtype, copy=False).reshape(shape_of(result_type))


def _quantum(x: np.ndarray) -> np.ndarray:
    """The largest power of two dividing each (nonzero, finite) f64 value; inf for zeros."""
    mantissa, exponent = np.frexp(x)
    integer = np.abs(mantissa * 2.0**53).astype(np.int64)
    lowest = (integer & -integer).astype(np.float64)
    return np.where(integer == 0, np.inf, np.ldexp(lowest, exponent - 53))


def _partial_sums_exact_in_f32(products: np.ndarray) -> bool:
    """Whether every partial sum of ``products`` over axis 2, in any order, is exact in f32.

    All products of one output element are multiples of their smallest quantum ``u``, so every
    partial sum is too; it is exact in f32 when its magnitude stays within ``2^24 u``, which
    the sum of magnitudes bounds. Then the summation order cannot change the result.
    """
    finite = np.isfinite(products)
    if not finite.all():
        return False
    unit = _quantum(products).min(axis=2)
    bound = np.abs(products).sum(axis=2)
    return bool(np.all((bound == 0) | (bound <= unit * 2.0**24)))


@dataclass(frozen=True)
class DotRecord:
    """One evaluated dot_general: operand dtypes, and whether f32 summation order is moot."""

    where: str
    lhs: str
    rhs: str
    order_independent: bool


@dataclass(frozen=True)
class Replacement:
    """An implementation-defined result: the emulator's own value, the value used instead
    (from XLA), and whether the two agree within what StableHLO allows for that op."""

    position: int
    op: str
    own: np.ndarray
    supplied: np.ndarray
    acceptable: bool
    detail: str


def _significand_bits(dtype: np.dtype) -> int:
    return int(ml_dtypes.finfo(dtype).nmant) + 1


def judge_replacement(op: ir.Operation, args: list[np.ndarray], own: np.ndarray,
                      supplied: np.ndarray, max_ulps: int) -> tuple[bool, str]:
    """Transcendentals: within ``max_ulps`` of numpy. Sums: within the worst-case rounding
    error of *some* summation order, ``|s - exact| <= gamma_n * sum|x|`` (Higham, with
    ``gamma_n = n u / (1 - n u)``) plus ``n`` half-subnormals for gradual underflow."""
    if op.name in TRANSCENDENTAL_OPS:
        worst = int(ulp_distance(own, supplied).max()) if own.size else 0
        return worst <= max_ulps, f"{worst} ulp from numpy"
    if op.name == "stablehlo.dot_general":
        return _judge_dot(op, args, own, supplied)
    if _contractible(op):  # one rounding of a * b + c (f32 inside a fusion) or two
        worst = int(ulp_distance(own, supplied).max()) if own.size else 0
        return worst <= 1, f"{worst} ulp from rounding the product first"
    x, init = args
    dims = _i64_array(op, "dimensions")
    wide = np.asarray(x, np.float64)
    n = int(np.prod([x.shape[d] for d in dims])) + 1
    u = 2.0 ** -_significand_bits(supplied.dtype)
    gamma = n * u / (1 - n * u)
    tiny = float(ml_dtypes.finfo(supplied.dtype).smallest_subnormal) / 2
    body = [v.operation.name for v in op.regions[0].blocks[0].operations]
    if "stablehlo.add" in body:
        exact = wide.sum(axis=tuple(dims)) + float(init)
        bound = gamma * (np.abs(wide).sum(axis=tuple(dims)) + abs(float(init))) + n * tiny
    else:
        exact = wide.prod(axis=tuple(dims)) * float(init)
        bound = gamma * np.abs(exact) + n * tiny
    error = np.abs(np.asarray(supplied, np.float64) - exact)
    with np.errstate(invalid="ignore"):
        ok = np.all((error <= bound) | (np.isnan(exact) & np.isnan(supplied.astype(np.float64))))
    ratio = float(np.max(error / np.maximum(bound, 1e-300))) if error.size else 0.0
    return bool(ok), f"error {ratio:.2f} x the worst-case bound over {n} terms"


def _contractible(op: ir.Operation) -> bool:
    """A 16-bit add or subtract of a product: XLA:CPU computes a fused 16-bit elementwise
    chain in f32 and may round ``a * b + c`` once where StableHLO rounds the product first,
    one ulp apart at most."""
    if op.name not in ("stablehlo.add", "stablehlo.subtract") or element_name(
            op.results[0].type) not in ("f16", "bf16"):
        return False
    return any(not isinstance(v.owner, ir.Block) and v.owner.name == "stablehlo.multiply"
               for v in op.operands)


def _judge_dot(op: ir.Operation, args: list[np.ndarray], own: np.ndarray,
               supplied: np.ndarray) -> tuple[bool, str]:
    """A dot: identical to the exactly rounded sum where no order can change it (every
    partial sum exact in f32), else within the worst-case error of some summation order,
    ``gamma_K * sum |a| |b|`` (``K`` the contracted size)."""
    if np.array_equal(own, supplied):
        return True, "identical"
    lhs, rhs = (np.abs(np.asarray(a, np.float64)) for a in args)
    numbers = str(op.attributes["dot_dimension_numbers"])
    dims = {key: _int_list(numbers, key) for key in (
        "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
        "rhs_contracting_dimensions")}
    lc, rc = dims["lhs_contracting_dimensions"], dims["rhs_contracting_dimensions"]
    lb, rb = dims["lhs_batching_dimensions"], dims["rhs_batching_dimensions"]
    lf = [d for d in range(lhs.ndim) if d not in lb + lc]
    rf = [d for d in range(rhs.ndim) if d not in rb + rc]
    k = int(np.prod([lhs.shape[d] for d in lc]))
    a = np.transpose(lhs, lb + lf + lc).reshape(-1, int(np.prod([lhs.shape[d] for d in lf])), k)
    b = np.transpose(rhs, rb + rc + rf).reshape(-1, k, int(np.prod([rhs.shape[d] for d in rf])))
    magnitude = (a @ b).reshape(own.shape)
    u = 2.0 ** -_significand_bits(np.dtype(np.float32))
    gamma = k * u / (1 - k * u)
    error = np.abs(np.asarray(supplied, np.float64) - np.asarray(own, np.float64))
    bound = gamma * magnitude
    ok = bool(np.all(error <= bound))
    ratio = float(np.max(error / np.maximum(bound, 1e-300)))
    return ok, f"error {ratio:.2f} x the worst-case f32 summation bound over {k} terms"


@dataclass
class Trace:
    """Every intermediate value in evaluation order, to locate a divergence from XLA."""

    values: list[tuple[str, np.ndarray]] = field(default_factory=list)


class Fp8Emulator:
    """Interprets the entry function of a StableHLO module op by op in numpy.

    ``overrides`` maps the position of an op in the entry block (as numbered by
    :func:`implementation_defined_positions`) to the value to use for its result instead of
    the emulator's own: a test feeds XLA's ``exp``/``log`` results and f16 sums there, so
    that everything around those ops is checked bit for bit, while those ops themselves are
    judged by what StableHLO allows them (an ulp tolerance, a summation error bound). Each
    replacement and its verdict is kept in ``replaced``.
    """

    def __init__(self, text: str, max_ulps: int = 2) -> None:
        self.text = text
        self.max_ulps = max_ulps
        self.dots: list[DotRecord] = []
        self.replaced: list[Replacement] = []

    def run(self, inputs: Sequence[np.ndarray], trace: Trace | None = None,
            overrides: dict[int, np.ndarray] | None = None) -> list[np.ndarray]:
        self.dots, self.replaced = [], []
        with module_io.ir_context():
            module = module_io.parse_module(self.text)
            block = entry_function(module).regions[0].blocks[0]
            if len(inputs) != len(block.arguments):
                raise ValueError(f"expected {len(block.arguments)} inputs, got {len(inputs)}")
            env: dict[ir.Value, np.ndarray] = {}
            for arg, x in zip(block.arguments, inputs, strict=True):
                expected = dtype_of(arg.type)
                x = np.asarray(x)
                if x.dtype != expected or x.shape != shape_of(arg.type):
                    raise ValueError(f"input {arg.arg_number}: got {x.dtype}{list(x.shape)}, "
                                     f"want {expected}{list(shape_of(arg.type))}")
                env[arg] = x
            return self._run_block(block, env, trace, overrides or {})

    def _run_block(self, block: ir.Block, env: dict[ir.Value, np.ndarray],
                   trace: Trace | None, overrides: dict[int, np.ndarray]) -> list[np.ndarray]:
        for position, view in enumerate(block.operations):
            op = view.operation
            if op.name in ("func.return", "stablehlo.return"):
                return [env[v] for v in op.operands]
            args = [env[v] for v in op.operands]
            results = self.evaluate(op, args)
            if position in overrides:
                supplied = np.asarray(overrides[position])
                ok, detail = judge_replacement(op, args, results[0], supplied, self.max_ulps) \
                    if is_implementation_defined(op) else (False, "not implementation-defined")
                if (op.name == "stablehlo.dot_general" and self.dots[-1].order_independent
                        and not np.array_equal(results[0], supplied)):
                    ok, detail = False, "differs where every partial sum is exact in f32"
                self.replaced.append(Replacement(position, op.name, results[0], supplied, ok,
                                                 detail))
                results = [supplied]
            for value, array in zip(op.results, results, strict=True):
                expected = (dtype_of(value.type), shape_of(value.type))
                if (array.dtype, array.shape) != expected:
                    raise AssertionError(f"{op.name} made {array.dtype}{array.shape}, "
                                         f"the IR says {expected}")
                env[value] = array
                if trace is not None:
                    trace.values.append((f"{value.get_name()} = {op.name}", array))
        raise UnsupportedOpError("block has no terminator")

    # ----- ops -------------------------------------------------------------------------
    def evaluate(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        name = op.name
        out_type = op.results[0].type if len(op.results) else None
        if name in _UNARY:
            return [_apply(_UNARY[name], out_type, args[0])]
        if name in _BINARY:
            return [_apply(_BINARY[name], out_type, args[0], args[1])]
        method = getattr(self, "op_" + name.removeprefix("stablehlo."), None)
        if not name.startswith("stablehlo.") or method is None:
            raise UnsupportedOpError(
                f"{module_io.short_location(op.location)}: the emulator has no rule for {name}")
        return method(op, args)

    def op_constant(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        t = op.results[0].type
        if element_name(t) not in ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2"):
            array = np.array(ir.DenseElementsAttr(op.attributes["value"]))
            return [array.astype(dtype_of(t)).reshape(shape_of(t))]
        return [read_dense(op.attributes["value"]).reshape(shape_of(t))]

    def op_convert(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        (x,) = args
        target = dtype_of(op.results[0].type)
        # ml_dtypes converts f16 -> f8 by way of f32 (exact), then rounds to nearest even.
        with np.errstate(all="ignore"):
            return [x.astype(target)]

    def op_reduce_precision(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        """Round f32 to ``mantissa_bits`` (nearest, ties to even) and clamp to an exponent
        range of ``exponent_bits`` (overflow to inf, underflow to signed zero), as XLA does."""
        (x,) = args
        if x.dtype != np.float32:
            raise UnsupportedOpError("reduce_precision is emulated for f32 only")
        m = ir.IntegerAttr(op.attributes["mantissa_bits"]).value
        e = ir.IntegerAttr(op.attributes["exponent_bits"]).value
        bits = x.view(np.uint32).astype(np.uint64)
        if m < 23:
            last = np.uint64(1 << (23 - m))
            bias = (last >> np.uint64(1)) - np.uint64(1) + ((bits & last) >> np.uint64(23 - m))
            bits = (bits + bias) & ~(last - np.uint64(1)) & np.uint64(0xFFFFFFFF)
        out = bits.astype(np.uint32).view(np.float32).copy()
        if e < 8:
            max_exp, min_exp = (1 << (e - 1)) - 1, 2 - (1 << (e - 1))
            with np.errstate(all="ignore"):
                exp = np.floor(np.log2(np.abs(out)))
            out = np.where(exp > max_exp, np.copysign(np.float32(np.inf), out), out)
            out = np.where(exp < min_exp, np.copysign(np.float32(0), out), out)
        return [np.where(np.isnan(x), x, out).astype(np.float32)]

    def op_bitcast_convert(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        (x,) = args
        return [np.ascontiguousarray(x).view(dtype_of(op.results[0].type)).reshape(
            shape_of(op.results[0].type))]

    def op_clamp(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        low, x, high = args
        t = op.results[0].type
        return [_apply(lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi), t, x, low, high)]

    def op_select(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        pred, on_true, on_false = args
        return [np.where(pred, on_true, on_false).astype(on_true.dtype)]

    def op_compare(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        direction = _enum_word(op.attributes["comparison_direction"])
        if "compare_type" in op.attributes and _enum_word(op.attributes["compare_type"]) \
                == "TOTALORDER":
            raise UnsupportedOpError("compare with TOTALORDER")
        a, b = args
        if a.dtype in (DTYPES["bf16"], DTYPES["f8E4M3FN"], DTYPES["f8E5M2"]):
            a, b = a.astype(np.float32), b.astype(np.float32)
        return [_COMPARE[direction](a, b)]

    def op_broadcast_in_dim(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        (x,) = args
        dims = _i64_array(op, "broadcast_dimensions")
        out_shape = shape_of(op.results[0].type)
        expanded = [1] * len(out_shape)
        for source, target in enumerate(dims):
            expanded[target] = x.shape[source]
        return [np.broadcast_to(x.reshape(expanded), out_shape).copy()]

    def op_reshape(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        return [args[0].reshape(shape_of(op.results[0].type))]

    def op_optimization_barrier(self, op: ir.Operation,
                                args: list[np.ndarray]) -> list[np.ndarray]:
        return list(args)  # a scheduling hint: its results are its operands

    def op_transpose(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        return [np.ascontiguousarray(np.transpose(args[0], _i64_array(op, "permutation")))]

    def op_slice(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        starts = _i64_array(op, "start_indices")
        limits = _i64_array(op, "limit_indices")
        strides = _i64_array(op, "strides")
        index = tuple(slice(a, b, s) for a, b, s in zip(starts, limits, strides, strict=True))
        return [args[0][index].copy()]

    def op_concatenate(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        axis = ir.IntegerAttr(op.attributes["dimension"]).value
        return [np.concatenate(args, axis=axis)]

    def op_pad(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        x, value = args
        if any(_i64_array(op, "interior_padding")):
            raise UnsupportedOpError("pad with interior padding")
        low, high = _i64_array(op, "edge_padding_low"), _i64_array(op, "edge_padding_high")
        if min(low + high) < 0:
            raise UnsupportedOpError("pad with negative padding")
        return [np.pad(x, list(zip(low, high, strict=True)), constant_values=value.item())]

    def op_iota(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        t = op.results[0].type
        axis = ir.IntegerAttr(op.attributes["iota_dimension"]).value
        shape = shape_of(t)
        ramp = np.arange(shape[axis]).reshape([-1 if d == axis else 1 for d in range(len(shape))])
        return [np.broadcast_to(ramp, shape).astype(dtype_of(t))]

    def op_dot_general(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        """Exact products and sum in f64, one rounding to the result type (see the module
        docstring for why that equals XLA's f32 accumulation on FP8 operands)."""
        lhs, rhs = args
        numbers = str(op.attributes["dot_dimension_numbers"])
        lb = _int_list(numbers, "lhs_batching_dimensions")
        rb = _int_list(numbers, "rhs_batching_dimensions")
        lc = _int_list(numbers, "lhs_contracting_dimensions")
        rc = _int_list(numbers, "rhs_contracting_dimensions")
        lf = [d for d in range(lhs.ndim) if d not in lb + lc]
        rf = [d for d in range(rhs.ndim) if d not in rb + rc]
        size = lambda x, dims: int(np.prod([x.shape[d] for d in dims]))  # noqa: E731
        batch, m, k, n = size(lhs, lb), size(lhs, lf), size(lhs, lc), size(rhs, rf)
        a = np.transpose(lhs, lb + lf + lc).astype(np.float64).reshape(batch, m, k)
        b = np.transpose(rhs, rb + rc + rf).astype(np.float64).reshape(batch, k, n)
        products = a[:, :, :, None] * b[:, None, :, :]  # (batch, m, k, n), exact in f64
        exact = products.sum(axis=2)
        self.dots.append(DotRecord(op.name + " " + module_io.short_location(op.location),
                                   str(lhs.dtype), str(rhs.dtype),
                                   _partial_sums_exact_in_f32(products)))
        t = op.results[0].type
        return [exact.astype(dtype_of(t)).reshape(shape_of(t))]

    def op_reduce(self, op: ir.Operation, args: list[np.ndarray]) -> list[np.ndarray]:
        """Sequential fold in index order, rounding to the element type at each step."""
        if len(args) != 2:
            raise UnsupportedOpError("variadic reduce")
        x, init = args
        dims = _i64_array(op, "dimensions")
        body = [v.operation for v in op.regions[0].blocks[0].operations]
        if len(body) != 2 or body[0].name not in _BINARY or body[1].name != "stablehlo.return":
            raise UnsupportedOpError(f"reduce with body {[o.name for o in body]}")
        block_args = list(op.regions[0].blocks[0].arguments)
        if list(body[0].operands) != block_args and list(body[0].operands) != block_args[::-1]:
            raise UnsupportedOpError("reduce body that is not a binary op on its arguments")
        combine = _BINARY[body[0].name]
        t = op.results[0].type
        kept = [d for d in range(x.ndim) if d not in dims]
        moved = np.transpose(x, kept + dims).reshape(
            [x.shape[d] for d in kept] + [int(np.prod([x.shape[d] for d in dims]))])
        acc = np.broadcast_to(init, shape_of(t)).astype(dtype_of(t))
        for i in range(moved.shape[-1]):
            acc = _apply(combine, t, acc, moved[..., i])
        return [acc]


def is_implementation_defined(op: ir.Operation) -> bool:
    """Ops whose floating result StableHLO leaves to the implementation: transcendental
    functions (approximations), a 16-bit add of a product (``_contractible``), floating
    ``reduce`` with an add or multiply body (the order
    of the reduction is implementation-defined; XLA:CPU marks it ``reassoc`` and LLVM
    vectorizes it) and ``dot_general`` (the order of its accumulation; its result is defined
    exactly only where every partial sum is exact, ``DotRecord.order_independent``, and the
    emulator then requires XLA's to be identical). ``max``/``min`` reductions are exact in
    any order and are not listed."""
    if op.name in TRANSCENDENTAL_OPS:
        return True
    if op.name == "stablehlo.dot_general":  # the order of the f32 accumulation is XLA's
        return element_name(op.results[0].type) in ("f32", "f16", "bf16")
    if _contractible(op):
        return True
    if op.name != "stablehlo.reduce" or element_name(op.results[0].type) not in DTYPES:
        return False
    if not np.issubdtype(dtype_of(op.results[0].type), np.floating) and \
            element_name(op.results[0].type) not in _VIA_F32:
        return False
    body = [v.operation.name for v in op.regions[0].blocks[0].operations]
    return any(name in ("stablehlo.add", "stablehlo.multiply") for name in body)


def implementation_defined_positions(text: str) -> list[int]:
    """Positions in the entry block of the ops for which :func:`is_implementation_defined`."""
    with module_io.ir_context():
        module = module_io.parse_module(text)  # kept alive while its ops are read
        block = entry_function(module).regions[0].blocks[0]
        return [i for i, view in enumerate(block.operations)
                if is_implementation_defined(view.operation)]


def with_probes(text: str, positions: Sequence[int]) -> str:
    """The module with the results of the ops at ``positions`` appended to the entry
    function's results, so that XLA reports the values it computed there."""
    with module_io.ir_context():
        module = module_io.parse_module(text)
        func = entry_function(module)
        block = func.regions[0].blocks[0]
        ops = [view.operation for view in block.operations]
        terminator = ops[-1]
        probes = [ops[i].results[0] for i in positions]
        values = list(terminator.operands) + probes
        with ir.InsertionPoint(terminator), terminator.location:
            ir.Operation.create(terminator.name, operands=values)
        terminator.erase()
        old = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(old.inputs), [v.type for v in values]))
        if "res_attrs" in func.attributes:
            attrs = list(ir.ArrayAttr(func.attributes["res_attrs"]))
            attrs += [ir.DictAttr.get({})] * len(probes)
            func.attributes["res_attrs"] = ir.ArrayAttr.get(attrs)
        return module_io.module_to_text(module)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between same-typed f16/f32 arrays (NaN-safe:
    equal NaNs count as 0)."""
    if a.dtype != b.dtype:
        raise ValueError(f"dtype mismatch {a.dtype} vs {b.dtype}")
    signed = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32}[a.dtype]
    wide = np.int64

    def ordered(x: np.ndarray) -> np.ndarray:
        bits = x.view(signed).astype(wide)
        return np.where(bits < 0, np.iinfo(signed).min - bits, bits)

    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, 0, np.abs(ordered(a) - ordered(b)))
