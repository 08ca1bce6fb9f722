"""A corpus of small StableHLO/CHLO modules, one focused op (or op family) each, with inputs.

Every case is a complete module whose ``@main`` runs on XLA:CPU as written, so a test can run
the original for a reference and compare the scalified module against it (see
``test_op_exactness.py``). Inputs include NaN, +-Inf and +-0 wherever the op is defined for
them, because scale propagation must keep special values where the unscaled program has them.
``covering_cases()`` maps op names to case names for the docs' coverage table.

Magnitudes: every floating input stays within about 2**-30 .. 2**30 so that the harness can
split it into ``data * 2**k`` exactly for any ``k`` in [-40, 40] (the data stays f32-normal).
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Spec = Callable[[np.random.Generator], np.ndarray]
F32 = np.float32
NAN = float("nan")
INF = float("inf")
SPECIALS = (NAN, INF, -INF, -0.0, 0.0)


@dataclass(frozen=True)
class OpCase:
    """One module of the corpus.

    ``ops`` lists the ops the case is *about* (what the coverage table credits it with), not
    every op in the text. ``scale_range`` bounds the random input exponents where the module
    itself compounds data magnitudes (e.g. ``x*x*x``) beyond what f32 data can hold.
    ``setup``, when set, must run once in the process before the module is executed.
    """

    name: str
    ops: tuple[str, ...]
    mlir: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    scale_range: tuple[int, int] = (-40, 40)
    note: str = ""
    setup: Callable[[], None] | None = None


# --------------------------------------------------------------------------- input specs


def _shape(shape: str | tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(shape, tuple):
        return shape
    return tuple(int(d) for d in shape.split("x")) if shape else ()


def _with_specials(x: np.ndarray, rng: np.random.Generator, values=SPECIALS) -> np.ndarray:
    """Put each special value once at a random position (as many as fit)."""
    x = np.array(x, dtype=F32)
    flat = x.reshape(-1)
    n = min(len(values), flat.size)
    pos = rng.choice(flat.size, size=n, replace=False)
    flat[pos] = np.asarray(values[:n], dtype=F32)
    return x


def _finish(x: np.ndarray, rng: np.random.Generator, specials) -> np.ndarray:
    x = np.asarray(x, dtype=F32)
    if specials is True:
        return _with_specials(x, rng)
    if specials:
        return _with_specials(x, rng, tuple(specials))
    return x


def normal(shape="3x4", std=1.0, specials=False) -> Spec:
    """Standard normal times ``std``; ``specials`` True (NaN, +-Inf, +-0) or a value tuple."""
    return lambda rng: _finish(rng.normal(0.0, std, _shape(shape)), rng, specials)


def uniform(shape="3x4", lo=-1.0, hi=1.0, specials=False) -> Spec:
    return lambda rng: _finish(rng.uniform(lo, hi, _shape(shape)), rng, specials)


def loguniform(shape="3x4", lo_exp=-20.0, hi_exp=20.0, signed=False, specials=False) -> Spec:
    """``2**U(lo_exp, hi_exp)``, optionally with random signs: magnitudes spanning decades."""

    def gen(rng: np.random.Generator) -> np.ndarray:
        s = _shape(shape)
        x = np.exp2(rng.uniform(lo_exp, hi_exp, s))
        if signed:
            x = x * rng.choice([-1.0, 1.0], s)
        return _finish(x, rng, specials)

    return gen


def halves(shape="3x4", bound=4, specials=False) -> Spec:
    """Half the elements exact halves (ties for rounding), the rest normal * bound."""

    def gen(rng: np.random.Generator) -> np.ndarray:
        s = _shape(shape)
        ties = rng.integers(-2 * bound, 2 * bound, s) + 0.5
        x = np.where(rng.random(s) < 0.5, ties, rng.normal(0.0, bound, s))
        return _finish(x, rng, specials)

    return gen


def ints(shape="", lo=0, hi=3, dtype=np.int32) -> Spec:
    """Integers in ``[lo, hi)``."""
    return lambda rng: np.asarray(rng.integers(lo, hi, _shape(shape)), dtype=dtype)


def distinct(n: int, hi: int, dtype=np.int32) -> Spec:
    """``n`` distinct integers in ``[0, hi)`` (scatter with assignment needs unique indices)."""
    return lambda rng: np.asarray(rng.choice(hi, size=n, replace=False), dtype=dtype)


def bools(shape="3x4") -> Spec:
    return lambda rng: rng.random(_shape(shape)) < 0.5


def fixed(value, dtype=F32) -> Spec:
    return lambda rng: np.asarray(value, dtype=dtype)


def spd(n: int) -> Spec:
    """A well-conditioned symmetric positive definite matrix (Cholesky input)."""

    def gen(rng: np.random.Generator) -> np.ndarray:
        b = rng.normal(size=(n, n))
        return np.asarray(b @ b.T + n * np.eye(n), dtype=F32)

    return gen


def lower_triangular(n: int) -> Spec:
    def gen(rng: np.random.Generator) -> np.ndarray:
        a = np.tril(rng.normal(size=(n, n))) + n * np.eye(n)
        return np.asarray(a, dtype=F32)

    return gen


def float_bits(shape="3x4") -> Spec:
    """i32 bit patterns of normal f32 values (input of an i32 -> f32 bitcast)."""
    return lambda rng: rng.normal(size=_shape(shape)).astype(F32).view(np.int32)


def _inputs(*specs: Spec) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [spec(rng) for spec in specs]


# --------------------------------------------------------------------------- module text


def _t(shape: str = "3x4", et: str = "f32") -> str:
    return f"tensor<{shape}x{et}>" if shape else f"tensor<{et}>"


def _module(name: str, funcs: str) -> str:
    body = textwrap.indent(textwrap.dedent(funcs).strip(), "  ")
    return f"module @{name} {{\n{body}\n}}\n"


CASES: list[OpCase] = []


def _case(
    name: str,
    ops: tuple[str, ...] | str,
    funcs: str,
    inputs: Callable[[np.random.Generator], list[np.ndarray]],
    scale_range: tuple[int, int] = (-40, 40),
    note: str = "",
    setup: Callable[[], None] | None = None,
) -> None:
    ops = (ops,) if isinstance(ops, str) else ops
    CASES.append(OpCase(name, ops, _module(name, funcs), inputs, scale_range, note, setup))


@functools.cache
def _init_lapack() -> None:
    """Make jaxlib load its LAPACK kernels.

    jaxlib registers the ``lapack_*_ffi`` custom-call targets at import, but fills in the LAPACK
    function pointers only when jax lowers a linalg op; executing such a custom call before
    that segfaults XLA:CPU (no error). Lowering one Cholesky through the public API does it.
    """
    import jax

    jax.jit(jax.lax.linalg.cholesky).lower(np.eye(2, dtype=F32))


def _unary(op: str, shape: str = "3x4", out_et: str = "f32") -> str:
    t, r = _t(shape), _t(shape, out_et)
    if op.startswith("chlo."):
        line = f"%0 = {op} %arg0 : {t} -> {r}"
    elif out_et != "f32":
        line = f"%0 = {op} %arg0 : ({t}) -> {r}"
    else:
        line = f"%0 = {op} %arg0 : {t}"
    return f"""
    func.func public @main(%arg0: {t}) -> {r} {{
      {line}
      return %0 : {r}
    }}
    """


def _binary(op: str, shape: str = "3x4") -> str:
    t = _t(shape)
    line = (
        f"%0 = {op} %arg0, %arg1 : {t}, {t} -> {t}"
        if op.startswith("chlo.")
        else f"%0 = {op} %arg0, %arg1 : {t}"
    )
    return f"""
    func.func public @main(%arg0: {t}, %arg1: {t}) -> {t} {{
      {line}
      return %0 : {t}
    }}
    """


def _name(op: str) -> str:
    return op.split(".", 1)[1]


# --------------------------------------------------------------------------- elementwise unary

for _op, _spec in [
    ("stablehlo.abs", normal(specials=True)),
    ("stablehlo.negate", normal(specials=True)),
    ("stablehlo.sign", normal(specials=True)),
    ("stablehlo.exponential", normal(std=3.0, specials=True)),
    ("stablehlo.exponential_minus_one", normal(std=2.0, specials=True)),
    ("stablehlo.log", loguniform()),
    ("stablehlo.log_plus_one", uniform(lo=-0.9, hi=4.0, specials=SPECIALS + (-1.0,))),
    ("stablehlo.logistic", normal(std=4.0, specials=True)),
    ("stablehlo.tanh", normal(std=2.0, specials=True)),
    ("stablehlo.sine", normal(std=3.0, specials=True)),
    ("stablehlo.cosine", normal(std=3.0, specials=True)),
    ("stablehlo.tan", uniform(lo=-1.4, hi=1.4, specials=True)),
    ("stablehlo.sqrt", loguniform()),
    ("stablehlo.rsqrt", loguniform()),
    ("stablehlo.cbrt", loguniform(signed=True, specials=True)),
    ("stablehlo.floor", halves(specials=True)),
    ("stablehlo.ceil", halves(specials=True)),
    ("stablehlo.round_nearest_afz", halves(specials=True)),
    ("stablehlo.round_nearest_even", halves(specials=True)),
]:
    _case(_name(_op), _op, _unary(_op), _inputs(_spec))

# Positive-domain functions again, now at the edges of their domain.
_DOMAIN_EDGES = SPECIALS + (-1.0, -2.5)
for _op in ("stablehlo.log", "stablehlo.sqrt", "stablehlo.rsqrt"):
    _case(
        f"{_name(_op)}_specials",
        _op,
        _unary(_op),
        _inputs(loguniform(lo_exp=-4, hi_exp=4, specials=_DOMAIN_EDGES)),
    )

_case(
    "log_near_one",
    "stablehlo.log",
    _unary("stablehlo.log"),
    _inputs(uniform(lo=0.9, hi=1.1, specials=(1.0,))),
    note="log(x) ~ 0: computing log(d) + k*log(2) cancels catastrophically here",
)

# Tiny arguments, where expm1 / log1p differ from exp - 1 / log(1 + x).
for _op in ("stablehlo.exponential_minus_one", "stablehlo.log_plus_one"):
    _case(
        f"{_name(_op)}_tiny",
        _op,
        _unary(_op),
        _inputs(loguniform(lo_exp=-28, hi_exp=-8, signed=True)),
    )

_case(
    "is_finite",
    "stablehlo.is_finite",
    _unary("stablehlo.is_finite", out_et="i1"),
    _inputs(loguniform(lo_exp=-25, hi_exp=25, signed=True, specials=True)),
)

# --------------------------------------------------------------------------- elementwise binary

for _op, _a, _b in [
    ("stablehlo.add", normal(specials=True), normal(specials=True)),
    ("stablehlo.subtract", normal(specials=True), normal(specials=True)),
    ("stablehlo.multiply", normal(specials=True), normal(specials=True)),
    ("stablehlo.divide", normal(specials=True), normal(specials=True)),
    ("stablehlo.maximum", normal(specials=True), normal(specials=True)),
    ("stablehlo.minimum", normal(specials=True), normal(specials=True)),
    ("stablehlo.power", uniform(lo=0.1, hi=3.0), normal(std=2.0)),
    ("stablehlo.atan2", normal(specials=True), normal(specials=True)),
    ("stablehlo.remainder", normal(std=10.0, specials=True), uniform(lo=0.5, hi=3.0)),
]:
    _case(_name(_op), _op, _binary(_op), _inputs(_a, _b))

# Operands whose magnitudes differ by up to 2**40: a common scale must not lose the small one.
for _op in (
    "stablehlo.add",
    "stablehlo.subtract",
    "stablehlo.multiply",
    "stablehlo.divide",
    "stablehlo.maximum",
    "stablehlo.minimum",
):
    _case(
        f"{_name(_op)}_wide",
        _op,
        _binary(_op),
        _inputs(loguniform(signed=True), loguniform(signed=True)),
    )

_case(
    "subtract_cancellation",
    "stablehlo.subtract",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %c = stablehlo.constant dense<1.00000012> : tensor<3x4xf32>
      %0 = stablehlo.multiply %arg0, %c : tensor<3x4xf32>
      %1 = stablehlo.subtract %0, %arg0 : tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
    note="x*(1+eps) - x: exact cancellation leaves one ulp of x",
)

_case(
    "power_integer_exponents",
    "stablehlo.power",
    _binary("stablehlo.power"),
    _inputs(normal(std=2.0, specials=True), lambda rng: rng.integers(-3, 4, (3, 4)).astype(F32)),
    note="negative bases with integral exponents, and 0 ** -n = inf",
)

_case(
    "remainder_signed",
    "stablehlo.remainder",
    _binary("stablehlo.remainder"),
    _inputs(normal(std=10.0), normal(std=2.0, specials=True)),
    note="negative divisors and x % 0 = NaN",
)

_case(
    "compare_directions",
    "stablehlo.compare",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>)
        -> (tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>,
            tensor<3x4xi1>) {
      %0 = stablehlo.compare EQ, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %1 = stablehlo.compare NE, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %2 = stablehlo.compare LT, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %3 = stablehlo.compare LE, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %4 = stablehlo.compare GT, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %5 = stablehlo.compare GE, %a, %b, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      return %0, %1, %2, %3, %4, %5
          : tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>,
            tensor<3x4xi1>
    }
    """,
    _inputs(halves(bound=1, specials=True), halves(bound=1, specials=True)),
    note="ties (equal halves) and special values on both sides",
)

