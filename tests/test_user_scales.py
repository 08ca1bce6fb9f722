"""Scales a user passes to a ``compile_scaled`` step (issue 22, section 4).

A rewritten module reads each scale argument as a power of two (its exponent bits), so
``ScaledArray([1.0], 3.0)`` times 2 returned 4, a scale of -2 gave inf and 0 gave 1.2e-38,
while ``x + x`` read the whole scale and was right. A step now splits any finite positive
scale into a power of two and a factor multiplied into the data, and refuses 0, negative,
infinite and NaN scales with the argument's path (docs/scaled-signature.md).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled
from scalify_hlo.api import rewrite_text
from scalify_hlo.compile import export
from scalify_hlo.errors import ScalifyError
from scalify_hlo.inputs import npz_bytes, random_inputs
from scalify_hlo.scaled_array import split_pow2, split_scale
from scalify_hlo.signature import entry_signature
from tests.helpers import run_cli_many

F32 = Policy(data_dtype="float32", fp8_dots=False)
F16 = Policy(data_dtype="float16", fp8_dots=False)
# Not powers of two, over the f32 range, with a subnormal one (split into 2^-126 and a
# factor below 1/2); as Python floats (checked on the host) and device arrays (split in the
# program without a check).
SCALES = (3.0, 0.1, 1.0 / 3.0, 1.5 * 2.0 ** -100, 1.75 * 2.0 ** 100, 3.0 * 2.0 ** -140)

X = np.array([1.0, -0.5, 0.25, 0.75], np.float32)
W = np.array([[0.5, -1.0], [0.25, 0.5], [-0.75, 1.0], [1.0, 0.125]], np.float32)


def _fns() -> dict[str, Any]:
    return {"x*2": lambda x, w: x * 2.0, "x+x": lambda x, w: x + x,
            "dot": lambda x, w: x @ w}


@pytest.fixture(scope="module", params=["f32", "f16"])
def steps(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    policy = F32 if request.param == "f32" else F16
    return request.param, {name: compile_scaled(fn, X, W, policy=policy)
                           for name, fn in _fns().items()}


def _value(x: ScaledArray) -> np.ndarray:
    """``data * scale`` in f64 (``unscale`` runs on XLA, which flushes subnormal f32)."""
    return np.asarray(x.data, np.float64) * np.float64(x.scale)


@pytest.mark.parametrize("make", [float, jnp.float32], ids=["python", "device"])
@pytest.mark.parametrize("scale", SCALES)
def test_any_positive_scale_is_exact(steps: tuple[str, dict[str, Any]], scale: float,
                                     make: Any) -> None:
    """``fn(ScaledArray(d, s))`` is ``fn(d * s)``: exactly in f32 mode (to f32 rounding of
    the product), to f16 data's precision in f16."""
    mode, compiled = steps
    given = ScaledArray(jnp.asarray(X), make(scale))
    value = X.astype(np.float64) * np.float64(np.float32(scale))
    for name, fn in _fns().items():
        want = np.asarray(fn(value, W.astype(np.float64)))
        got = _value(compiled[name](given, W))
        rtol = 1e-6 if mode == "f32" else 2e-3
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=f"{name} {mode}")


@pytest.mark.parametrize("bad", [0.0, -2.0, float("inf"), float("nan")])
def test_a_bad_scale_is_refused_with_its_path(bad: float) -> None:
    step = compile_scaled(lambda p, x: p["w"] * x, {"w": jnp.asarray(X)}, jnp.asarray(X),
                          policy=F32)
    message = f"args[0]['w']: scale {bad!r} is not a finite positive f32 number"
    with pytest.raises(ScalifyError) as info:  # on the host: checked on every call
        step({"w": ScaledArray(jnp.asarray(X), bad)}, X)
    assert str(info.value) == message
    on_device = {"w": ScaledArray(jnp.asarray(X), jnp.float32(bad))}
    with pytest.raises(ScalifyError) as info:  # on the device: scale_args reads it once
        step.scale_args(on_device, X)
    assert str(info.value) == message
    checked = compile_scaled(lambda p, x: p["w"] * x, {"w": jnp.asarray(X)},
                             jnp.asarray(X), policy=F32, check_scales=True)
    with pytest.raises(ScalifyError) as info:  # ... and every call under check_scales
        checked(on_device, X)
    assert str(info.value) == message


def test_an_unchecked_device_scale_keeps_data_times_scale() -> None:
    """Without check_scales a device scale is not read: a bad one gives what ``data *
    scale`` is in f32 (never the silent 4 for 6, or inf for -2, of before)."""
    step = compile_scaled(lambda x: x * 2.0, X, policy=F32)
    for bad in (0.0, -2.0, float("inf"), float("nan")):
        got = _value(step(ScaledArray(jnp.asarray(X), jnp.float32(bad))))
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got, X * np.float32(bad) * 2)


