"""FP8-rewritten modules on XLA:CPU against an independent numpy + ml_dtypes emulation.

The claim under test: after ``DEFAULT_PIPELINE`` (scalify to f16 data with power-of-two
scales, FP8 dots), a module computes exactly the function its StableHLO text says: clamp,
round-to-nearest-even into E4M3FN / E5M2, exact FP8 products summed in f32, f16 elementwise
arithmetic, f32 scale arithmetic. ``tests/fp8_emulator.py`` evaluates that text with numpy and
ml_dtypes and shares no numerics with XLA or with the rewrite passes.

What is bit-identical, and why the MLP step needs two accommodations:

* The single dot is bit-identical with XLA:CPU as ``run_module`` compiles it. Every partial
  sum of its FP8 products is exact in f32 (the emulator checks this per dot), so XLA's
  accumulation order cannot matter and the emulator's f64 sum rounded once is XLA's result.
* The MLP step is bit-identical, for every output, under two conditions that only remove
  freedoms StableHLO or XLA take, never a cast or a scale:
  1. Values that StableHLO leaves to the implementation are taken from XLA after they are
     judged: ``exponential``/``log`` must be within 2 ulp of numpy's, and f16 ``reduce``
     (add) results within the worst-case rounding error of a summation order (XLA:CPU marks
     reductions ``reassoc`` and LLVM vectorizes them, e.g. a row of 8 is summed as a tree).
     To read those values the module gets them as extra results (``with_probes``).
  2. XLA's algebraic simplifier is switched off (``xla_disable_hlo_passes=algsimp,...``): it
     rewrites ``(x * bcast(c)) * bcast(s)`` into ``x * bcast(c * s)`` in f16, which rounds
     differently from the module as written (seen on the SGD update with non-RMS scales).
     Its reshape mover goes with it: it moves a transpose down through elementwise ops and
     algsimp moves it back, so without algsimp a transpose of a dot's scaled result
     (``dot-transposes``) was copied each round (2090 transposes in the MLP step) until
     XLA:CPU's code generation crashed. Neither changes what is computed.
  ``test_mlp_step_default_xla_is_within_ulps`` runs the step as ``run_module`` does (no
  probes, all passes) and bounds the difference instead.

The relative error of the FP8 result against the f32 original is printed (``pytest -s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from jax.extend import backend as jax_backend

from scalify_hlo.api import rewrite_text
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.runner import compile_module, run_executable, run_module
from scalify_hlo.signature import EntrySignature, entry_signature, join_outputs, split_inputs
from tests.fp8_emulator import (
    Fp8Emulator,
    UnsupportedOpError,
    implementation_defined_positions,
    ulp_distance,
    with_probes,
)
from tests.helpers import MLP_STEP

DOT_MODULE = """
func.func @main(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
"""


# ----- helpers ---------------------------------------------------------------------------
def compile_strict(text: str):
    """XLA:CPU with the algebraic simplifier and the reshape mover off (see the module
    docstring, point 2)."""
    client = jax_backend.get_backend()
    options = jax_backend.get_compile_options(1, 1)
    options.executable_build_options.debug_options.xla_disable_hlo_passes = "algsimp,reshape-mover"
    return client.compile_and_load(text, client.devices()[:1], options)


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    norm = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / norm) if norm else float(np.linalg.norm(got))


def pow2_scales(count: int, rng: np.random.Generator) -> list[float]:
    return [float(2.0 ** rng.integers(-6, 7)) for _ in range(count)]


def assert_bit_identical(xla: list[np.ndarray], emulated: list[np.ndarray]) -> None:
    assert len(xla) == len(emulated)
    for index, (a, b) in enumerate(zip(xla, emulated, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"output {index}"
        a_bits, b_bits = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
        assert np.array_equal(a_bits, b_bits), (
            f"output {index} ({a.dtype}{list(a.shape)}): {int(np.sum(a != b))} elements "
            f"differ, max {int(ulp_distance(a, b).max())} ulp")


def mlp_case(seed: int, random_scales: bool) -> tuple[EntrySignature, list[np.ndarray],
                                                       list[np.ndarray]]:
    """Arguments of the MLP step drawn as ``models.mlp_step`` draws them (normal weights over
    sqrt(fan_in), zero biases, normal inputs, one-hot labels) but with numpy, which spares
    the eager JAX compiles, then split with RMS scales or with random powers of two."""
    signature = entry_signature(MLP_STEP.read_text())
    rng = np.random.default_rng(seed)
    sizes = (32, 64, 64, 10)
    leaves: list[np.ndarray] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        leaves += [np.zeros(fan_out, np.float32),
                   (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)]
    batch = signature.inputs[-1].shape[0]
    leaves.append(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    leaves.append(np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)])
    assert [x.shape for x in leaves] == [spec.shape for spec in signature.inputs]
    scales = pow2_scales(len(leaves), rng) if random_scales else None
    return signature, leaves, split_inputs(signature, leaves, scales, data_dtype=np.float16)


@dataclass
class MlpSetup:
    """The MLP step, rewritten and compiled once for all MLP tests (compiling dominates)."""

    original: Any  # XLA executables
    default: Any
    strict_probed: Any
    rewritten: str
    positions: list[int]


@pytest.fixture(scope="module")
def mlp() -> MlpSetup:
    original = MLP_STEP.read_text()
    rewritten = rewrite_text(original, DEFAULT_PIPELINE)
    positions = implementation_defined_positions(rewritten)
    return MlpSetup(compile_module(original), compile_module(rewritten),
                    compile_strict(with_probes(rewritten, positions)), rewritten, positions)


# ----- the emulator's building blocks ----------------------------------------------------
def test_numpy_f16_arithmetic_rounds_once_from_f32():
    """The emulator relies on numpy computing f16 ``+ - * /`` as one rounding of the f32
    result, which for these ops equals the correctly rounded f16 result."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**16, size=(2, 200_000), dtype=np.uint16)
    a, b = bits.view(np.float16)
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    with np.errstate(all="ignore"):
        for op in (np.add, np.subtract, np.multiply, np.divide):
            direct = op(a, b)
            via_f32 = op(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
            assert np.array_equal(direct, via_f32, equal_nan=True), op.__name__


def test_fp8_casts_match_xla_on_every_f16_value():
    """``convert`` f16 -> FP8 on XLA:CPU equals ml_dtypes' round-to-nearest-even for all
    65536 f16 bit patterns, NaN on E4M3FN overflow and inf on E5M2 overflow included."""
    text = """
    func.func @main(%x: tensor<65536xf16>) -> (tensor<65536xf8E4M3FN>, tensor<65536xf8E5M2>) {
      %0 = stablehlo.convert %x : (tensor<65536xf16>) -> tensor<65536xf8E4M3FN>
      %1 = stablehlo.convert %x : (tensor<65536xf16>) -> tensor<65536xf8E5M2>
      return %0, %1 : tensor<65536xf8E4M3FN>, tensor<65536xf8E5M2>
    }
    """
    x = np.arange(2**16, dtype=np.uint16).view(np.float16)
    xla = run_module(text, [x])
    emulated = Fp8Emulator(text).run([x])
    for got, want in zip(xla, emulated, strict=True):
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
        assert np.array_equal(got.view(np.uint8)[~nan], want.view(np.uint8)[~nan])
    # the reason for the clamp before every cast
    assert np.isnan(np.float16(465).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    assert np.isinf(np.float16(61440).astype(ml_dtypes.float8_e5m2).astype(np.float32))


def test_emulator_names_an_unsupported_op():
    text = """
    func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
      %0 = stablehlo.popcnt %x : tensor<4xi32>
      return %0 : tensor<4xi32>
    }
    """
    with pytest.raises(UnsupportedOpError, match="stablehlo.popcnt"):
        Fp8Emulator(text).run([np.arange(4, dtype=np.int32)])


# ----- (a) a single dot -------------------------------------------------------------------
# fp8-dots' amax scaling (the default) lifts an operand's small values out of E4M3's
# subnormals, so its products can span more than f32's 24 bits: then XLA's summation order
# may round the f32 sum differently, and the result may differ from the emulation by one ulp
# of the output's data type. Without the shift (scaling=none) every sum is exact.
SCALINGS = {"none": DEFAULT_PIPELINE.replace("fp8-dots{", "fp8-dots{scaling=none "),
            "amax": DEFAULT_PIPELINE}


def assert_equal_or_one_ulp(xla: list[np.ndarray], emulated: list[np.ndarray]) -> None:
    for got, want in zip(xla, emulated, strict=True):
        if got.dtype.kind == "f" and got.ndim:
            np.testing.assert_array_max_ulp(got, want, maxulp=1)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("seed, random_scales", [(0, False), (1, False), (2, True), (3, True)])
def test_single_dot_bit_identical(seed: int, random_scales: bool, scaling: str):
    assert "scaling=none" in SCALINGS["none"] and "scaling" not in DEFAULT_PIPELINE
    signature = entry_signature(DOT_MODULE)
    rewritten = rewrite_text(DOT_MODULE, SCALINGS[scaling])
    assert "f8E4M3FN" in rewritten
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(spec.shape).astype(np.float32) for spec in signature.inputs]
    scales = pow2_scales(len(inputs), rng) if random_scales else None
    flat = split_inputs(signature, inputs, scales, data_dtype=np.float16)

    xla = run_module(rewritten, flat)
    emulator = Fp8Emulator(rewritten)
    emulated = emulator.run(flat)

    assert [d.lhs for d in emulator.dots] == ["float8_e4m3fn"]
    if scaling == "none" or all(d.order_independent for d in emulator.dots):
        assert all(d.order_independent for d in emulator.dots), "sums not exact in f32"
        assert_bit_identical(xla, emulated)
    else:
        assert_equal_or_one_ulp(xla, emulated)
    (reference,) = run_module(DOT_MODULE, inputs)
    (fp8,) = join_outputs(signature, emulated)
    print(f"\nsingle dot 16x32 @ 32x8, seed {seed}"
          f"{' random pow2 scales' if random_scales else ''}: bit-identical; "
          f"FP8 vs f32 relative error {relative_error(fp8, reference):.4f}")


# ----- (b) the MLP training step ----------------------------------------------------------
MLP_CASES = [(0, False), (2, False), (5, True)]


def describe(seed: int, random_scales: bool) -> str:
    return f"seed {seed}, " + ("random pow2 input scales (data off unit scale)"
                               if random_scales else "RMS input scales")


@pytest.mark.parametrize("seed, random_scales", MLP_CASES)
def test_mlp_step_bit_identical(seed: int, random_scales: bool, mlp: MlpSetup):
    signature, leaves, flat = mlp_case(seed, random_scales)
    raw = run_executable(mlp.strict_probed, flat)
    count = len(mlp.positions)
    outputs, probes = raw[:-count], raw[-count:]

    emulator = Fp8Emulator(mlp.rewritten, max_ulps=2)
    emulated = emulator.run(flat, overrides=dict(zip(mlp.positions, probes, strict=True)))

    judged = {r.op for r in emulator.replaced}
    # exp and log of the loss, the sums (reduction order), the dots (accumulation order:
    # identical where provably order-independent, else within the f32 summation bound), and
    # the sqrt of each updated weight's mean square (the unit-RMS scale of the results)
    # and 16-bit adds of a product (XLA:CPU may round a * b + c once)
    assert judged <= {"stablehlo.exponential", "stablehlo.log", "stablehlo.reduce",
                      "stablehlo.dot_general", "stablehlo.sqrt", "stablehlo.add",
                      "stablehlo.subtract"}
    rejected = [f"{r.op} at {r.position}: {r.detail}" for r in emulator.replaced
                if not r.acceptable]
    assert not rejected, rejected
    assert len(emulator.dots) == 8
    assert {(d.lhs, d.rhs) for d in emulator.dots} == {
        ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"),
        ("float16", "float16")}
    # the output head (the last layer's dot and its two gradient dots) stays in f16
    assert [(d.lhs, d.rhs) for d in emulator.dots].count(("float16", "float16")) == 3
    assert_bit_identical(outputs, emulated)

    reference = run_executable(mlp.original, leaves)
    fp8 = join_outputs(signature, emulated)
    names = ["b0", "w0", "b1", "w1", "b2", "w2"]
    params = dict(zip(names, leaves[:6], strict=True))
    differing = [f"{r.op.removeprefix('stablehlo.')}@{r.position} ({r.detail})"
                 for r in emulator.replaced if not np.array_equal(r.own, r.supplied)]
    print(f"\nMLP step, {describe(seed, random_scales)}: {len(outputs)} outputs "
          f"bit-identical; {len(emulator.replaced)} values taken from XLA, differing from "
          f"the emulator's own: {differing or 'none'}; "
          f"{sum(d.order_independent for d in emulator.dots)}/8 dots provably "
          f"order-independent")
    print("  relative error FP8 vs f32: loss "
          f"{relative_error(fp8[6], reference[6]):.2e}; parameter update (new - old): "
          + ", ".join(f"{n} {relative_error(fp8[i] - params[n], reference[i] - params[n]):.3f}"
                      for i, n in enumerate(names)))


def test_mlp_step_default_xla_is_within_ulps(mlp: MlpSetup):
    """The rewritten step compiled as ``run_module`` compiles it (all XLA passes, no probes)
    against the emulator's own numerics: not bit-identical in general (reduction order,
    exp/log, algsimp; see the module docstring), but within a few f16 ulps of each tensor's
    largest magnitude."""
    for seed, random_scales in MLP_CASES:
        _, _, flat = mlp_case(seed, random_scales)
        xla = run_executable(mlp.default, flat)
        emulated = Fp8Emulator(mlp.rewritten).run(flat)
        worst: list[str] = []
        for index, (a, b) in enumerate(zip(xla, emulated, strict=True)):
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            top = float(np.max(np.abs(b64))) if b64.size else 0.0
            tolerance = 4 * float(np.spacing(b.dtype.type(top)))
            assert np.all(np.abs(a64 - b64) <= tolerance), f"seed {seed} output {index}"
            if not np.array_equal(a, b):
                worst.append(f"#{index}: {int(np.sum(a != b))} elements, "
                             f"max {int(ulp_distance(a, b).max())} ulp")
        print(f"\nMLP step, {describe(seed, random_scales)}, default XLA:CPU vs emulator: "
              f"{'; '.join(worst) if worst else 'bit-identical'}")