_case(
    "compare_totalorder",
    "stablehlo.compare",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>)
        -> (tensor<3x4xi1>, tensor<3x4xi1>) {
      %0 = stablehlo.compare LT, %a, %b, TOTALORDER
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      %1 = stablehlo.compare EQ, %a, %b, TOTALORDER
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      return %0, %1 : tensor<3x4xi1>, tensor<3x4xi1>
    }
    """,
    _inputs(halves(bound=1, specials=True), halves(bound=1, specials=True)),
    note="TOTALORDER tells -0 from +0 and orders NaN",
)

_case(
    "compare_scalar_constant",
    "stablehlo.compare",
    """
    func.func public @main(%a: tensor<3x4xf32>) -> tensor<3x4xi1> {
      %c = stablehlo.constant dense<0.25> : tensor<3x4xf32>
      %0 = stablehlo.compare GT, %a, %c, FLOAT
          : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
      return %0 : tensor<3x4xi1>
    }
    """,
    _inputs(halves(bound=1, specials=True)),
)

_case(
    "select",
    "stablehlo.select",
    """
    func.func public @main(%p: tensor<3x4xi1>, %a: tensor<3x4xf32>, %b: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %0 = stablehlo.select %p, %a, %b : tensor<3x4xi1>, tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(bools(), normal(specials=True), loguniform(signed=True, specials=True)),
)

_case(
    "select_scalar_pred",
    "stablehlo.select",
    """
    func.func public @main(%p: tensor<i1>, %a: tensor<3x4xf32>, %b: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %0 = stablehlo.select %p, %a, %b : tensor<i1>, tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(bools(""), normal(), normal(std=100.0)),
)

_case(
    "clamp",
    "stablehlo.clamp",
    """
    func.func public @main(%lo: tensor<3x4xf32>, %x: tensor<3x4xf32>, %hi: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %0 = stablehlo.clamp %lo, %x, %hi : tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(uniform(lo=-2.0, hi=-0.5), normal(std=2.0, specials=True), uniform(lo=0.5, hi=2.0)),
)

_case(
    "clamp_scalar_bounds",
    "stablehlo.clamp",
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %lo = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
      %hi = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %0 = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<3x4xf32>, tensor<f32>)
          -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=2.0, specials=True)),
)

# --------------------------------------------------------------------------- convert and bits

