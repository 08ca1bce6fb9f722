# ruff: noqa: E501  (MLIR in the modules below is one op per line, as MLIR prints it)
"""Special values through the scaled program: NaN, +-Inf, -0, subnormals, saturated scales.

With ``scalify{data-dtype=f32}`` the rewritten program must compute the original's numbers,
special values included: NaN and Inf at the same positions, zeros with their sign, values
within f32 rounding. Subnormals are compared up to the smallest normal (XLA:CPU flushes
subnormal results to zero, and a scaled program whose data is normal may not flush at the
same place). Scales whose static exponent leaves the f32 range are saturated *and reported*
(a ``saturated`` warning and the ``scalify.saturated-scales`` statistic), never silently
turned into inf or 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.runner import compile_module, run_executable
from scalify_hlo.signature import EntrySignature, entry_signature, join_outputs, split_inputs
from tests.helpers import MLP_STEP
from tests.scaled_helpers import assert_matches

PIPELINE = "scalify{data-dtype=f32},simplify"
RTOL = 1e-6
TINY = float(np.finfo(np.float32).tiny)  # 2^-126, the smallest normal f32

# A (4, 8) pattern of unit-scale values with every special value in it.
SPECIAL = np.array([
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -3.25, 0.125],
    [0.75, -0.0, 2.0, np.nan, -1.0, 0.0, np.inf, -0.5],
    [1.0, 1.0, -np.inf, 0.3, -0.7, 5.0, 0.0, -0.0],
    [-2.5, 0.1, 0.2, -0.3, np.nan, -np.inf, 7.0, 1.25],
], np.float32)
SPECIAL_B = np.roll(SPECIAL, 3) * np.float32(-0.5)

SUBNORMALS = np.array([1e-40, -3e-42, 2.0 ** -149, -(2.0 ** -130), 0.0, -0.0, 1.0, 1e-38],
                      np.float32)


def _module(args: str, body: str, results: str) -> str:
    return f"func.func public @main({args}) -> ({results}) {{\n{body}\n}}\n"


T = "tensor<4x8xf32>"
AB = f"%a: {T}, %b: {T}"


def _binary(op: str) -> str:
    return _module(AB, f"  %0 = {op} %a, %b : {T}\n  return %0 : {T}", T)


def _unary(op: str) -> str:
    return _module(AB, f"  %0 = {op} %a : {T}\n  return %0 : {T}", T)


PROGRAMS: dict[str, str] = {
    **{op: _binary(f"stablehlo.{op}") for op in (
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "atan2", "remainder")},
    **{op: _unary(f"stablehlo.{op}") for op in (
        "negate", "abs", "tanh", "exponential", "log", "sqrt", "rsqrt", "sign", "logistic")},
    "select": _module(AB, f"""  %p = stablehlo.compare GT, %a, %b, FLOAT : ({T}, {T}) -> tensor<4x8xi1>
  %0 = stablehlo.select %p, %a, %b : tensor<4x8xi1>, {T}
  return %0 : {T}""", T),
    "clamp": _module(AB, f"""  %lo = stablehlo.negate %b : {T}
  %0 = stablehlo.clamp %lo, %a, %b : {T}
  return %0 : {T}""", T),
    "concatenate": _module(AB, f"""  %0 = stablehlo.concatenate %a, %b, dim = 1 : ({T}, {T}) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>""", "tensor<4x16xf32>"),
    "dot_general": _module(AB, f"""  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [1] : ({T}, {T}) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>""", "tensor<4x4xf32>"),
    "reduce_add": _module(AB, f"""  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : ({T}, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>""", "tensor<4xf32>"),
    "reduce_max": _module(AB, f"""  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.maximum across dimensions = [0] : ({T}, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>""", "tensor<8xf32>"),
}
# Ops whose zeros keep a well-defined sign under exact power-of-two scaling.
SIGNED_ZERO_OPS = {"add", "subtract", "multiply", "divide", "negate", "abs", "select", "clamp",
                   "concatenate", "maximum", "minimum"}


def run_both(text: str, inputs: list[np.ndarray], scales: list[float | None],
             ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], EntrySignature]:
    """(reference, joined rewritten outputs, raw rewritten outputs, original signature)."""
    signature = entry_signature(text)
    result = rewrite_module_source(text, PIPELINE)
    assert result.error is None, result.error
    assert result.output is not None
    ref = run_executable(compile_module(text), inputs)
    raw = run_executable(compile_module(result.output.decode()),
                         split_inputs(signature, inputs, scales))
    with np.errstate(invalid="ignore", over="ignore"):
        got = join_outputs(signature, raw)
    return ref, got, raw, signature


def assert_scales_finite(signature: EntrySignature, raw: list[np.ndarray]) -> None:
    """Every output scale is a finite, positive power of two."""
    position = 0
    for spec in signature.results:
        if spec.is_scaled:
            scale = float(raw[position + 1])
            assert np.isfinite(scale) and scale > 0 and np.frexp(scale)[0] == 0.5, scale
            position += 2
        else:
            position += 1


def assert_same_zero_signs(ref: np.ndarray, got: np.ndarray) -> None:
    zeros = (ref == 0) & (got == 0)
    bad = np.flatnonzero((np.signbit(ref) != np.signbit(got)) & zeros)
    assert bad.size == 0, f"sign of zero differs at flat indices {bad.tolist()}"


@pytest.mark.parametrize("k", [0, -20, 20, -60, 60])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_special_inputs_exact(name: str, k: int) -> None:
    """NaN, +-Inf and -0 among unit-scale values, both inputs at scale 2^k."""
    scale = 2.0 ** k
    inputs = [(SPECIAL.astype(np.float64) * scale).astype(np.float32),
              (SPECIAL_B.astype(np.float64) * scale).astype(np.float32)]
    ref, got, raw, signature = run_both(PROGRAMS[name], inputs, [scale, scale])
    if name.startswith("reduce") or name == "dot_general":
        floor = [RTOL * float(np.nanmax(np.abs(np.where(np.isinf(r), np.nan, r)), initial=0.0))
                 for r in ref]
    else:
        floor = [0.0] * len(ref)
    for r, g, f in zip(ref, got, floor, strict=True):
        assert_matches([r], [g], RTOL, f)
        if name in SIGNED_ZERO_OPS:
            assert_same_zero_signs(r, g)
    assert_scales_finite(signature, raw)


@pytest.mark.parametrize("k", [0, -20, -60])
@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "negate", "select",
                                  "dot_general", "reduce_add"])
def test_subnormal_inputs(name: str, k: int) -> None:
    """Subnormal inputs: no NaN or Inf appears, values agree up to the smallest normal
    (XLA:CPU flushes subnormal results; scaled data may be normal and not flush). Even at
    scale 1 a subnormal may flush in one program and not the other: whether a kernel
    flushes depends on how XLA fused it and on the CPU (the original's select flushed 1e-38
    on an AMD EPYC, the rewritten one did not), so every k allows that much.

    sqrt is left out: XLA:CPU treats a subnormal input as zero, so the original's
    ``sqrt(1e-40)`` is 0 while the scaled program, whose data is normal, gives the IEEE 1e-20
    (see docs/robustness.md)."""
    scale = 2.0 ** k
    base = np.tile(SUBNORMALS, (4, 1))
    inputs = [base, (np.roll(base, 1) * np.float32(-1)).astype(np.float32)]
    ref, got, raw, signature = run_both(PROGRAMS[name], inputs, [scale, scale])
    for r, g in zip(ref, got, strict=True):
        assert_matches([r], [g], RTOL if k == 0 else 1e-5, 2 * TINY)
    assert_scales_finite(signature, raw)


SPECIAL_CONSTANT = _module("%a: tensor<6xf32>", """\
  %c = stablehlo.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, -0.0, 1.0e-40, 2.5]> : tensor<6xf32>
  %0 = stablehlo.multiply %c, %a : tensor<6xf32>
  %1 = stablehlo.add %c, %a : tensor<6xf32>
  %2 = stablehlo.maximum %c, %a : tensor<6xf32>
  return %0, %1, %2 : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>""",
    "tensor<6xf32>, tensor<6xf32>, tensor<6xf32>")

SPLAT_CONSTANTS = _module(f"%a: {T}", f"""\
  %nan = stablehlo.constant dense<0x7FC00000> : {T}
  %inf = stablehlo.constant dense<0x7F800000> : {T}
  %ninf = stablehlo.constant dense<0xFF800000> : {T}
  %mzero = stablehlo.constant dense<-0.0> : {T}
  %0 = stablehlo.add %a, %nan : {T}
  %1 = stablehlo.multiply %a, %inf : {T}
  %2 = stablehlo.maximum %a, %ninf : {T}
  %3 = stablehlo.multiply %a, %mzero : {T}
  %4 = stablehlo.add %mzero, %mzero : {T}
  return %0, %1, %2, %3, %4 : {T}, {T}, {T}, {T}, {T}""", ", ".join([T] * 5))

# jnp.var with where=: the masked-out entries are NaN and must not make the scale infinite.
WHERE_NAN = _module(f"%a: {T}", f"""\
  %zero = stablehlo.constant dense<0.0> : {T}
  %nan = stablehlo.constant dense<0x7FC00000> : {T}
  %p = stablehlo.compare GT, %a, %zero, FLOAT : ({T}, {T}) -> tensor<4x8xi1>
  %w = stablehlo.select %p, %a, %nan : tensor<4x8xi1>, {T}
  %sq = stablehlo.multiply %w, %w : {T}
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%sq init: %init) applies stablehlo.add across dimensions = [1] : ({T}, tensor<f32>) -> tensor<4xf32>
  return %w, %s : {T}, tensor<4xf32>""", f"{T}, tensor<4xf32>")

# log_softmax over rows with a -inf mask (a fully masked row gives NaN in both programs).
MASKED_LOG_SOFTMAX = _module(f"%a: {T}, %mask: {T}", f"""\
  %x = stablehlo.add %a, %mask : {T}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : ({T}, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> {T}
  %d = stablehlo.subtract %x, %mb : {T}
  %e = stablehlo.exponential %d : {T}
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : ({T}, tensor<f32>) -> tensor<4xf32>
  %l = stablehlo.log %s : tensor<4xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<4xf32>) -> {T}
  %r = stablehlo.subtract %d, %lb : {T}
  return %r, %l : {T}, tensor<4xf32>""", f"{T}, tensor<4xf32>")


@pytest.mark.parametrize("k", [0, -40, 40])
def test_special_constants(k: int) -> None:
    """A constant holding NaN, +-Inf, -0 and a subnormal gets a finite static scale, and the
    products, sums and maxima with it match the original."""
    a = np.array([1.5, -2.0, 3.0, -0.0, 0.5, 4.0], np.float32) * np.float32(2.0 ** k)
    result = rewrite_module_source(SPECIAL_CONSTANT, PIPELINE)
    assert result.output is not None and "0x7F800000" in result.output.decode()
    ref, got, raw, signature = run_both(SPECIAL_CONSTANT, [a], [2.0 ** k])
    for r, g in zip(ref, got, strict=True):
        assert_matches([r], [g], RTOL, 2 * TINY)
    assert_scales_finite(signature, raw)


@pytest.mark.parametrize("name", ["splat", "where_nan", "masked_log_softmax"])
@pytest.mark.parametrize("k", [0, -60, 60])
def test_special_value_patterns(name: str, k: int) -> None:
    """Splat NaN/Inf/-0 constants, ``where(x > 0, x, nan)`` and a -inf masked log_softmax:
    the reference implementation's failure modes (infinite scales) must not appear."""
    scale = 2.0 ** k
    a = (np.linspace(-3, 4, 32, dtype=np.float32).reshape(4, 8) * np.float32(scale))
    if name == "masked_log_softmax":
        mask = np.zeros((4, 8), np.float32)
        mask[0, 3:] = -np.inf
        mask[2, :] = -np.inf  # a fully masked row
        text, inputs, scales = MASKED_LOG_SOFTMAX, [a, mask], [scale, None]
    else:
        text = SPLAT_CONSTANTS if name == "splat" else WHERE_NAN
        inputs, scales = [a], [scale]
    ref, got, raw, signature = run_both(text, inputs, scales)
    for r, g in zip(ref, got, strict=True):
        finite = np.abs(r[np.isfinite(r)])
        assert_matches([r], [g], RTOL, RTOL * float(finite.max()) if finite.size else 0.0)
        assert_same_zero_signs(r, g)
    assert_scales_finite(signature, raw)