def test_traced_scales_are_split_under_check_scales() -> None:
    """Inside the caller's jax.jit a scale is a tracer: taken as a power of two by default
    (a step's own outputs carried through scan must not pay a multiply per iteration),
    split under check_scales."""
    step = compile_scaled(lambda x: x * 2.0, X, policy=F32)
    checked = compile_scaled(lambda x: x * 2.0, X, policy=F32, check_scales=True)
    given = ScaledArray(jnp.asarray(X), jnp.float32(3.0))
    np.testing.assert_array_equal(_value(jax.jit(checked)(given)), X * 6)
    splits = [jax.jit(s).lower(given).as_text().count("shift_right_logical")
              for s in (step, checked)]
    assert splits[0] < splits[1]


def test_scales_that_are_not_scalars_or_real_are_refused() -> None:
    step = compile_scaled(lambda x: x * 2.0, X, policy=F32)
    for scale, why in ((np.ones(2), "a scale of shape (2,), expected a scalar"),
                       (jnp.ones(2), "a scale of shape (2,), expected a scalar"),
                       (1 + 2j, "a scale of dtype complex128, expected a real number"),
                       (True, "a scale of dtype bool, expected a real number")):
        with pytest.raises(ScalifyError) as info:
            step(ScaledArray(jnp.asarray(X), scale))
        assert str(info.value) == f"args[0]: {why}"


def test_scale_args_splits_a_scale_into_a_power_of_two() -> None:
    step = compile_scaled(lambda x: x * 2.0, X, policy=F32)
    (given,) = step.scale_args(ScaledArray(jnp.asarray(X), jnp.float32(3.0)))
    assert float(given.scale) == 4.0 and given.bank is not None
    np.testing.assert_array_equal(np.asarray(given.data), X * np.float32(0.75))
    np.testing.assert_array_equal(_value(step(given)), X * 6)


@pytest.mark.parametrize("scale", [*SCALES, 1.0, 2.0 ** -126, 2.0 ** -149, 2.0 ** 127,
                                   float(np.finfo(np.float32).max)])
def test_the_split_is_exact_on_the_host_and_in_the_program(scale: float) -> None:
    """``pow2 * factor == scale`` exactly; a power of two has factor 1 (its data stays as it
    is); the program splits as the host does, subnormal scales included (XLA flushes
    subnormal f32 arithmetic: the program works on the bits)."""
    value = float(np.float32(scale))
    pow2, factor = split_scale(value)
    assert pow2 * factor == value and np.frexp(np.float32(pow2))[0] == 0.5
    assert 2.0 ** -126 <= pow2 <= 2.0 ** 127
    if np.frexp(np.float32(value))[0] == 0.5 and value >= 2.0 ** -126:
        assert factor == 1.0
    out = jax.jit(lambda d, s: split_pow2(d, s, jnp.float32))(jnp.ones(()), jnp.float32(value))
    assert (float(out.scale), float(out.data)) == (pow2, factor)


# ----- the CLI's run and compare: scales given in an .npz --------------------------------------
@pytest.fixture(scope="module")
def cli_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``run`` and ``compare`` of ``x * 2`` rewritten in f32 mode, on inputs in its scaled
    signature whose scale is 3 or -2 (the module read only the exponent: 4 x, not 6 x)."""
    folder = tmp_path_factory.mktemp("user_scales")
    text = rewrite_text(export(lambda x: x * 2.0, X), "inline,scalify{data-dtype=f32},simplify")
    (folder / "mul.mlir").write_text(text)
    for name, scale in (("three", 3.0), ("negative", -2.0)):
        (folder / f"{name}.npz").write_bytes(npz_bytes([X, np.float32(scale)]))
    commands = {
        "run": ("run", "mul.mlir", "--inputs", "three.npz", "-o", "out.npz"),
        "run bad": ("run", "mul.mlir", "--inputs", "negative.npz"),
        "compare": ("compare", "mul.mlir", "mul.mlir", "--inputs", "three.npz", "--rtol", "0"),
        "compare bad": ("compare", "mul.mlir", "mul.mlir", "--inputs", "negative.npz"),
    }
    return {"folder": folder, **run_cli_many(commands, cwd=folder)}


def test_cli_run_splits_a_scale_from_an_npz(cli_results: dict[str, Any]) -> None:
    result = cli_results["run"]
    assert result.returncode == 0, result.stderr
    with np.load(cli_results["folder"] / "out.npz") as out:  # joined: data * scale
        np.testing.assert_array_equal(out["arr_0"], X * 6.0)


def test_cli_compare_takes_a_scale_from_an_npz(cli_results: dict[str, Any]) -> None:
    """Two scaled modules of one signature are compared on their raw (data, scale) outputs:
    a module against itself, on inputs whose scale is not a power of two."""
    result = cli_results["compare"]
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("command", ["run bad", "compare bad"])
def test_cli_refuses_a_bad_scale(cli_results: dict[str, Any], command: str) -> None:
    result = cli_results[command]
    assert result.returncode == 1
    assert result.stderr == ("error: negative.npz: argument 1 (the scale of argument 0): "
                             "scale -2.0 is not a finite positive f32 number\n")


def test_random_inputs_give_a_scaled_module_unit_scales() -> None:
    text = rewrite_text(export(lambda x: x * 2.0, X), "inline,scalify{data-dtype=f16},simplify")
    signature = entry_signature(text)
    assert signature.scale_inputs == (1,)
    inputs = random_inputs(signature, np.random.default_rng(0))
    assert inputs[1] == np.float32(1.0) and inputs[0].dtype == np.float16