_case(
    "convert_f32_f16",
    "stablehlo.convert",
    _unary("stablehlo.convert", out_et="f16"),
    _inputs(loguniform(lo_exp=-12, hi_exp=14, signed=True, specials=True)),
    note="inputs inside f16's normal range: f16 overflow is not a scaling question",
)
_case(
    "convert_f32_bf16",
    "stablehlo.convert",
    _unary("stablehlo.convert", out_et="bf16"),
    _inputs(loguniform(signed=True, specials=True)),
)
_case(
    "convert_f32_i32",
    "stablehlo.convert",
    _unary("stablehlo.convert", out_et="i32"),
    _inputs(halves(bound=1000)),
    note="truncation toward zero of ties and large values",
)
_case(
    "convert_i32_f32",
    "stablehlo.convert",
    """
    func.func public @main(%arg0: tensor<3x4xi32>) -> tensor<3x4xf32> {
      %0 = stablehlo.convert %arg0 : (tensor<3x4xi32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(ints("3x4", -100000, 100000)),
)
_case(
    "convert_f16_f32",
    "stablehlo.convert",
    """
    func.func public @main(%arg0: tensor<3x4xf16>) -> tensor<3x4xf32> {
      %0 = stablehlo.convert %arg0 : (tensor<3x4xf16>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(lambda rng: normal(specials=True)(rng).astype(np.float16)),
)
_case(
    "convert_f32_f16_f32",
    "stablehlo.convert",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.convert %arg0 : (tensor<3x4xf32>) -> tensor<3x4xf16>
      %1 = stablehlo.convert %0 : (tensor<3x4xf16>) -> tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(loguniform(lo_exp=-12, hi_exp=14, signed=True, specials=True)),
    note="the f16 rounding in the middle must survive even with f32 data",
)
_case(
    "convert_f32_bf16_f32",
    "stablehlo.convert",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.convert %arg0 : (tensor<3x4xf32>) -> tensor<3x4xbf16>
      %1 = stablehlo.convert %0 : (tensor<3x4xbf16>) -> tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(loguniform(signed=True, specials=True)),
)

for _fmt, _lo, _hi in [("e5m10", -20, 20), ("e8m7", -20, 20), ("e4m3", -10, 10)]:
    _case(
        f"reduce_precision_{_fmt}",
        "stablehlo.reduce_precision",
        f"""
        func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {{
          %0 = stablehlo.reduce_precision %arg0, format = {_fmt} : tensor<3x4xf32>
          return %0 : tensor<3x4xf32>
        }}
        """,
        _inputs(loguniform(lo_exp=_lo, hi_exp=_hi, signed=True, specials=True)),
        note="the format's exponent range clips: inputs go past it on both sides",
    )

_case(
    "bitcast_convert_f32_i32",
    "stablehlo.bitcast_convert",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xi32> {
      %0 = stablehlo.bitcast_convert %arg0 : (tensor<3x4xf32>) -> tensor<3x4xi32>
      return %0 : tensor<3x4xi32>
    }
    """,
    _inputs(normal(specials=True)),
)
_case(
    "bitcast_convert_i32_f32",
    "stablehlo.bitcast_convert",
    """
    func.func public @main(%arg0: tensor<3x4xi32>) -> tensor<3x4xf32> {
      %0 = stablehlo.bitcast_convert %arg0 : (tensor<3x4xi32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(float_bits()),
)
_case(
    "bitcast_bit_tricks",
    (
        "stablehlo.bitcast_convert",
        "stablehlo.and",
        "stablehlo.xor",
        "stablehlo.or",
    ),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %0 = stablehlo.bitcast_convert %arg0 : (tensor<3x4xf32>) -> tensor<3x4xi32>
      %abs_mask = stablehlo.constant dense<2147483647> : tensor<3x4xi32>
      %sign = stablehlo.constant dense<-2147483648> : tensor<3x4xi32>
      %1 = stablehlo.and %0, %abs_mask : tensor<3x4xi32>
      %2 = stablehlo.xor %0, %sign : tensor<3x4xi32>
      %3 = stablehlo.or %1, %sign : tensor<3x4xi32>
      %4 = stablehlo.bitcast_convert %2 : (tensor<3x4xi32>) -> tensor<3x4xf32>
      %5 = stablehlo.bitcast_convert %3 : (tensor<3x4xi32>) -> tensor<3x4xf32>
      return %4, %5 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="negate and -abs through the bits: the data must be unscaled first",
)

_case(
    "integer_ops",
    (
        "stablehlo.shift_left",
        "stablehlo.shift_right_arithmetic",
        "stablehlo.popcnt",
        "stablehlo.count_leading_zeros",
        "stablehlo.not",
    ),
    """
    func.func public @main(%a: tensor<3x4xi32>, %b: tensor<3x4xi32>, %x: tensor<3x4xf32>)
        -> (tensor<3x4xi32>, tensor<3x4xi32>, tensor<3x4xi32>, tensor<3x4xf32>) {
      %0 = stablehlo.shift_left %a, %b : tensor<3x4xi32>
      %1 = stablehlo.shift_right_arithmetic %a, %b : tensor<3x4xi32>
      %2 = stablehlo.popcnt %a : tensor<3x4xi32>
      %3 = stablehlo.count_leading_zeros %a : tensor<3x4xi32>
      %4 = stablehlo.not %3 : tensor<3x4xi32>
      %5 = stablehlo.convert %2 : (tensor<3x4xi32>) -> tensor<3x4xf32>
      %6 = stablehlo.multiply %5, %x : tensor<3x4xf32>
      return %0, %1, %4, %6 : tensor<3x4xi32>, tensor<3x4xi32>, tensor<3x4xi32>, tensor<3x4xf32>
    }
    """,
    _inputs(ints("3x4", -1000, 1000), ints("3x4", 0, 8), normal()),
    note="integer-only ops must pass through untouched next to scaled floats",
)

# --------------------------------------------------------------------------- shape ops

_case(
    "reshape",
    "stablehlo.reshape",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<2x6xf32> {
      %0 = stablehlo.reshape %arg0 : (tensor<3x4xf32>) -> tensor<2x6xf32>
      return %0 : tensor<2x6xf32>
    }
    """,
    _inputs(normal(specials=True)),
)
_case(
    "reshape_to_scalar",
    "stablehlo.reshape",
    """
    func.func public @main(%arg0: tensor<1x1xf32>) -> tensor<f32> {
      %0 = stablehlo.reshape %arg0 : (tensor<1x1xf32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    """,
    _inputs(normal("1x1")),
)
_case(
    "transpose",
    "stablehlo.transpose",
    """
    func.func public @main(%arg0: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
      %0 = stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
      return %0 : tensor<4x2x3xf32>
    }
    """,
    _inputs(normal("2x3x4", specials=True)),
)
_case(
    "broadcast_in_dim",
    "stablehlo.broadcast_in_dim",
    """
    func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<f32>)
        -> (tensor<2x3x4xf32>, tensor<3x4xf32>) {
      %0 = stablehlo.broadcast_in_dim %arg0, dims = [2] : (tensor<4xf32>) -> tensor<2x3x4xf32>
      %1 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      return %0, %1 : tensor<2x3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal("4", specials=SPECIALS[:3]), normal("")),
)
_case(
    "broadcast_legacy",
    "stablehlo.broadcast",
    """
    func.func public @main(%arg0: tensor<4xf32>) -> tensor<2x4xf32> {
      %0 = stablehlo.broadcast %arg0, sizes = [2] : (tensor<4xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
    """,
    _inputs(normal("4")),
)
_case(
    "slice",
    "stablehlo.slice",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.slice %arg0 [1:3, 0:4:2] : (tensor<3x4xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }
    """,
    _inputs(normal(specials=True)),
)
_case(
    "dynamic_slice",
    "stablehlo.dynamic_slice",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %i: tensor<i32>, %j: tensor<i32>)
        -> tensor<2x2xf32> {
      %0 = stablehlo.dynamic_slice %arg0, %i, %j, sizes = [2, 2]
          : (tensor<3x4xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }
    """,
    _inputs(normal(specials=True), ints("", 0, 2), ints("", 0, 3)),
)
_case(
    "dynamic_update_slice",
    "stablehlo.dynamic_update_slice",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %u: tensor<2x2xf32>, %i: tensor<i32>,
                           %j: tensor<i32>) -> tensor<3x4xf32> {
      %0 = stablehlo.dynamic_update_slice %arg0, %u, %i, %j
          : (tensor<3x4xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True), loguniform("2x2", signed=True), ints("", 0, 2), ints("", 0, 3)),
    note="operand and update at unrelated magnitudes",
)
_case(
    "gather_rows",
    "stablehlo.gather",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %idx: tensor<5x1xi32>) -> tensor<5x4xf32> {
      %0 = "stablehlo.gather"(%arg0, %idx) <{dimension_numbers = #stablehlo.gather<
          offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
          index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>}>
          : (tensor<3x4xf32>, tensor<5x1xi32>) -> tensor<5x4xf32>
      return %0 : tensor<5x4xf32>
    }
    """,
    _inputs(normal(specials=True), ints("5x1", 0, 3)),
)
_case(
    "gather_points",
    "stablehlo.gather",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %idx: tensor<5x2xi32>) -> tensor<5xf32> {
      %0 = "stablehlo.gather"(%arg0, %idx) <{dimension_numbers = #stablehlo.gather<
          collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>,
          indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}>
          : (tensor<3x4xf32>, tensor<5x2xi32>) -> tensor<5xf32>
      return %0 : tensor<5xf32>
    }
    """,
    _inputs(
        normal(),
        lambda rng: np.stack([rng.integers(0, 3, 5), rng.integers(0, 4, 5)], 1).astype(np.int32),
    ),
)
_SCATTER = """
    func.func public @main(%arg0: tensor<3x4xf32>, %idx: tensor<{n}x1xi32>, %u: tensor<{n}x4xf32>)
        -> tensor<3x4xf32> {{
      %0 = "stablehlo.scatter"(%arg0, %idx, %u) <{{indices_are_sorted = false,
          scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1],
          inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>,
          unique_indices = false}}> ({{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        {body}
      }}) : (tensor<3x4xf32>, tensor<{n}x1xi32>, tensor<{n}x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }}
"""
_case(
    "scatter_add",
    "stablehlo.scatter",
    _SCATTER.format(
        n=4,
        body="%1 = stablehlo.add %a, %b : tensor<f32>\n        stablehlo.return %1 : tensor<f32>",
    ),
    _inputs(normal(specials=True), ints("4x1", 0, 3), loguniform("4x4", signed=True)),
    note="duplicate indices accumulate; updates at other magnitudes than the operand",
)
_case(
    "scatter_set",
    "stablehlo.scatter",
    _SCATTER.format(n=2, body="stablehlo.return %b : tensor<f32>"),
    _inputs(
        normal(specials=True),
        lambda rng: distinct(2, 3)(rng).reshape(2, 1),
        loguniform("2x4", signed=True),
    ),
)
_case(
    "concatenate",
    "stablehlo.concatenate",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<3x2xf32>, %c: tensor<3x1xf32>)
        -> tensor<3x7xf32> {
      %0 = stablehlo.concatenate %a, %b, %c, dim = 1
          : (tensor<3x4xf32>, tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x7xf32>
      return %0 : tensor<3x7xf32>
    }
    """,
    _inputs(normal(specials=True), loguniform("3x2", signed=True), normal("3x1", std=1e3)),
)
_case(
    "pad",
    "stablehlo.pad",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %v: tensor<f32>) -> tensor<6x6xf32> {
      %0 = stablehlo.pad %arg0, %v, low = [1, 0], high = [0, 2], interior = [1, 0]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<6x6xf32>
      return %0 : tensor<6x6xf32>
    }
    """,
    _inputs(normal(specials=True), loguniform("", signed=True)),
    note="the padding value is an argument with its own scale",
)
_case(
    "pad_constant_negative",
    "stablehlo.pad",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<4x4xf32> {
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %0 = stablehlo.pad %arg0, %cst, low = [2, -1], high = [-1, 1], interior = [0, 0]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "reverse",
    "stablehlo.reverse",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.reverse %arg0, dims = [0, 1] : tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
)
_case(
    "iota_add",
    "stablehlo.iota",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.iota dim = 1 : tensor<3x4xf32>
      %1 = stablehlo.add %arg0, %0 : tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=1e3)),
)
_case(
    "iota_only",
    "stablehlo.iota",
    """
    func.func public @main() -> (tensor<3x4xf32>, tensor<5xi32>) {
      %0 = stablehlo.iota dim = 0 : tensor<3x4xf32>
      %1 = stablehlo.iota dim = 0 : tensor<5xi32>
      return %0, %1 : tensor<3x4xf32>, tensor<5xi32>
    }
    """,
    _inputs(),
)
_case(
    "get_dimension_size",
    "stablehlo.get_dimension_size",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<i32>, tensor<3x4xf32>) {
      %0 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<3x4xf32>) -> tensor<i32>
      %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<f32>
      %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      %3 = stablehlo.divide %arg0, %2 : tensor<3x4xf32>
      return %0, %3 : tensor<i32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "tuple",
    ("stablehlo.tuple", "stablehlo.get_tuple_element"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<i32>)
        -> (tensor<3x4xf32>, tensor<i32>) {
      %0 = stablehlo.tuple %arg0, %arg1 : tuple<tensor<3x4xf32>, tensor<i32>>
      %1 = stablehlo.get_tuple_element %0[0] : (tuple<tensor<3x4xf32>, tensor<i32>>)
          -> tensor<3x4xf32>
      %2 = stablehlo.get_tuple_element %0[1] : (tuple<tensor<3x4xf32>, tensor<i32>>)
          -> tensor<i32>
      return %1, %2 : tensor<3x4xf32>, tensor<i32>
    }
    """,
    _inputs(normal(), ints("", 0, 10)),
)

# --------------------------------------------------------------------------- constants

_case(
    "constant_splat",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %cst = stablehlo.constant dense<1.000000e-01> : tensor<f32>
      %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      %1 = stablehlo.multiply %arg0, %0 : tensor<3x4xf32>
      %c = stablehlo.constant dense<2.500000e+00> : tensor<3x4xf32>
      %2 = stablehlo.add %arg0, %c : tensor<3x4xf32>
      return %1, %2 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
)
_case(
    "constant_non_splat",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<[[1.0e-03, -2.0, 3.5, 0.0], [1.0e+03, -7.25, 0.125, 6.0e+04],
                                     [-1.0e-06, 9.0, -0.0, 4.0]]> : tensor<3x4xf32>
      %0 = stablehlo.add %arg0, %c : tensor<3x4xf32>
      %1 = stablehlo.multiply %arg0, %c : tensor<3x4xf32>
      return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "constant_specials_output",
    "stablehlo.constant",
    """
    func.func public @main() -> (tensor<8xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>) {
      %0 = stablehlo.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, -0.000000e+00,
                                     0.000000e+00, 1.000000e-30, 1.000000e+30, 1.000000e+00]>
          : tensor<8xf32>
      %1 = stablehlo.constant dense<0x7FC00000> : tensor<2x2xf32>
      %2 = stablehlo.constant dense<0.000000e+00> : tensor<2x2xf32>
      %3 = stablehlo.constant dense<1.000000e-30> : tensor<f32>
      return %0, %1, %2, %3 : tensor<8xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>
    }
    """,
    _inputs(),
    note="NaN / Inf / zero constants must not turn into an infinite or zero scale",
)
_case(
    "constant_specials_mul",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, 0.000000e+00]>
          : tensor<4xf32>
      %0 = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
      %1 = stablehlo.multiply %arg0, %0 : tensor<3x4xf32>
      %2 = stablehlo.add %arg0, %0 : tensor<3x4xf32>
      return %1, %2 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "constant_tiny",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<1.000000e-30> : tensor<3x4xf32>
      %0 = stablehlo.multiply %arg0, %c : tensor<3x4xf32>
      %t = stablehlo.constant dense<[1.0e-30, 2.0e-30, -3.0e-30, 1.0e-25]> : tensor<4xf32>
      %1 = stablehlo.broadcast_in_dim %t, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
      %2 = stablehlo.add %0, %1 : tensor<3x4xf32>
      return %0, %2 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "constant_zero",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %z = stablehlo.constant dense<0.000000e+00> : tensor<3x4xf32>
      %0 = stablehlo.multiply %arg0, %z : tensor<3x4xf32>
      %1 = stablehlo.add %arg0, %z : tensor<3x4xf32>
      return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="x * 0 is 0 (NaN for NaN / Inf), x + 0 is x",
)
_case(
    "constant_power_of_two",
    "stablehlo.constant",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %c = stablehlo.constant dense<[[0.5, 2.0, 4.0, 1024.0], [0.25, 1.0, 8.0, 0.0625],
                                     [64.0, 0.125, 1.0, 2.0]]> : tensor<3x4xf32>
      %0 = stablehlo.multiply %arg0, %c : tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)

# --------------------------------------------------------------------------- dot / conv

_case(
    "dot_general_matmul",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0],
          precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    }
    """,
    _inputs(normal(), normal("4x5", std=1e-3)),
)
_case(
    "dot_general_specials",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
          : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    }
    """,
    _inputs(normal(specials=(NAN, INF)), normal("4x5")),
)
_case(
    "dot_general_batch",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
      %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1],
          precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>)
          -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32>
    }
    """,
    _inputs(normal("2x3x4"), normal("2x4x5")),
)
_case(
    "dot_general_two_contracting",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<2x5xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1, 2] x [0, 1],
          precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf32>, tensor<3x4x5xf32>)
          -> tensor<2x5xf32>
      return %0 : tensor<2x5xf32>
    }
    """,
    _inputs(normal("2x3x4"), normal("3x4x5")),
)
_case(
    "dot_general_vectors",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<f32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0],
          precision = [DEFAULT, DEFAULT] : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    """,
    _inputs(normal("4"), normal("4")),
)
_case(
    "dot_general_transposed_highest",
    "stablehlo.dot_general",
    """
    func.func public @main(%a: tensor<4x3xf32>, %b: tensor<5x4xf32>) -> tensor<3x5xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [0] x [1],
          precision = [HIGHEST, HIGHEST] : (tensor<4x3xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    }
    """,
    _inputs(normal("4x3"), normal("5x4", std=1e4)),
)
_case(
    "dot_legacy",
    "stablehlo.dot",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
      %0 = stablehlo.dot %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    }
    """,
    _inputs(normal(), normal("4x5")),
)
_case(
    "convolution_nhwc_same",
    "stablehlo.convolution",
    """
    func.func public @main(%x: tensor<1x5x5x2xf32>, %w: tensor<3x3x2x3xf32>)
        -> tensor<1x5x5x3xf32> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
          window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1],
          rhs_dilate = [1, 1], reverse = [false, false]}
          {batch_group_count = 1 : i64, feature_group_count = 1 : i64,
           precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}
          : (tensor<1x5x5x2xf32>, tensor<3x3x2x3xf32>) -> tensor<1x5x5x3xf32>
      return %0 : tensor<1x5x5x3xf32>
    }
    """,
    _inputs(normal("1x5x5x2"), normal("3x3x2x3", std=0.1)),
)
_case(
    "convolution_strided_dilated",
    "stablehlo.convolution",
    """
    func.func public @main(%x: tensor<2x6x6x2xf32>, %w: tensor<2x2x2x4xf32>)
        -> tensor<2x2x2x4xf32> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
          window = {stride = [2, 2], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1],
          rhs_dilate = [2, 2]}
          {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
          : (tensor<2x6x6x2xf32>, tensor<2x2x2x4xf32>) -> tensor<2x2x2x4xf32>
      return %0 : tensor<2x2x2x4xf32>
    }
    """,
    _inputs(normal("2x6x6x2"), normal("2x2x2x4")),
)

# --------------------------------------------------------------------------- reductions

_REDUCE = """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<{out}xf32> {{
      %init = stablehlo.constant dense<{init}> : tensor<f32>
      %0 = stablehlo.reduce(%arg0 init: %init) applies stablehlo.{op} across dimensions = [{dims}]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<{out}xf32>
      return %0 : tensor<{out}xf32>
    }}