@pytest.mark.parametrize("k", [-100, 0, 100])
def test_exp_of_zero_is_one_and_zeros_stay_zero(k: int) -> None:
    """``exp(a - a)`` is exactly 1 and ``a * 0`` exactly 0 at any input scale; an all-zero
    input stays zero through arithmetic."""
    text = _module(f"%a: {T}, %z: {T}", f"""\
  %d = stablehlo.subtract %a, %a : {T}
  %e = stablehlo.exponential %d : {T}
  %zero = stablehlo.constant dense<0.0> : {T}
  %p = stablehlo.multiply %a, %zero : {T}
  %q = stablehlo.add %z, %z : {T}
  %r = stablehlo.dot_general %z, %a, contracting_dims = [1] x [1] : ({T}, {T}) -> tensor<4x4xf32>
  return %e, %p, %q, %r : {T}, {T}, {T}, tensor<4x4xf32>""", f"{T}, {T}, {T}, tensor<4x4xf32>")
    a = (np.linspace(-3, 4, 32, dtype=np.float32).reshape(4, 8) * np.float32(2.0 ** k))
    z = np.zeros((4, 8), np.float32)
    ref, got, raw, signature = run_both(text, [a, z], [2.0 ** k, None])
    np.testing.assert_array_equal(got[0], np.ones((4, 8), np.float32))
    for g in got[1:]:
        np.testing.assert_array_equal(g, np.zeros_like(g))
    for r, g in zip(ref, got, strict=True):
        assert_matches([r], [g], 0.0)
    assert_scales_finite(signature, raw)


@pytest.mark.parametrize("factor", ["1.000000e+02", "3.000000e-01"])
def test_the_programs_own_factors_keep_their_order(factor: str) -> None:
    """``(w * e) * c`` for a constant ``c`` that is no power of two is computed in that
    order: simplify moved such a factor onto ``e`` (it may move only the rewrite's powers of
    two), which rounds differently, and ``e^86 * 100`` is inf where ``(w * e^86) * 100`` is
    2.8e37 (a gradient of ``sum(exp(100 x) * w)``)."""
    text = _module(AB, f"""\
  %e = stablehlo.exponential %a : {T}
  %p = stablehlo.multiply %b, %e : {T}
  %c = stablehlo.constant dense<{factor}> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> {T}
  %r = stablehlo.multiply %p, %cb : {T}
  return %r : {T}""", T)
    rng = np.random.default_rng(0)
    a = rng.uniform(-5.0, 88.0, (4, 8)).astype(np.float32)
    b = rng.uniform(0.1, 1.0, (4, 8)).astype(np.float32) * np.float32(1.0 / 300.0)
    ref, got, raw, signature = run_both(text, [a, b], [1.0, 1.0])
    assert np.all(np.isfinite(ref[0]))
    np.testing.assert_array_equal(got[0], ref[0])


@pytest.mark.parametrize("k", [-126, 127])
def test_input_scales_at_the_edge_of_f32(k: int) -> None:
    """Runtime scales 2^-126 and 2^127 through scale-preserving ops are exact."""
    text = _module(f"%a: {T}", f"""\
  %n = stablehlo.negate %a : {T}
  %t = stablehlo.transpose %n, dims = [1, 0] : ({T}) -> tensor<8x4xf32>
  %m = stablehlo.maximum %a, %n : {T}
  return %t, %m : tensor<8x4xf32>, {T}""", f"tensor<8x4xf32>, {T}")
    data = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    a = (data.astype(np.float64) * 2.0 ** k).astype(np.float32)
    assert np.all(np.isfinite(a))
    ref, got, raw, signature = run_both(text, [a], [2.0 ** k])
    for r, g in zip(ref, got, strict=True):
        assert_matches([r], [g], 0.0)
    assert_scales_finite(signature, raw)