"""


def _reduce(op: str, init: str, dims: str, out: str) -> str:
    return _REDUCE.format(op=op, init=init, dims=dims, out=out).replace(
        "tensor<xf32>", "tensor<f32>"
    )


_case(
    "reduce_add",
    "stablehlo.reduce",
    _reduce("add", "0.000000e+00", "1", "3"),
    _inputs(normal()),
)
_case(
    "reduce_add_specials",
    "stablehlo.reduce",
    _reduce("add", "0.000000e+00", "0", "4"),
    _inputs(normal(specials=(NAN, INF, -INF, INF, -0.0))),
    note="inf + -inf in one column makes NaN",
)
_case(
    "reduce_add_all",
    "stablehlo.reduce",
    _reduce("add", "0.000000e+00", "0, 1", ""),
    _inputs(loguniform(lo_exp=-4, hi_exp=4)),
)
_case(
    "reduce_max",
    "stablehlo.reduce",
    _reduce("maximum", "0xFF800000", "1", "3"),
    _inputs(normal(specials=True)),
)
_case(
    "reduce_min",
    "stablehlo.reduce",
    _reduce("minimum", "0x7F800000", "0", "4"),
    _inputs(normal(specials=(-0.0, 0.0, INF))),
)
_case(
    "reduce_multiply",
    "stablehlo.reduce",
    _reduce("multiply", "1.000000e+00", "1", "3"),
    _inputs(loguniform(lo_exp=-4, hi_exp=4, signed=True)),
    note="the scale of a product over N elements is s**N",
)
_case(
    "reduce_add_init_argument",
    "stablehlo.reduce",
    """
    func.func public @main(%arg0: tensor<3x4xf32>, %init: tensor<f32>) -> tensor<3xf32> {
      %0 = stablehlo.reduce(%arg0 init: %init) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }
    """,
    _inputs(normal(), normal("", std=100.0)),
    note="a non-zero init value with its own scale",
)
_case(
    "reduce_argmax",
    ("stablehlo.reduce", "stablehlo.compare", "stablehlo.select", "stablehlo.or", "stablehlo.and"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
      %0 = stablehlo.iota dim = 1 : tensor<3x4xi32>
      %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %c = stablehlo.constant dense<0> : tensor<i32>
      %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1]
          : (tensor<3x4xf32>, tensor<3x4xi32>, tensor<f32>, tensor<i32>)
          -> (tensor<3xf32>, tensor<3xi32>)
       reducer(%a: tensor<f32>, %b: tensor<f32>) (%ia: tensor<i32>, %ib: tensor<i32>)  {
        %2 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %3 = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %4 = stablehlo.or %2, %3 : tensor<i1>
        %5 = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %6 = stablehlo.compare LT, %ia, %ib, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        %7 = stablehlo.and %5, %6 : tensor<i1>
        %8 = stablehlo.or %4, %7 : tensor<i1>
        %9 = stablehlo.select %4, %a, %b : tensor<i1>, tensor<f32>
        %10 = stablehlo.select %8, %ia, %ib : tensor<i1>, tensor<i32>
        stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
      }
      return %1#0, %1#1 : tensor<3xf32>, tensor<3xi32>
    }
    """,
    _inputs(halves(bound=1, specials=(NAN, -INF))),
    note="multi-operand reduce: ties pick the lower index, NaN wins",
)
_RW = """
    func.func public @main(%arg0: tensor<1x4x4x2xf32>) -> tensor<1x{o}x{o}x2xf32> {{
      %init = stablehlo.constant dense<{init}> : tensor<f32>
      %0 = "stablehlo.reduce_window"(%arg0, %init) <{{
          padding = dense<{pad}> : tensor<4x2xi64>,
          window_dimensions = array<i64: 1, 2, 2, 1>,
          window_strides = array<i64: 1, {s}, {s}, 1>}}> ({{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.{op} %a, %b : tensor<f32>
        stablehlo.return %1 : tensor<f32>
      }}) : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x{o}x{o}x2xf32>
      return %0 : tensor<1x{o}x{o}x2xf32>
    }}
"""
_case(
    "reduce_window_add",
    "stablehlo.reduce_window",
    _RW.format(init="0.000000e+00", op="add", pad="0", s=2, o=2),
    _inputs(normal("1x4x4x2")),
)
_case(
    "reduce_window_add_padded_overlapping",
    "stablehlo.reduce_window",
    _RW.format(init="0.000000e+00", op="add", pad="[[0, 0], [1, 0], [0, 1], [0, 0]]", s=1, o=4),
    _inputs(normal("1x4x4x2", specials=True)),
)
_case(
    "reduce_window_max",
    "stablehlo.reduce_window",
    _RW.format(init="0xFF800000", op="maximum", pad="0", s=2, o=2),
    _inputs(normal("1x4x4x2", specials=True)),
)
# The gradient of max pooling over 2x2 windows: g has n x n windows, at stride s.
_SELECT_AND_SCATTER = """
    func.func public @main(%x: tensor<1x4x4x2xf32>, %g: tensor<1x{n}x{n}x2xf32>)
        -> tensor<1x4x4x2xf32> {{
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %0 = "stablehlo.select_and_scatter"(%x, %g, %zero) <{{
          padding = dense<0> : tensor<4x2xi64>,
          window_dimensions = array<i64: 1, 2, 2, 1>,
          window_strides = array<i64: 1, {s}, {s}, 1>}}> ({{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      }}, {{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %1 : tensor<f32>
      }}) : (tensor<1x4x4x2xf32>, tensor<1x{n}x{n}x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
      return %0 : tensor<1x4x4x2xf32>
    }}
    """
_case(
    "select_and_scatter",
    "stablehlo.select_and_scatter",
    _SELECT_AND_SCATTER.format(n=2, s=2),
    _inputs(normal("1x4x4x2"), loguniform("1x2x2x2", signed=True)),
    note="max-pool gradient: selection on x, scatter of g; x and g scales unrelated",
)
_case(
    "select_and_scatter_overlapping",
    "stablehlo.select_and_scatter",
    _SELECT_AND_SCATTER.format(n=3, s=1),
    _inputs(normal("1x4x4x2"), normal("1x3x3x2")),
    note="overlapping windows: one position can receive several gradients",
)

# --------------------------------------------------------------------------- sort / top_k

_case(
    "sort",
    "stablehlo.sort",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      }) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=(INF, -INF, -0.0))),
)
_case(
    "sort_jax_totalorder",
    "stablehlo.sort",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %nan = stablehlo.constant dense<0x7FC00000> : tensor<f32>
        %1 = stablehlo.compare EQ, %a, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %2 = stablehlo.select %1, %zero, %a : tensor<i1>, tensor<f32>
        %3 = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %4 = stablehlo.select %3, %nan, %2 : tensor<i1>, tensor<f32>
        %5 = stablehlo.compare EQ, %b, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %6 = stablehlo.select %5, %zero, %b : tensor<i1>, tensor<f32>
        %7 = stablehlo.compare NE, %b, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %8 = stablehlo.select %7, %nan, %6 : tensor<i1>, tensor<f32>
        %9 = stablehlo.compare LT, %4, %8, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %9 : tensor<i1>
      }) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="jnp.sort's comparator: constants inside the region, NaN sorted last",
)
_case(
    "sort_key_value",
    "stablehlo.sort",
    """
    func.func public @main(%k: tensor<3x4xf32>, %v: tensor<3x4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %0:2 = "stablehlo.sort"(%k, %v) <{dimension = 1 : i64, is_stable = true}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>, %va: tensor<f32>, %vb: tensor<f32>):
        %1 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      }) : (tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
      return %0#0, %0#1 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(), loguniform(signed=True, specials=True)),
)
_case(
    "sort_argsort",
    "stablehlo.sort",
    """
    func.func public @main(%k: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xi32>) {
      %i = stablehlo.iota dim = 1 : tensor<3x4xi32>
      %0:2 = "stablehlo.sort"(%k, %i) <{dimension = 1 : i64, is_stable = true}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>, %ia: tensor<i32>, %ib: tensor<i32>):
        %1 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      }) : (tensor<3x4xf32>, tensor<3x4xi32>) -> (tensor<3x4xf32>, tensor<3x4xi32>)
      return %0#0, %0#1 : tensor<3x4xf32>, tensor<3x4xi32>
    }
    """,
    _inputs(halves(bound=1)),
    note="ties are broken by stability: scaled keys must compare exactly as the originals",
)
_case(
    "top_k",
    "chlo.top_k",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi32>) {
      %values, %indices = chlo.top_k(%arg0, k = 2)
          : tensor<3x4xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
      return %values, %indices : tensor<3x2xf32>, tensor<3x2xi32>
    }
    """,
    _inputs(normal(specials=(INF, -INF))),
)

# --------------------------------------------------------------------------- control flow

_case(
    "while_dot_tanh",
    ("stablehlo.while", "stablehlo.dot_general", "stablehlo.tanh"),
    """
    func.func public @main(%w: tensor<4x4xf32>, %x: tensor<3x4xf32>)
        -> (tensor<i32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<0> : tensor<i32>
      %0:3 = stablehlo.while(%iw = %w, %i = %c, %acc = %x)
          : tensor<4x4xf32>, tensor<i32>, tensor<3x4xf32>
      cond {
        %n = stablehlo.constant dense<3> : tensor<i32>
        %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %1 = stablehlo.add %i, %one : tensor<i32>
        %2 = stablehlo.dot_general %acc, %iw, contracting_dims = [1] x [0]
            : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
        %3 = stablehlo.tanh %2 : tensor<3x4xf32>
        stablehlo.return %iw, %1, %3 : tensor<4x4xf32>, tensor<i32>, tensor<3x4xf32>
      }
      return %0#1, %0#2 : tensor<i32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal("4x4", std=0.5), normal()),
)
_case(
    "while_square_accumulate",
    ("stablehlo.while", "stablehlo.multiply", "stablehlo.add"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %n: tensor<i32>)
        -> (tensor<3x4xf32>, tensor<i32>) {
      %c = stablehlo.constant dense<0> : tensor<i32>
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<3x4xf32>
      %0:3 = stablehlo.while(%i = %c, %acc = %zero, %ix = %x)
          : tensor<i32>, tensor<3x4xf32>, tensor<3x4xf32>
      cond {
        %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %1 = stablehlo.add %i, %one : tensor<i32>
        %half = stablehlo.constant dense<0.75> : tensor<3x4xf32>
        %2 = stablehlo.multiply %acc, %half : tensor<3x4xf32>
        %3 = stablehlo.add %2, %ix : tensor<3x4xf32>
        %4 = stablehlo.multiply %ix, %ix : tensor<3x4xf32>
        stablehlo.return %1, %3, %4 : tensor<i32>, tensor<3x4xf32>, tensor<3x4xf32>
      }
      return %0#1, %0#0 : tensor<3x4xf32>, tensor<i32>
    }
    """,
    _inputs(uniform(lo=0.5, hi=1.5), ints("", 0, 5)),
    scale_range=(-6, 6),
    note="ix*ix squares the scale each trip (2**(16k) after 4): exponents stay small so that "
    "neither f32 data nor f32 scale overflows",
)
_case(
    "while_decay_dynamic_scale",
    ("stablehlo.while", "stablehlo.multiply", "stablehlo.add"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>, %n: tensor<i32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<0> : tensor<i32>
      %0:3 = stablehlo.while(%i = %c, %acc = %y, %ix = %x)
          : tensor<i32>, tensor<3x4xf32>, tensor<3x4xf32>
      cond {
        %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %1 = stablehlo.add %i, %one : tensor<i32>
        %decay = stablehlo.constant dense<0.75> : tensor<3x4xf32>
        %2 = stablehlo.multiply %acc, %decay : tensor<3x4xf32>
        %3 = stablehlo.add %2, %ix : tensor<3x4xf32>
        %small = stablehlo.constant dense<1.000000e-03> : tensor<3x4xf32>
        %4 = stablehlo.multiply %ix, %small : tensor<3x4xf32>
        stablehlo.return %1, %3, %4 : tensor<i32>, tensor<3x4xf32>, tensor<3x4xf32>
      }
      return %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(), normal(std=1e3), ints("", 0, 6)),
    note="loop-carried values whose scales drift apart each trip; data-dependent trip count",
)
_case(
    "while_select_new_or_old",
    ("stablehlo.while", "stablehlo.select", "stablehlo.compare"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %z: tensor<3x4xf32>, %t: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %c = stablehlo.constant dense<0> : tensor<i32>
      %0:2 = stablehlo.while(%i = %c, %ix = %x) : tensor<i32>, tensor<3x4xf32>
      cond {
        %n = stablehlo.constant dense<8> : tensor<i32>
        %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %1 : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %1 = stablehlo.add %i, %one : tensor<i32>
        %2 = stablehlo.multiply %ix, %z : tensor<3x4xf32>
        %abs = stablehlo.abs %2 : tensor<3x4xf32>
        %go = stablehlo.compare LT, %abs, %t, FLOAT
            : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
        %3 = stablehlo.select %go, %2, %ix : tensor<3x4xi1>, tensor<3x4xf32>
        stablehlo.return %1, %3 : tensor<i32>, tensor<3x4xf32>
      }
      return %0#1 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(), uniform(lo=1.5, hi=3.0), uniform(lo=4.0, hi=64.0)),
    note="igamma's series, reduced: a loop-carried select(enabled, new, old) whose branches' "
    "scales differ by the multiplier's every trip; the first branch's scale drifted",
)
_case(
    "case_index",
    "stablehlo.case",
    """
    func.func public @main(%i: tensor<i32>, %x: tensor<3x4xf32>, %y: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %0 = "stablehlo.case"(%i) ({
        %1 = stablehlo.sine %x : tensor<3x4xf32>
        stablehlo.return %1 : tensor<3x4xf32>
      }, {
        %c = stablehlo.constant dense<2.000000e+00> : tensor<3x4xf32>
        %1 = stablehlo.multiply %x, %c : tensor<3x4xf32>
        stablehlo.return %1 : tensor<3x4xf32>
      }, {
        %1 = stablehlo.multiply %x, %y : tensor<3x4xf32>
        stablehlo.return %1 : tensor<3x4xf32>
      }) : (tensor<i32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(ints("", -1, 4), normal(specials=True), loguniform(signed=True)),
    note="an out-of-range index runs the last branch; branches yield different scales",
)
_case(
    "if_predicate",
    "stablehlo.if",
    """
    func.func public @main(%p: tensor<i1>, %x: tensor<3x4xf32>, %y: tensor<3x4xf32>)
        -> tensor<3x4xf32> {
      %0 = "stablehlo.if"(%p) ({
        %1 = stablehlo.add %x, %y : tensor<3x4xf32>
        stablehlo.return %1 : tensor<3x4xf32>
      }, {
        %1 = stablehlo.negate %x : tensor<3x4xf32>
        stablehlo.return %1 : tensor<3x4xf32>
      }) : (tensor<i1>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(bools(""), normal(specials=True), normal()),
    note="branches capture floats from outside and yield different scales",
)
_case(
    "optimization_barrier",
    "stablehlo.optimization_barrier",
    """
    func.func public @main(%x: tensor<3x4xf32>, %i: tensor<i32>)
        -> (tensor<3x4xf32>, tensor<i32>, tensor<3x4xf32>) {
      %c = stablehlo.constant dense<3.000000e+00> : tensor<3x4xf32>
      %0 = stablehlo.multiply %x, %c : tensor<3x4xf32>
      %1:3 = stablehlo.optimization_barrier %x, %i, %0
          : tensor<3x4xf32>, tensor<i32>, tensor<3x4xf32>
      return %1#0, %1#1, %1#2 : tensor<3x4xf32>, tensor<i32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True), ints("", 0, 100)),
)
_case(
    "call_private",
    "func.call",
    """
    func.func public @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = func.call @fma(%x, %y) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      %1 = func.call @fma(%0, %x) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    func.func private @fma(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.multiply %a, %b : tensor<3x4xf32>
      %1 = stablehlo.add %0, %a : tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(), normal()),
    note="one callee, two call sites with different argument scales",
)
_case(
    "call_nested_mixed_types",
    "func.call",
    """
    func.func public @main(%x: tensor<3x4xf32>, %n: tensor<i32>) -> (tensor<3xf32>, tensor<i32>) {
      %0:2 = call @outer(%x, %n) : (tensor<3x4xf32>, tensor<i32>) -> (tensor<3xf32>, tensor<i32>)
      return %0#0, %0#1 : tensor<3xf32>, tensor<i32>
    }
    func.func private @outer(%x: tensor<3x4xf32>, %n: tensor<i32>)
        -> (tensor<3xf32>, tensor<i32>) {
      %0 = call @inner(%x) : (tensor<3x4xf32>) -> tensor<3xf32>
      %1 = stablehlo.add %n, %n : tensor<i32>
      return %0, %1 : tensor<3xf32>, tensor<i32>
    }
    func.func private @inner(%x: tensor<3x4xf32>) -> tensor<3xf32> {
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %cst) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %1 = stablehlo.exponential %0 : tensor<3xf32>
      return %1 : tensor<3xf32>
    }
    """,
    _inputs(normal(), ints("", 0, 100)),
)
_case(
    "custom_call_lapack_cholesky",
    "stablehlo.custom_call",
    """
    func.func public @main(%arg0: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>) {
      %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {
          mhlo.backend_config = {uplo = 76 : ui8},
          mhlo.frontend_attributes = {num_batch_dims = "0"},
          operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
          output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0],
                                    operand_index = 0, operand_tuple_indices = []>],
          result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]}
          : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>)
      return %0#0, %0#1 : tensor<3x3xf32>, tensor<i32>
    }
    """,
    _inputs(spd(3)),
    note="jaxlib's LAPACK FFI target: an op without a rule, to be unscaled, applied and re-encoded",
    setup=_init_lapack,
)
_case(
    "custom_call_sharding",
    "stablehlo.custom_call",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"}
          : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="the sharding annotation custom call XLA itself understands",
)
_case(
    "sdy_sharding_constraint",
    "sdy.sharding_constraint",
    """
    sdy.mesh @mesh = <["x"=1]>
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]> : tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="with_sharding_constraint under Shardy (a mesh of one device here)",
)
_case(
    "sdy_manual_computation_collectives",
    ("sdy.manual_computation", "stablehlo.all_reduce", "stablehlo.all_gather",
     "stablehlo.reduce_scatter", "stablehlo.all_to_all", "stablehlo.collective_permute"),
    """
    sdy.mesh @mesh = <["x"=1]>
    func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>)
        -> (tensor<4x4xf32>, tensor<4x4xf32>) {
      %0:2 = sdy.manual_computation(%arg0, %arg1)
          in_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>]
          out_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>] manual_axes={"x"}
          (%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) {
        %1 = stablehlo.multiply %a, %b : tensor<4x4xf32>
        %2 = "stablehlo.all_reduce"(%1) <{
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids}> ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %s = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %3 = "stablehlo.all_gather"(%2) <{
            all_gather_dim = 0 : i64,
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids}>
            : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %4 = "stablehlo.collective_permute"(%b) <{
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>}>
            : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %5 = "stablehlo.reduce_scatter"(%3) <{
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            replica_groups = dense<[[0]]> : tensor<1x1xi64>, scatter_dimension = 0 : i64,
            use_global_device_ids}> ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %s = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %6 = "stablehlo.all_to_all"(%4) <{
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            concat_dimension = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>,
            split_count = 1 : i64, split_dimension = 0 : i64}>
            : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %7 = stablehlo.add %5, %6 : tensor<4x4xf32>
        sdy.return %7, %4 : tensor<4x4xf32>, tensor<4x4xf32>
      } : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
      return %0#0, %0#1 : tensor<4x4xf32>, tensor<4x4xf32>
    }
    """,
    _inputs(normal("4x4", specials=True), normal("4x4")),
    note="shard_map's region with collectives (a mesh of one device: the harness runs on one)",
)
_case(
    "composite",
    "stablehlo.composite",
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.composite "my.softplus" %arg0 {decomposition = @softplus}
          : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    func.func private @softplus(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.exponential %arg0 : tensor<3x4xf32>
      %1 = stablehlo.log_plus_one %0 : tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=3.0)),
)
_case(
    "map",
    "stablehlo.map",
    """
    func.func public @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = "stablehlo.map"(%x, %y) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.multiply %a, %b : tensor<f32>
        %2 = stablehlo.add %1, %a : tensor<f32>
        stablehlo.return %2 : tensor<f32>
      }) {dimensions = array<i64: 0, 1>} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True), normal()),
)
_case(
    "rng_bit_generator_uniform",
    (
        "stablehlo.rng_bit_generator",
        "stablehlo.shift_right_logical",
        "stablehlo.or",
        "stablehlo.bitcast_convert",
    ),
    """
    func.func public @main(%key: tensor<4xui32>, %x: tensor<3x4xf32>)
        -> (tensor<4xui32>, tensor<3x4xf32>) {
      %0 = stablehlo.reshape %key : (tensor<4xui32>) -> tensor<2x2xui32>
      %1 = stablehlo.bitcast_convert %0 : (tensor<2x2xui32>) -> tensor<2xui64>
      %state, %bits = stablehlo.rng_bit_generator %1, algorithm = THREE_FRY
          : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>)
      %2 = stablehlo.bitcast_convert %state : (tensor<2xui64>) -> tensor<2x2xui32>
      %3 = stablehlo.reshape %2 : (tensor<2x2xui32>) -> tensor<4xui32>
      %nine = stablehlo.constant dense<9> : tensor<3x4xui32>
      %4 = stablehlo.shift_right_logical %bits, %nine : tensor<3x4xui32>
      %one_bits = stablehlo.constant dense<1065353216> : tensor<3x4xui32>
      %5 = stablehlo.or %4, %one_bits : tensor<3x4xui32>
      %6 = stablehlo.bitcast_convert %5 : (tensor<3x4xui32>) -> tensor<3x4xf32>
      %one = stablehlo.constant dense<1.000000e+00> : tensor<3x4xf32>
      %7 = stablehlo.subtract %6, %one : tensor<3x4xf32>
      %8 = stablehlo.multiply %7, %x : tensor<3x4xf32>
      return %3, %8 : tensor<4xui32>, tensor<3x4xf32>
    }
    """,
    _inputs(ints("4", 0, 2**31, dtype=np.uint32), normal()),
    note="ui64 state travels as 4 x ui32 because jax (x64 off) truncates 64-bit inputs",
)