# ----- scales that leave the f32 exponent range --------------------------------------------------
def _constant_chain(value: str, count: int, with_input: bool) -> str:
    lines = [f"  %c = stablehlo.constant dense<{value}> : tensor<4xf32>"]
    current = "%a" if with_input else "%c"
    for i in range(count if with_input else count - 1):
        lines.append(f"  %m{i} = stablehlo.multiply {current}, %c : tensor<4xf32>")
        current = f"%m{i}"
    lines.append(f"  return {current} : tensor<4xf32>")
    return _module("%a: tensor<4xf32>", "\n".join(lines), "tensor<4xf32>")


SATURATING = {
    # name: (module, saturated exponent of the result scale)
    "huge_constant_squared": (_constant_chain("1.0e38", 2, with_input=False), 127),
    "tiny_constant_squared": (_constant_chain("1.0e-38", 2, with_input=False), -126),
    "input_times_huge_chain": (_constant_chain("1.0e30", 5, with_input=True), 127),
    "input_times_tiny_chain": (_constant_chain("1.0e-30", 5, with_input=True), -126),
    "huge_sum": (_module("%a: tensor<4xf32>", """\
  %c = stablehlo.constant dense<3.0e38> : tensor<4096xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4096xf32>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
  return %b : tensor<4xf32>""", "tensor<4xf32>"), 127),
    "huge_dot": (_module("%a: tensor<4xf32>", """\
  %c = stablehlo.constant dense<1.0e30> : tensor<4x64xf32>
  %d = stablehlo.dot_general %c, %c, contracting_dims = [1] x [1] : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%d init: %z) applies stablehlo.maximum across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %r : tensor<4xf32>""", "tensor<4xf32>"), 127),
}