# --------------------------------------------------------------------------- linear algebra

_case(
    "cholesky",
    "stablehlo.cholesky",
    """
    func.func public @main(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
      %0 = stablehlo.cholesky %arg0, lower = true : tensor<3x3xf32>
      return %0 : tensor<3x3xf32>
    }
    """,
    _inputs(spd(3)),
)
_case(
    "triangular_solve",
    "stablehlo.triangular_solve",
    """
    func.func public @main(%a: tensor<3x3xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true,
          unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>}
          : (tensor<3x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    """,
    _inputs(lower_triangular(3), normal()),
)
_case(
    "batch_norm_inference",
    "stablehlo.batch_norm_inference",
    """
    func.func public @main(%x: tensor<4x3xf32>, %s: tensor<3xf32>, %o: tensor<3xf32>,
                           %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<4x3xf32> {
      %0 = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v)
          {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
          : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
          -> tensor<4x3xf32>
      return %0 : tensor<4x3xf32>
    }
    """,
    _inputs(normal("4x3"), normal("3"), normal("3"), normal("3"), uniform("3", 0.5, 2.0)),
)
_case(
    "batch_norm_training",
    "stablehlo.batch_norm_training",
    """
    func.func public @main(%x: tensor<4x3xf32>, %s: tensor<3xf32>, %o: tensor<3xf32>)
        -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0:3 = "stablehlo.batch_norm_training"(%x, %s, %o)
          {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
          : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
          -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
      return %0#0, %0#1, %0#2 : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>
    }
    """,
    _inputs(normal("4x3", std=3.0), normal("3"), normal("3")),
)
_case(
    "batch_norm_grad",
    "stablehlo.batch_norm_grad",
    """
    func.func public @main(%x: tensor<4x3xf32>, %s: tensor<3xf32>, %m: tensor<3xf32>,
                           %v: tensor<3xf32>, %g: tensor<4x3xf32>)
        -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0:3 = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %g)
          {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
          : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4x3xf32>)
          -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
      return %0#0, %0#1, %0#2 : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>
    }
    """,
    _inputs(normal("4x3"), normal("3"), normal("3"), uniform("3", 0.5, 2.0), normal("4x3")),
)

# --------------------------------------------------------------------------- collectives

_case(
    "collectives_single_replica",
    (
        "stablehlo.all_reduce",
        "stablehlo.all_gather",
        "stablehlo.collective_permute",
        "stablehlo.reduce_scatter",
        "stablehlo.all_to_all",
    ),
    """
    func.func public @main(%arg0: tensor<3x4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
      %0 = "stablehlo.all_reduce"(%arg0) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %1 = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %1 : tensor<f32>
      }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %2 = "stablehlo.all_gather"(%0) {all_gather_dim = 1 : i64,
          replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %3 = "stablehlo.collective_permute"(%arg0)
          {source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>}
          : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %4 = "stablehlo.reduce_scatter"(%3) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %5 = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %5 : tensor<f32>
      }) {scatter_dimension = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>}
          : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %6 = "stablehlo.all_to_all"(%4) {split_dimension = 1 : i64, concat_dimension = 0 : i64,
          split_count = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>}
          : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %2, %3, %6 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(specials=True)),
    note="one replica only: checks the plumbing, not the cross-device scale agreement",
)
_case(
    "replica_and_partition_id",
    ("stablehlo.replica_id", "stablehlo.partition_id"),
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.replica_id : tensor<ui32>
      %1 = stablehlo.partition_id : tensor<ui32>
      %2 = stablehlo.add %0, %1 : tensor<ui32>
      %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<f32>
      %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      %5 = stablehlo.add %x, %4 : tensor<3x4xf32>
      return %5 : tensor<3x4xf32>
    }
    """,
    _inputs(normal()),
)

# --------------------------------------------------------------------------- complex