@pytest.mark.parametrize("name", sorted(SATURATING))
def test_out_of_range_scales_are_saturated_and_reported(name: str) -> None:
    text, exponent = SATURATING[name]
    result = rewrite_module_source(text, PIPELINE)
    assert result.error is None, result.error
    assert result.context.stats.get("scalify.saturated-scales", 0) >= 1, result.context.stats
    assert any("saturated" in w for w in result.context.warnings), result.context.warnings
    assert any(f"saturated to 2^{exponent}" in w for w in result.context.warnings)
    a = np.array([0.5, -1.0, 1.5, 0.25], np.float32)
    signature = entry_signature(text)
    raw = run_executable(compile_module(result.output.decode()),
                         split_inputs(signature, [a], [1.0]))
    assert float(raw[1]) == 2.0 ** exponent  # the saturated scale: a normal f32, not 0 or inf
    # What the scale could not hold went into the data: the value is the original's (inf or
    # 0 here: these programs overflow or underflow f32 themselves), not 2^127 times the data.
    original = run_executable(compile_module(text), [a])[0]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(raw[0] * np.float32(raw[1]), original)


def test_out_of_range_intermediate_scale_that_comes_back_is_exact() -> None:
    """``a * 1e30 * 1e30 / 1e30 / 1e30``: the static exponent passes 2^198 symbolically but
    nothing is materialized there, so nothing saturates and the result is ``a`` (the
    original is no reference here: XLA reassociates ``x / c / c`` into ``x / (c * c)``, and
    ``c * c`` overflows f32)."""
    text = _module("%a: tensor<4xf32>", """\
  %k = stablehlo.constant dense<1.0e30> : tensor<4xf32>
  %c = stablehlo.optimization_barrier %k : tensor<4xf32>
  %0 = stablehlo.multiply %a, %c : tensor<4xf32>
  %1 = stablehlo.multiply %0, %c : tensor<4xf32>
  %2 = stablehlo.divide %1, %c : tensor<4xf32>
  %3 = stablehlo.divide %2, %c : tensor<4xf32>
  return %3 : tensor<4xf32>""", "tensor<4xf32>")
    result = rewrite_module_source(text, PIPELINE)
    assert "scalify.saturated-scales" not in result.context.stats
    a = np.array([1e-25, -3e-26, 2e-24, 0.0], np.float32)
    _, got, raw, signature = run_both(text, [a], [2.0 ** -80])
    assert_matches([a], got, 1e-6)


def test_no_saturation_on_a_real_step() -> None:
    text = MLP_STEP.read_text()
    result = rewrite_module_source(text, "inline," + PIPELINE)
    assert result.error is None
    assert "scalify.saturated-scales" not in result.context.stats
    assert not any("saturated" in w for w in result.context.warnings)


def test_cli_reports_saturation(tmp_path: Path) -> None:
    path = tmp_path / "huge.mlir"
    path.write_text(SATURATING["huge_constant_squared"][0])
    proc = subprocess.run([str(Path(sys.executable).parent / "scalify-hlo"), "rewrite",
                           str(path), "--pipeline", PIPELINE, "--stats", "-o",
                           str(tmp_path / "out.mlir")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("warning:") and "saturated to 2^127" in line
               for line in proc.stderr.splitlines()), proc.stderr
    assert "scalify.saturated-scales: 1" in proc.stderr


@pytest.mark.parametrize("scale", [3.0, 0.0, -2.0, float("inf"), float("nan"), 1e-45])
def test_a_scale_that_is_no_positive_normal_power_of_two_is_refused(scale: float) -> None:
    """The rewritten program reads a scale's exponent from its bits, so 3.0 would act as 2.0
    and -2.0 as 2^129: splitting inputs refuses such a scale with a one-line error."""
    from scalify_hlo.errors import ScalifyError

    text = _module("%a: tensor<4xf32>", "  return %a : tensor<4xf32>", "tensor<4xf32>")
    with pytest.raises(ScalifyError, match=r"^input 0: scale .* is not a positive normal power "
                                           r"of two$"):
        split_inputs(entry_signature(text), [np.ones(4, np.float32)], [scale])