_case(
    "complex_parts",
    ("stablehlo.complex", "stablehlo.real", "stablehlo.imag"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %0 = stablehlo.complex %x, %y : tensor<3x4xcomplex<f32>>
      %1 = stablehlo.multiply %0, %0 : tensor<3x4xcomplex<f32>>
      %2 = stablehlo.real %1 : (tensor<3x4xcomplex<f32>>) -> tensor<3x4xf32>
      %3 = stablehlo.imag %1 : (tensor<3x4xcomplex<f32>>) -> tensor<3x4xf32>
      return %2, %3 : tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(normal(), normal()),
    note="complex intermediates have no scale; only the f32 ends are scaled",
)
_case(
    "fft_roundtrip",
    "stablehlo.fft",
    """
    func.func public @main(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x3xf32>) {
      %0 = stablehlo.fft %x, type = RFFT, length = [4]
          : (tensor<3x4xf32>) -> tensor<3x3xcomplex<f32>>
      %1 = stablehlo.fft %0, type = IRFFT, length = [4]
          : (tensor<3x3xcomplex<f32>>) -> tensor<3x4xf32>
      %2 = stablehlo.abs %0 : (tensor<3x3xcomplex<f32>>) -> tensor<3x3xf32>
      return %1, %2 : tensor<3x4xf32>, tensor<3x3xf32>
    }
    """,
    _inputs(normal()),
)
_case(
    "einsum_legacy",
    "stablehlo.einsum",
    """
    func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
      %0 = stablehlo.einsum %a, %b, config = "ab,bc->ac"
          : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    }
    """,
    _inputs(normal(), normal("4x5")),
)

# --------------------------------------------------------------------------- chlo

for _op, _spec in [
    ("chlo.erf", normal(std=2.0, specials=True)),
    ("chlo.erfc", normal(std=2.0, specials=True)),
    ("chlo.erf_inv", uniform(lo=-0.99, hi=0.99, specials=(NAN, 1.0, -1.0, 0.0, -0.0, 2.0))),
    ("chlo.lgamma", uniform(lo=0.1, hi=6.0, specials=(-2.5, -0.5, 1.0, 2.0, 0.0, INF, NAN))),
    ("chlo.digamma", uniform(lo=0.1, hi=6.0, specials=(-2.5, -0.5, 1.0, INF, NAN))),
    ("chlo.sinh", normal(std=3.0, specials=True)),
    ("chlo.cosh", normal(std=3.0, specials=True)),
    ("chlo.asin", uniform(lo=-1.0, hi=1.0, specials=(NAN, 1.0, -1.0, -0.0, 2.0))),
    ("chlo.acos", uniform(lo=-1.0, hi=1.0, specials=(NAN, 1.0, -1.0, -0.0, 2.0))),
    ("chlo.atan", loguniform(lo_exp=-10, hi_exp=10, signed=True, specials=True)),
    ("chlo.asinh", loguniform(lo_exp=-10, hi_exp=10, signed=True, specials=True)),
    ("chlo.acosh", uniform(lo=1.0, hi=6.0, specials=(NAN, INF, 1.0, 0.5, -1.0))),
    ("chlo.atanh", uniform(lo=-0.99, hi=0.99, specials=(NAN, 1.0, -1.0, -0.0, 2.0))),
    ("chlo.tan", uniform(lo=-1.4, hi=1.4, specials=True)),
    ("chlo.square", loguniform(lo_exp=-10, hi_exp=10, signed=True, specials=True)),
    ("chlo.bessel_i1e", normal(std=3.0, specials=True)),
]:
    _case(f"chlo_{_name(_op)}", _op, _unary(_op), _inputs(_spec))

_case(
    "chlo_is_inf",
    ("chlo.is_inf", "chlo.is_pos_inf", "chlo.is_neg_inf"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>)
        -> (tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>) {
      %0 = chlo.is_inf %arg0 : tensor<3x4xf32> -> tensor<3x4xi1>
      %1 = chlo.is_pos_inf %arg0 : tensor<3x4xf32> -> tensor<3x4xi1>
      %2 = chlo.is_neg_inf %arg0 : tensor<3x4xf32> -> tensor<3x4xi1>
      return %0, %1, %2 : tensor<3x4xi1>, tensor<3x4xi1>, tensor<3x4xi1>
    }
    """,
    _inputs(loguniform(signed=True, specials=True)),
)
_case(
    "chlo_next_after",
    "chlo.next_after",
    _binary("chlo.next_after"),
    _inputs(normal(specials=True), normal(specials=True)),
    note="a one-ulp step: only exact if computed on the unscaled value",
)
_case(
    "chlo_polygamma",
    "chlo.polygamma",
    _binary("chlo.polygamma"),
    _inputs(lambda rng: rng.integers(0, 3, (3, 4)).astype(F32), uniform(lo=0.5, hi=5.0)),
)
_case(
    "chlo_zeta",
    "chlo.zeta",
    _binary("chlo.zeta"),
    _inputs(uniform(lo=1.5, hi=5.0), uniform(lo=0.5, hi=5.0)),
)
_case(
    "chlo_broadcast_binary",
    (
        "chlo.broadcast_add",
        "chlo.broadcast_subtract",
        "chlo.broadcast_multiply",
        "chlo.broadcast_divide",
        "chlo.broadcast_maximum",
        "chlo.broadcast_minimum",
        "chlo.broadcast_compare",
    ),
    """
    func.func public @main(%x: tensor<3x4xf32>, %r: tensor<4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>,
            tensor<3x4xf32>, tensor<3x4xi1>) {
      %0 = chlo.broadcast_add %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %1 = chlo.broadcast_subtract %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %2 = chlo.broadcast_multiply %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %3 = chlo.broadcast_divide %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %4 = chlo.broadcast_maximum %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %5 = chlo.broadcast_minimum %x, %r : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %6 = chlo.broadcast_compare %x, %r {comparison_direction = #chlo<comparison_direction LT>}
          : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
      return %0, %1, %2, %3, %4, %5, %6
          : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>,
            tensor<3x4xf32>, tensor<3x4xi1>
    }
    """,
    _inputs(normal(specials=True), loguniform("4", signed=True)),
)

# --------------------------------------------------------------------------- mixed families

_case(
    "softmax",
    (
        "stablehlo.reduce",
        "stablehlo.maximum",
        "stablehlo.subtract",
        "stablehlo.exponential",
        "stablehlo.divide",
    ),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
      %2 = stablehlo.maximum %1, %0 : tensor<3xf32>
      %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %4 = stablehlo.subtract %arg0, %3 : tensor<3x4xf32>
      %5 = stablehlo.exponential %4 : tensor<3x4xf32>
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %6 = stablehlo.reduce(%5 init: %zero) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %7 = stablehlo.broadcast_in_dim %6, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %8 = stablehlo.divide %5, %7 : tensor<3x4xf32>
      return %8 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=3.0)),
)
# jax.nn.log_softmax as a private function, as JAX exports it (inlined before scalify).
_LOG_SOFTMAX = """
    func.func private @log_softmax(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %2 = stablehlo.subtract %arg0, %1 : tensor<3x4xf32>
      %3 = stablehlo.exponential %2 : tensor<3x4xf32>
      %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %4 = stablehlo.reduce(%3 init: %cst_1) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %5 = stablehlo.log %4 : tensor<3xf32>
      %6 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %7 = stablehlo.subtract %2, %6 : tensor<3x4xf32>
      return %7 : tensor<3x4xf32>
    }
"""
_case(
    "log_softmax_call",
    ("func.call", "stablehlo.reduce", "stablehlo.exponential", "stablehlo.log"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = call @log_softmax(%arg0) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }""" + _LOG_SOFTMAX,
    _inputs(normal(std=3.0, specials=(-INF,))),
    note="a -inf logit must give -inf, not NaN",
)
_case(
    "logsumexp",
    ("stablehlo.is_finite", "stablehlo.select", "stablehlo.log", "stablehlo.reduce"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3xf32> {
      %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %3 = stablehlo.is_finite %0 : (tensor<3xf32>) -> tensor<3xi1>
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
      %5 = stablehlo.select %3, %0, %zero : tensor<3xi1>, tensor<3xf32>
      %7 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %8 = stablehlo.subtract %arg0, %7 : tensor<3x4xf32>
      %9 = stablehlo.exponential %8 : tensor<3x4xf32>
      %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %10 = stablehlo.reduce(%9 init: %z) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %11 = stablehlo.abs %10 : tensor<3xf32>
      %12 = stablehlo.log %11 : tensor<3xf32>
      %13 = stablehlo.add %12, %5 : tensor<3xf32>
      return %13 : tensor<3xf32>
    }
    """,
    _inputs(normal(std=3.0, specials=(INF, -INF))),
    note="jax.nn.logsumexp: the max is replaced by 0 where it is not finite",
)
_case(
    "layernorm",
    ("stablehlo.reduce", "stablehlo.rsqrt", "stablehlo.divide", "stablehlo.multiply"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>)
        -> tensor<3x4xf32> {
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %n = stablehlo.constant dense<4.000000e+00> : tensor<3xf32>
      %eps = stablehlo.constant dense<9.99999974E-6> : tensor<3xf32>
      %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %1 = stablehlo.divide %0, %n : tensor<3xf32>
      %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %3 = stablehlo.subtract %x, %2 : tensor<3x4xf32>
      %4 = stablehlo.multiply %3, %3 : tensor<3x4xf32>
      %5 = stablehlo.reduce(%4 init: %zero) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %6 = stablehlo.divide %5, %n : tensor<3xf32>
      %7 = stablehlo.add %6, %eps : tensor<3xf32>
      %8 = stablehlo.rsqrt %7 : tensor<3xf32>
      %9 = stablehlo.broadcast_in_dim %8, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %10 = stablehlo.multiply %3, %9 : tensor<3x4xf32>
      %11 = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
      %12 = stablehlo.multiply %10, %11 : tensor<3x4xf32>
      %13 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
      %14 = stablehlo.add %12, %13 : tensor<3x4xf32>
      return %14 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=2.0), normal("4"), normal("4")),
    note="eps = 1e-5 is added to a variance that has its own scale",
)
_case(
    "affine_small_constants",
    ("stablehlo.multiply", "stablehlo.add", "stablehlo.constant"),
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %a = stablehlo.constant dense<1.000000e-01> : tensor<3x4xf32>
      %b = stablehlo.constant dense<9.99999993E-9> : tensor<3x4xf32>
      %0 = stablehlo.multiply %x, %a : tensor<3x4xf32>
      %1 = stablehlo.add %0, %b : tensor<3x4xf32>
      return %1 : tensor<3x4xf32>
    }
    """,
    _inputs(loguniform(lo_exp=-30, hi_exp=0, signed=True)),
    note="x*0.1 + 1e-8 with x as small as 1e-9: neither term may be lost",
)
_case(
    "clenshaw_series",
    ("stablehlo.multiply", "stablehlo.subtract", "stablehlo.add", "stablehlo.constant"),
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %half = stablehlo.constant dense<5.000000e-01> : tensor<3x4xf32>
      %two = stablehlo.constant dense<2.000000e+00> : tensor<3x4xf32>
      %c0 = stablehlo.constant dense<-1.300000e-08> : tensor<3x4xf32>
      %c1 = stablehlo.constant dense<6.000000e-08> : tensor<3x4xf32>
      %c2 = stablehlo.constant dense<-2.700000e-07> : tensor<3x4xf32>
      %c3 = stablehlo.constant dense<1.100000e-06> : tensor<3x4xf32>
      %c4 = stablehlo.constant dense<-4.400000e-06> : tensor<3x4xf32>
      %c5 = stablehlo.constant dense<1.600000e-05> : tensor<3x4xf32>
      %0 = stablehlo.multiply %half, %x : tensor<3x4xf32>
      %y = stablehlo.subtract %0, %two : tensor<3x4xf32>
      %1 = stablehlo.multiply %y, %c0 : tensor<3x4xf32>
      %b1 = stablehlo.add %1, %c1 : tensor<3x4xf32>
      %2 = stablehlo.multiply %y, %b1 : tensor<3x4xf32>
      %3 = stablehlo.subtract %2, %c0 : tensor<3x4xf32>
      %b2 = stablehlo.add %3, %c2 : tensor<3x4xf32>
      %4 = stablehlo.multiply %y, %b2 : tensor<3x4xf32>
      %5 = stablehlo.subtract %4, %b1 : tensor<3x4xf32>
      %b3 = stablehlo.add %5, %c3 : tensor<3x4xf32>
      %6 = stablehlo.multiply %y, %b3 : tensor<3x4xf32>
      %7 = stablehlo.subtract %6, %b2 : tensor<3x4xf32>
      %b4 = stablehlo.add %7, %c4 : tensor<3x4xf32>
      %8 = stablehlo.multiply %y, %b4 : tensor<3x4xf32>
      %9 = stablehlo.subtract %8, %b3 : tensor<3x4xf32>
      %b5 = stablehlo.add %9, %c5 : tensor<3x4xf32>
      %10 = stablehlo.subtract %b5, %b3 : tensor<3x4xf32>
      %11 = stablehlo.multiply %10, %half : tensor<3x4xf32>
      return %11 : tensor<3x4xf32>
    }
    """,
    _inputs(uniform(lo=0.0, hi=8.0)),
    note="bessel_i0e's Clenshaw recurrence, shortened: y = x/2 - 2 is raised to the 5th "
    "power, so whatever moves its data off unit (2 dominating x at a small scale under "
    "common-scale=first, x's own data far from 1) must be undone once, before the series",
)
_case(
    "horner_polynomial",
    ("stablehlo.multiply", "stablehlo.subtract", "stablehlo.add", "stablehlo.constant"),
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %half = stablehlo.constant dense<5.000000e-01> : tensor<3x4xf32>
      %two = stablehlo.constant dense<2.000000e+00> : tensor<3x4xf32>
      %c0 = stablehlo.constant dense<5.000000e-01> : tensor<3x4xf32>
      %c1 = stablehlo.constant dense<-2.500000e-01> : tensor<3x4xf32>
      %c2 = stablehlo.constant dense<1.250000e-01> : tensor<3x4xf32>
      %c3 = stablehlo.constant dense<1.000000e+00> : tensor<3x4xf32>
      %c4 = stablehlo.constant dense<-7.500000e-01> : tensor<3x4xf32>
      %c5 = stablehlo.constant dense<3.750000e-01> : tensor<3x4xf32>
      %c6 = stablehlo.constant dense<1.500000e+00> : tensor<3x4xf32>
      %c7 = stablehlo.constant dense<-6.250000e-02> : tensor<3x4xf32>
      %0 = stablehlo.multiply %half, %x : tensor<3x4xf32>
      %y = stablehlo.subtract %0, %two : tensor<3x4xf32>
      %m7 = stablehlo.multiply %y, %c7 : tensor<3x4xf32>
      %p6 = stablehlo.add %m7, %c6 : tensor<3x4xf32>
      %m6 = stablehlo.multiply %p6, %y : tensor<3x4xf32>
      %p5 = stablehlo.add %m6, %c5 : tensor<3x4xf32>
      %m5 = stablehlo.multiply %p5, %y : tensor<3x4xf32>
      %p4 = stablehlo.add %m5, %c4 : tensor<3x4xf32>
      %m4 = stablehlo.multiply %p4, %y : tensor<3x4xf32>
      %p3 = stablehlo.add %m4, %c3 : tensor<3x4xf32>
      %m3 = stablehlo.multiply %p3, %y : tensor<3x4xf32>
      %p2 = stablehlo.add %m3, %c2 : tensor<3x4xf32>
      %m2 = stablehlo.multiply %p2, %y : tensor<3x4xf32>
      %p1 = stablehlo.add %m2, %c1 : tensor<3x4xf32>
      %m1 = stablehlo.multiply %p1, %y : tensor<3x4xf32>
      %p0 = stablehlo.add %m1, %c0 : tensor<3x4xf32>
      return %p0 : tensor<3x4xf32>
    }
    """,
    _inputs(uniform(lo=0.0, hi=8.0)),
    note="a degree-7 polynomial in y = x/2 - 2, Horner's form: every p * y + c keeps "
    "p * y's scale under common-scale=first, so y's drift from unit is raised to the 7th "
    "power unless y is rescaled once (rewrites/drift.py)",
)
_case(
    "adam_update",
    ("stablehlo.multiply", "stablehlo.add", "stablehlo.sqrt", "stablehlo.divide"),
    """
    func.func public @main(%p: tensor<3x4xf32>, %g: tensor<3x4xf32>, %m: tensor<3x4xf32>,
                           %v: tensor<3x4xf32>)
        -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
      %b1 = stablehlo.constant dense<0.899999976> : tensor<3x4xf32>
      %c1 = stablehlo.constant dense<1.000000e-01> : tensor<3x4xf32>
      %b2 = stablehlo.constant dense<9.990000e-01> : tensor<3x4xf32>
      %c2 = stablehlo.constant dense<1.000000e-03> : tensor<3x4xf32>
      %lr = stablehlo.constant dense<1.000000e-03> : tensor<3x4xf32>
      %eps = stablehlo.constant dense<9.99999993E-9> : tensor<3x4xf32>
      %1 = stablehlo.multiply %b1, %m : tensor<3x4xf32>
      %3 = stablehlo.multiply %c1, %g : tensor<3x4xf32>
      %4 = stablehlo.add %1, %3 : tensor<3x4xf32>
      %6 = stablehlo.multiply %b2, %v : tensor<3x4xf32>
      %8 = stablehlo.multiply %c2, %g : tensor<3x4xf32>
      %9 = stablehlo.multiply %8, %g : tensor<3x4xf32>
      %10 = stablehlo.add %6, %9 : tensor<3x4xf32>
      %12 = stablehlo.multiply %lr, %4 : tensor<3x4xf32>
      %13 = stablehlo.sqrt %10 : tensor<3x4xf32>
      %15 = stablehlo.add %13, %eps : tensor<3x4xf32>
      %16 = stablehlo.divide %12, %15 : tensor<3x4xf32>
      %17 = stablehlo.subtract %p, %16 : tensor<3x4xf32>
      return %17, %4, %10 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
    }
    """,
    _inputs(
        normal(),
        loguniform(lo_exp=-12, hi_exp=-4, signed=True),
        loguniform(lo_exp=-12, hi_exp=-4, signed=True),
        loguniform(lo_exp=-24, hi_exp=-8),
    ),
)
_case(
    "cross_entropy",
    ("stablehlo.gather", "func.call", "stablehlo.reduce", "stablehlo.negate"),
    """
    func.func public @main(%logits: tensor<3x4xf32>, %labels: tensor<3xi32>) -> tensor<f32> {
      %0 = call @log_softmax(%logits) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %1 = stablehlo.reshape %labels : (tensor<3xi32>) -> tensor<3x1x1xi32>
      %2 = "stablehlo.gather"(%0, %1) <{dimension_numbers = #stablehlo.gather<
          collapsed_slice_dims = [1], operand_batching_dims = [0],
          start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>,
          indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}>
          : (tensor<3x4xf32>, tensor<3x1x1xi32>) -> tensor<3x1xf32>
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %3 = stablehlo.reduce(%2 init: %zero) applies stablehlo.add across dimensions = [0, 1]
          : (tensor<3x1xf32>, tensor<f32>) -> tensor<f32>
      %n = stablehlo.constant dense<3.000000e+00> : tensor<f32>
      %4 = stablehlo.divide %3, %n : tensor<f32>
      %5 = stablehlo.negate %4 : tensor<f32>
      return %5 : tensor<f32>
    }""" + _LOG_SOFTMAX,
    _inputs(normal(std=2.0), ints("3", 0, 4)),
    note="take_along_axis as jax lowers it: a batched gather",
)
_case(
    "gelu_tanh",
    ("stablehlo.multiply", "stablehlo.tanh", "stablehlo.add"),
    """
    func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = stablehlo.multiply %x, %x : tensor<3x4xf32>
      %1 = stablehlo.multiply %0, %x : tensor<3x4xf32>
      %c0 = stablehlo.constant dense<4.471500e-02> : tensor<3x4xf32>
      %3 = stablehlo.multiply %c0, %1 : tensor<3x4xf32>
      %4 = stablehlo.add %x, %3 : tensor<3x4xf32>
      %c1 = stablehlo.constant dense<0.797884583> : tensor<3x4xf32>
      %6 = stablehlo.multiply %c1, %4 : tensor<3x4xf32>
      %7 = stablehlo.tanh %6 : tensor<3x4xf32>
      %one = stablehlo.constant dense<1.000000e+00> : tensor<3x4xf32>
      %9 = stablehlo.add %one, %7 : tensor<3x4xf32>
      %half = stablehlo.constant dense<5.000000e-01> : tensor<3x4xf32>
      %11 = stablehlo.multiply %half, %9 : tensor<3x4xf32>
      %12 = stablehlo.multiply %x, %11 : tensor<3x4xf32>
      return %12 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(std=2.0)),
    scale_range=(-30, 30),
    note="x*x*x cubes the data: by the plain product rule, 2**40-scaled data would overflow",
)
_case(
    "mlp_relu",
    ("stablehlo.dot_general", "stablehlo.maximum", "stablehlo.add", "stablehlo.reduce"),
    """
    func.func public @main(%x: tensor<3x4xf32>, %w1: tensor<4x5xf32>, %b1: tensor<5xf32>,
                           %w2: tensor<5x2xf32>) -> (tensor<3x2xf32>, tensor<f32>) {
      %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
          : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
      %1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<5xf32>) -> tensor<3x5xf32>
      %2 = stablehlo.add %0, %1 : tensor<3x5xf32>
      %zero = stablehlo.constant dense<0.000000e+00> : tensor<3x5xf32>
      %3 = stablehlo.maximum %2, %zero : tensor<3x5xf32>
      %4 = stablehlo.dot_general %3, %w2, contracting_dims = [1] x [0]
          : (tensor<3x5xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
      %5 = stablehlo.multiply %4, %4 : tensor<3x2xf32>
      %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %6 = stablehlo.reduce(%5 init: %z) applies stablehlo.add across dimensions = [0, 1]
          : (tensor<3x2xf32>, tensor<f32>) -> tensor<f32>
      return %4, %6 : tensor<3x2xf32>, tensor<f32>
    }
    """,
    _inputs(normal(), normal("4x5", std=0.5), normal("5", std=0.1), normal("5x2", std=0.5)),
)
_case(
    "attention",
    ("stablehlo.dot_general", "stablehlo.reduce", "stablehlo.exponential", "stablehlo.divide"),
    """
    func.func public @main(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x4xf32>)
        -> tensor<3x4xf32> {
      %0 = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1]
          : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
      %c = stablehlo.constant dense<5.000000e-01> : tensor<3x5xf32>
      %1 = stablehlo.multiply %0, %c : tensor<3x5xf32>
      %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %2 = stablehlo.reduce(%1 init: %ninf) applies stablehlo.maximum across dimensions = [1]
          : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>
      %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<3xf32>) -> tensor<3x5xf32>
      %4 = stablehlo.subtract %1, %3 : tensor<3x5xf32>
      %5 = stablehlo.exponential %4 : tensor<3x5xf32>
      %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %6 = stablehlo.reduce(%5 init: %z) applies stablehlo.add across dimensions = [1]
          : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>
      %7 = stablehlo.broadcast_in_dim %6, dims = [0] : (tensor<3xf32>) -> tensor<3x5xf32>
      %8 = stablehlo.divide %5, %7 : tensor<3x5xf32>
      %9 = stablehlo.dot_general %8, %v, contracting_dims = [1] x [0]
          : (tensor<3x5xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
      return %9 : tensor<3x4xf32>
    }
    """,
    _inputs(normal(), normal("5x4"), normal("5x4")),
)
_case(
    "var_of_where_nan",
    ("stablehlo.select", "chlo.square", "func.call", "stablehlo.reduce"),
    """
    func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3xf32> {
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3x4xf32>, tensor<3x4xf32>)
          -> tensor<3x4xi1>
      %nan = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %2 = call @_where(%1, %arg0, %nan) : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<f32>)
          -> tensor<3x4xf32>
      %3 = call @_var(%2) : (tensor<3x4xf32>) -> tensor<3xf32>
      return %3 : tensor<3xf32>
    }
    func.func private @_where(%arg0: tensor<3x4xi1>, %arg1: tensor<3x4xf32>, %arg2: tensor<f32>)
        -> tensor<3x4xf32> {
      %1 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
      %2 = stablehlo.select %arg0, %arg1, %1 : tensor<3x4xi1>, tensor<3x4xf32>
      return %2 : tensor<3x4xf32>
    }
    func.func private @_var(%arg0: tensor<3x4xf32>) -> tensor<3xf32> {
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %n = stablehlo.constant dense<4.000000e+00> : tensor<3xf32>
      %3 = stablehlo.divide %0, %n : tensor<3xf32>
      %4 = stablehlo.broadcast_in_dim %3, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
      %5 = stablehlo.subtract %arg0, %4 : tensor<3x4xf32>
      %6 = chlo.square %5 : tensor<3x4xf32> -> tensor<3x4xf32>
      %9 = stablehlo.reduce(%6 init: %cst) applies stablehlo.add across dimensions = [1]
          : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
      %11 = stablehlo.divide %9, %n : tensor<3xf32>
      return %11 : tensor<3xf32>
    }
    """,
    _inputs(
        lambda rng: np.concatenate(
            [np.abs(rng.normal(size=(1, 4))), rng.normal(size=(2, 4))]
        ).astype(F32)
    ),
    note="jnp.var(jnp.where(x > 0, x, nan)): the NaN constant must not make the scale inf",
)


# --------------------------------------------------------------------------- index

_OP_RE = re.compile(r"(?<![#\w.])((?:stablehlo|chlo|sdy)\.[a-z_0-9]+|func\.call)\b")


def ops_in_text(text: str) -> set[str]:
    """Op names that occur in a module's text (``call`` without prefix counts as func.call)."""
    found = set(_OP_RE.findall(text))
    if re.search(r"(?<![.\w])call @", text):
        found.add("func.call")
    return found


def covering_cases() -> dict[str, list[str]]:
    """Op name -> names of the cases that cover it (by their declared ``ops``), sorted."""
    table: dict[str, list[str]] = {}
    for case in CASES:
        for op in case.ops:
            table.setdefault(op, []).append(case.name)
    return dict(sorted(table.items()))


def case_by_name(name: str) -> OpCase:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


_names = [c.name for c in CASES]
assert len(_names) == len(set(_names)), "case names must be unique"
del _names
