"""select, max, min, clamp and compare of operands whose scales are far apart.

Their result is one of their operands (or a boolean), so it must not depend on how far apart
the operands' scales are: with f16 data the largest scale flushed the other operand to 0
(``jnp.minimum(SA([-1, 2], 4), SA([1, 1], 2**30))`` was ``[0, 0]``), and a compare of an
operand 2^60 above the other gave a wrong boolean in every data type. Each module is
rewritten once per data type and run with several scale assignments.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled
from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import compile_module, run_executable

# a is negative and b positive, so min picks a and max picks b at every scale: a result made
# of one operand, which one scale per tensor holds exactly in any data type.
MODULE = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<i1>, %z: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %0 = stablehlo.minimum %a, %b : tensor<4xf32>
  %1 = stablehlo.maximum %a, %b : tensor<4xf32>
  %nb = stablehlo.negate %b : tensor<4xf32>
  %2 = stablehlo.clamp %nb, %a, %b : tensor<4xf32>
  %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %3 = stablehlo.select %lt, %a, %b : tensor<4xi1>, tensor<4xf32>
  %4 = stablehlo.select %p, %a, %b : tensor<i1>, tensor<4xf32>
  %5 = stablehlo.compare GT, %a, %z, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %6 = stablehlo.compare GE, %z, %a, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %7 = stablehlo.compare EQ, %b, %z, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
      tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}
"""
A = np.array([-1.0, -2.0, -0.75, -3.0])
B = np.array([1.0, 2.0, 3.0, 0.5])
Z = np.array([0.0, 0.0, 1.0, 0.0])  # a runtime tensor: its zeros are not scale-free
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
# (k_a, k_b, k_z): operands 2^120 apart, 2^28 apart (the reported case), and equal.
EXPONENTS = ((-60, 60, 0), (60, -60, -60), (2, 30, 30), (0, 0, 0))


def _reference(ka: int, kb: int, kz: int, p: bool) -> list[np.ndarray]:
    a, b, z = A * 2.0 ** ka, B * 2.0 ** kb, Z * 2.0 ** kz
    return [np.minimum(a, b), np.maximum(a, b), np.clip(a, -b, b), np.where(a < b, a, b),
            a if p else b, a > z, z >= a, b == z]


@pytest.mark.parametrize("dtype", DTYPES)
def test_picked_operand_and_compare_are_exact_far_apart(dtype: str) -> None:
    data_type = DTYPES[dtype]
    scaled = compile_module(rewrite_text(MODULE, f"scalify{{data-dtype={dtype}}},simplify"))
    for ka, kb, kz in EXPONENTS:
        for p in (True, False):
            feed = [A.astype(data_type), np.float32(2.0 ** ka), B.astype(data_type),
                    np.float32(2.0 ** kb), np.array(p), Z.astype(data_type),
                    np.float32(2.0 ** kz)]
            out = run_executable(scaled, feed)
            got = [out[2 * i].astype(np.float64) * np.float64(out[2 * i + 1])
                   for i in range(5)] + out[10:]
            for index, (want, have) in enumerate(zip(_reference(ka, kb, kz, p), got,
                                                     strict=True)):
                np.testing.assert_array_equal(
                    have, want, err_msg=f"{dtype}, scales 2^{ka}, 2^{kb}, 2^{kz}, p={p}, "
                                        f"result {index}")


# select(p, a^3, b): with a at scale 2^100, a^3's scale is 2^300 and b's 2^-1, 2^301 apart
# in the i32 exponents. The original's a^3 overflows where p drops it; where p keeps a^3,
# a is 0. The midpoint (2^150) flushed b's data to 0 before the amax saw it.
FAR_SELECT = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<4xi1>)
    -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<4xf32>
  %1 = stablehlo.multiply %0, %a : tensor<4xf32>
  %2 = stablehlo.select %p, %1, %b : tensor<4xi1>, tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_of_branches_2e300_apart_keeps_the_picked_values(dtype: str) -> None:
    data_type = DTYPES[dtype]
    scaled = compile_module(rewrite_text(FAR_SELECT, f"scalify{{data-dtype={dtype}}},simplify"))
    a = np.array([0.0, 1.0, 0.0, 1.5])
    b = np.array([1.0, -2.0, 3.0, 0.75])
    p = np.array([True, False, True, False])
    for ka, kb in ((100, -1), (-100, 1), (120, -120)):
        out = run_executable(scaled, [a.astype(data_type), np.float32(2.0 ** ka),
                                      b.astype(data_type), np.float32(2.0 ** kb), p])
        got = out[0].astype(np.float64) * np.float64(out[1])
        want = np.where(p, 0.0, b * 2.0 ** kb)
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype}, 2^{ka}, 2^{kb}")


# Unit data at 2^-14 and below: y = x/2 - 2 (and 32/x - 2) is dominated by the constant, and
# under common-scale=first (the f32 default) it kept x's scale, so y's data was 2^15 off unit
# and 30 Clenshaw products overflowed it. An add whose result products raise to a power is
# rescaled once (rewrites/drift.py).
@pytest.mark.parametrize("k", (14, 20, -14, -20))
def test_bessel_i0e_is_exact_with_scaled_inputs(k: int) -> None:
    """bessel_i0e (two Clenshaw series and a select; issue 22, section 7), f32 data, unit
    data at scale 2^k: the discarded series is 2^(30k) from the picked one in the i32
    exponents; relative error was 1.0."""
    x = np.linspace(0.1, 20, 64).astype(np.float32).reshape(8, 8)
    step = compile_scaled(jax.lax.bessel_i0e, x, return_scaled=False,
                          policy=Policy(data_dtype="float32", fp8_dots=False))
    scale = np.float32(2.0 ** k)
    got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
    want = np.asarray(jax.jit(jax.lax.bessel_i0e)(jnp.asarray(x) * scale))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _layer_norm_eps(x: jax.Array) -> jax.Array:
    centred = x - x.mean(-1, keepdims=True)
    return centred * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)


def _rms_prop_direction(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(x * x + 1e-8)


# Values near 1e-24 (2^-80) whose squares, 2^-160, meet an eps: under common-scale=first
# (the f32 and bf16 default) the eps was brought to the square's scale, 2^140 times its data,
# past f32's range: the layer norm was 0 and the RMSprop direction 16 times too large.
@pytest.mark.parametrize("data_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fn", [_layer_norm_eps, _rms_prop_direction])
@pytest.mark.parametrize("k", (-40, -80, -100))
def test_an_eps_added_to_a_square_far_below_it_keeps_its_value(
        data_dtype: str, fn: Any, k: int) -> None:
    x = np.array([[1.0, -0.5, 0.25, 0.75], [0.5, 2.0, -1.0, 0.125]], np.float32) * 2.0 ** k
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    got = np.asarray(step(jnp.asarray(x)))
    want = np.asarray(jax.jit(fn)(jnp.asarray(x)))
    rtol = 1e-6 if data_dtype == "float32" else 1e-2
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


def _clip(x: jax.Array) -> jax.Array:
    return jnp.clip(x, -1.0, 1.0)


def _clip_small(x: jax.Array) -> jax.Array:
    return jnp.clip(x, -1e-4, 1e-4)


def _lax_clamp(x: jax.Array) -> jax.Array:
    return jax.lax.clamp(-2.0, x, 0.5)


def _min_then_max(x: jax.Array) -> jax.Array:
    return jnp.maximum(jnp.minimum(x, 3.0), -3.0)


def _where_caps(x: jax.Array) -> jax.Array:
    return jnp.where(x > 2.0, 2.0, jnp.where(x < -1.0, -1.0, x))


def _clipped_update(x: jax.Array) -> jax.Array:
    return 1.0 - 0.1 * jnp.clip(x, -1.0, 1.0)  # w - lr * clip(g)


def _log_of_clip(x: jax.Array) -> jax.Array:
    return jnp.log(jnp.clip(jnp.abs(x), 1e-8, 1.0))


# A clip between constants of gradients at 2^30 (f16 data): the bounds followed the operand's
# scale, 2^-30 of it, and flushed to 0, so the clip was 0 where the original gives -1 or 1.
@pytest.mark.parametrize("data_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fn", [_clip, _clip_small, jax.nn.relu6, _lax_clamp, _min_then_max,
                                jax.nn.hard_tanh, _where_caps, _clipped_update, _log_of_clip])
def test_a_clip_between_constants_keeps_its_bounds_at_any_scale(data_dtype: str,
                                                                 fn: Any) -> None:
    x = np.array([-3.0, -1.5, -0.5, 0.0, 0.25, 0.5, 2.0, 5.0], np.float32)
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    rtol = 1e-6 if data_dtype == "float32" else 1e-2
    for k in (-30, 0, 30):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-3 * np.abs(want).max(),
                                   err_msg=f"scale 2^{k}")


def _share_of_a_positive_guard(x: jax.Array) -> jax.Array:
    return x / (jnp.maximum(x, 1e-6) + x)


def _share_of_a_negative_guard(x: jax.Array) -> jax.Array:
    return -x / (jnp.minimum(-x, -1e-6) - x)


def _share_of_a_select_guard(x: jax.Array) -> jax.Array:
    return x / (jnp.where(x < 1e-6, 1e-6, x) + x)


# A one-sided guard's constant (max(x, eps), eps > 0) followed x's scale 2^30 and flushed:
# 0 / (0 + 0) was NaN where the original gives 0 (f16 data).
@pytest.mark.parametrize("fn", [_share_of_a_positive_guard, _share_of_a_negative_guard,
                                _share_of_a_select_guard])
def test_a_guard_constant_keeps_its_side_of_zero_at_any_scale(fn: Any) -> None:
    x = np.array([0.0, 1e-3, 0.5, 1.0, 2.0, 100.0], np.float32)
    step = compile_scaled(fn, x, return_scaled=False, policy=Policy(fp8_dots=False))
    for k in (0, 30, 60):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale))
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3, err_msg=f"scale 2^{k}")


# The same guard beside data whose scale is static and 2^52 above it: iota * 1e9.
STATIC_GUARD = """
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %i = stablehlo.iota dim = 0 : tensor<4xf32>
  %cst = stablehlo.constant dense<1.000000e+09> : tensor<4xf32>
  %v = stablehlo.multiply %i, %cst : tensor<4xf32>
  %e = stablehlo.constant dense<9.99999997E-7> : tensor<4xf32>
  %m = stablehlo.maximum %v, %e : tensor<4xf32>
  %s = stablehlo.add %m, %v : tensor<4xf32>
  %d = stablehlo.divide %v, %s : tensor<4xf32>
  %r = stablehlo.add %d, %arg0 : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_a_guard_beside_a_static_scale_far_above_it_keeps_its_side_of_zero() -> None:
    rewritten = rewrite_text(STATIC_GUARD, "scalify{data-dtype=f16},simplify")
    data, scale = run_executable(compile_module(rewritten),
                                 [np.zeros(4, np.float16), np.float32(1.0)])
    want = run_executable(compile_module(STATIC_GUARD), [np.zeros(4, np.float32)])[0]
    np.testing.assert_allclose(np.asarray(data, np.float32) * scale, want, rtol=1e-3)


def _remainder_by_one(x: jax.Array) -> jax.Array:
    return jnp.remainder(x, 1.0)  # lax.rem plus a sign fix: a negative x gives 1 + rem


def _fmod_by_three_quarters(x: jax.Array) -> jax.Array:
    return jnp.fmod(x, 0.75)


# remainder at the common (largest) scale flushed the smaller operand in f16 data: x at 2^30
# divided by a 0 (NaN), and x at 2^-30 was taken as 0 (0 where the original gives x, or
# 1 + x for a negative x).
@pytest.mark.parametrize("data_dtype", ["float32", "float16"])
@pytest.mark.parametrize("fn", [_remainder_by_one, _fmod_by_three_quarters])
def test_a_remainder_is_exact_at_any_spread(data_dtype: str, fn: Any) -> None:
    x = np.array([-3.25, -1.5, -0.5, 0.0, 0.25, 0.625, 2.0, 5.5], np.float32)
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    for k in (-30, 0, 30):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale))
        # f16: one scale per tensor holds remainder_by_one's 1 + x (x < 0) beside x (x > 0)
        # at 2^-30 only to 2^-24 of the largest element, as any tensor spanning 2^30
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max(),
                                   err_msg=f"scale 2^{k}")


def _clip_by_norm(x: jax.Array) -> jax.Array:
    return x * jnp.minimum(1.0, 1.0 / (jnp.linalg.norm(x) + 1e-6))


def _capped_magnitude(x: jax.Array) -> jax.Array:
    return jnp.minimum(jnp.abs(x), 0.75) * x


# min(1, c / norm) of a small gradient: the factor's scale followed 1 / norm (2^20 for x at
# 2^-30) and its 1 was data 2^-20, subnormal in f16, so x times it kept 4 bits (1.3% off);
# min(|x|, 0.75) of x at 2^30 flushed the 0.75. The operand is never negative, so each is a
# clamp to [0, c] at a scale c fits at. The other direction, an operand far below its bound
# (x at 2^30 for the clip, 2^-30 for the cap), still loses bits: the bound's data must stay
# below 2^15, which puts the operand's subnormal (constant_floor).
@pytest.mark.parametrize("fn, scales", [(_clip_by_norm, (-30, 0)), (_capped_magnitude, (0, 30))])
def test_a_cap_of_a_value_of_known_sign_keeps_its_bits(fn: Any, scales: tuple[int, ...]) -> None:
    x = np.random.default_rng(0).normal(size=16).astype(np.float32)  # bits to lose
    step = compile_scaled(fn, x, return_scaled=False, policy=Policy(fp8_dots=False))
    for k in scales:
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale))
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=0, err_msg=f"scale 2^{k}")



def _amsgrad_like(g: jax.Array, nu_max: jax.Array, count: jax.Array) -> tuple:
    """AMSGrad's running maximum of the bias-corrected second moment, its root applied."""
    count = count + 1
    nu_hat = 0.001 * g * g / (1 - 0.999 ** count).astype(jnp.float32)
    nu_max = jnp.maximum(nu_max, nu_hat)
    return g / (jnp.sqrt(nu_max) + 1e-8), nu_max, count


@pytest.mark.parametrize("data_dtype", ["float16", "bfloat16"])
def test_a_maximum_of_a_zero_state_and_data_far_from_one_stays_finite(data_dtype: str) -> None:
    """With f16 data the all-zero nu_max comes at 2^-126, sqrt-encoded: its square's scale is
    2^-252, and the bias-corrected moment's (about 2^-18, data near 1000: a quotient by 0.001
    in f32) was moved up half their spread, 2^117: inf, and every later update 0."""
    g = jnp.asarray(np.random.default_rng(0).normal(size=(8, 16)) * 0.1, jnp.float32)
    args = (g, jnp.zeros_like(g), jnp.int32(0))
    step = compile_scaled(_amsgrad_like, *args, policy=Policy(data_dtype=data_dtype,
                                                              fp8_dots=False),
                          return_scaled=False)
    want, got = args, args
    for _ in range(3):
        want = jax.jit(_amsgrad_like)(g, *want[1:])
        got = step(g, *got[1:])
        for have, expected in zip(got[:2], want[:2], strict=True):
            np.testing.assert_allclose(np.asarray(have), np.asarray(expected), rtol=2e-2)


def _nan_to_num_of_log(x: jax.Array) -> jax.Array:
    return jnp.nan_to_num(jnp.log(x))


def _where_large_constant(x: jax.Array) -> jax.Array:
    return jnp.where(x > 2.0, 1e36, jnp.tanh(x))


def _pad_with_large_constant(x: jax.Array) -> jax.Array:
    return jnp.pad(x * 0.3, 2, constant_values=3e38)


def _concatenate_with_large_constant(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x * 0.3, jnp.full((2,), -2e38, jnp.float32)])


def _scatter_of_large_constant(x: jax.Array) -> jax.Array:
    return jnp.zeros((10,), jnp.float32).at[1:9].set(x).at[0].set(jnp.finfo(jnp.float32).max)


def _sum_with_large_init(x: jax.Array) -> jax.Array:
    # x's inf: the two sums' runtime scales meet 2^137 apart, beyond f32's normal range, and
    # the one flushing factor of that ratio is 0 (left: only beside a constant is it split)
    finite = x[:-1]
    return jax.lax.reduce(finite, np.float32(1e30), jax.lax.add, (0,)) + jnp.sum(finite)


def _select_n_of_constants_far_apart(x: jax.Array) -> jax.Array:
    which = jnp.arange(8) % 3
    return jax.lax.select_n(which, jnp.full((8,), 1e-30), jnp.full((8,), 1e30), x)


# f32 data promises the original's bits. nan_to_num's finfo(f32).max (2^127) met log(x)'s
# static scale 126 binades below it, within the whole normal range, so both went to 2^127
# and every value below 2 became a subnormal that XLA flushed to 0 (its gradient was
# non-finite where the original's is not). A pad of 3e38 onto x took x's scale, 2^129
# below the constant's, and came out 7.5e37 (the factor clamped to 2^127). tanh's values
# near 0 went 2^120 down to 1e36's scale, below f32's normal range. A scatter of
# finfo(f32).max into x's tensor took x's scale and overflowed; select_n's nested selects
# met at midpoints that took 1e30 to 2^70 and then 2^65 further (inf), or 1e-30 below f32's
# normals beside x at 2^40. A sum whose init is 1e30 took x's scale at 2^-40, the factor
# to it clamped at 2^127: 1e30 / 4096.
@pytest.mark.parametrize("fn", [_nan_to_num_of_log, _where_large_constant,
                                _pad_with_large_constant, _concatenate_with_large_constant,
                                _scatter_of_large_constant, _select_n_of_constants_far_apart,
                                _sum_with_large_init])
def test_f32_data_keeps_values_beside_constants_far_from_them(fn: Any) -> None:
    x = np.array([-1.0, 0.0, 1e-3, 0.3, 1.0, 1.7, 2.5, np.inf], np.float32)
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype="float32", fp8_dots=False))
    for k in (-40, -2, 0, 1, 40):
        scaled_x = x * np.float32(2.0 ** k)
        got = np.asarray(step(jnp.asarray(scaled_x)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(scaled_x)))
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32),
                                      err_msg=f"x at 2^{k}")


def test_f32_data_gradient_of_nan_to_num_is_the_original() -> None:
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)

    def grad(x: jax.Array) -> jax.Array:
        return jax.grad(lambda x: jnp.sum(jnp.nan_to_num(jnp.log(jnp.abs(x))) ** 2))(x)

    got = compile_scaled(grad, x, return_scaled=False,
                         policy=Policy(data_dtype="float32", fp8_dots=False))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(grad)(x)))


_F32 = jnp.finfo(jnp.float32)


def _max_reduce_from_sentinel(x: jax.Array) -> jax.Array:
    return jax.lax.reduce(x, _F32.min, jax.lax.max, (1,))


def _min_reduce_from_sentinel(x: jax.Array) -> jax.Array:
    return jax.lax.reduce(x, _F32.max, jax.lax.min, (1,))


def _max_with_large_initial(x: jax.Array) -> jax.Array:
    return jnp.max(x, axis=1, initial=-1e9)


def _max_pool_from_sentinel(x: jax.Array) -> jax.Array:
    return jax.lax.reduce_window(x, _F32.min, jax.lax.max, (1, 2), (1, 2), "VALID")


def _maximum_with_sentinel(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, _F32.min)


def _clip_wide(x: jax.Array) -> jax.Array:
    return jnp.clip(x, -1e4, 1e4)


_MASK = np.arange(48).reshape(6, 8) % 3 != 1  # no row all masked


def _masked_max(x: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(_MASK, x, _F32.min), axis=1)


def _masked_min(x: jax.Array) -> jax.Array:
    return jnp.min(jnp.where(_MASK, x, _F32.max), axis=1)


# f16 data holds 2^40 at one scale, so a constant far above the data's scale cannot be held
# beside it. A max, min or clamp takes a constant on the far side of 0 (a max's -1e9 or
# finfo(f32).min, a clip's -1 and 1, a max reduce's init) only where the data passes it,
# which finite data far below it never does: such a constant follows the data's scale,
# saturated to +-65504. Before, it set a floor under the scale (or, as a reduce's init, the
# common scale's maximum took its 2^128), and the data was flushed: a max reduce from
# finfo(f32).min gave 0 at every scale, clip(x, -1e4, 1e4) of values at 2^-24 gave 0. A
# masked max's where(mask, x, finfo.min) read only by max reduces takes its sentinel the
# same way (it gave 0 at 2^-40).
@pytest.mark.parametrize("fn", [_max_reduce_from_sentinel, _min_reduce_from_sentinel,
                                _max_with_large_initial, _max_pool_from_sentinel,
                                _maximum_with_sentinel, _clip_wide, _clip, jax.nn.relu6,
                                _masked_max, _masked_min])
def test_f16_data_far_below_a_constant_taken_only_past_it_keeps_its_values(fn: Any) -> None:
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype="float16", fp8_dots=False))
    for k in (-40, -24, 0, 12):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        want = np.asarray(jax.jit(fn)(jnp.asarray(x) * scale))
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=0, err_msg=f"scale 2^{k}")


# The max reduce's result handed back directly is computed in f32, where the common scale's
# maximum moved x's data 2^127 down: an exponent clamped at -127 builds the factor 0, and
# x's -inf times 0 was NaN.
def test_an_f16_step_max_reduce_from_a_sentinel_keeps_an_infinity_out_of_its_result() -> None:
    x = np.array([-np.inf, -3.0, -0.5, 0.0, 0.25, 2.0, 1.0], np.float32)

    def fn(x: jax.Array) -> jax.Array:
        return jax.lax.reduce(x, _F32.min, jax.lax.max, (0,))

    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype="float16", fp8_dots=False))
    for k in (-40, 0):
        scale = np.float32(2.0 ** k)
        got = np.asarray(step(ScaledArray(jnp.asarray(x), scale)))
        assert got == 2.0 * scale, f"scale 2^{k}: {got}"


def _plus_a_far_constant(x: jax.Array) -> jax.Array:
    return x + 1e30


def _far_constant_minus(x: jax.Array) -> jax.Array:
    return 1e30 - x


def _padded_with_a_far_constant(x: jax.Array) -> jax.Array:
    return jnp.pad(x, 1, constant_values=3e38)


def _sum_from_a_far_init(x: jax.Array) -> jax.Array:
    return jax.lax.reduce(x, np.float32(1e30), jax.lax.add, (0,))


# x at 2^-40 taken to 1e30's scale moves 2^-140, past f32's normal range: one factor built
# from an exponent clamped at -127 is 0.0, and x's inf times 0 was NaN where the original
# gives inf (every data type; in f16 data the pad of 3e38 too, at any scale of x). Beside
# such a constant the ratio is now applied as two normal factors.
@pytest.mark.parametrize("data_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fn", [_plus_a_far_constant, _far_constant_minus,
                                _padded_with_a_far_constant, _sum_from_a_far_init])
def test_an_infinity_beside_a_far_constant_stays_infinite(data_dtype: str, fn: Any) -> None:
    x = np.array([-1.0, 0.0, 1e-3, 0.3, 1.0, 1.7, 2.5, np.inf], np.float32)
    step = compile_scaled(fn, x, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    for k in (-40, 0):
        scale = np.float32(2.0 ** k)
        got = np.atleast_1d(np.asarray(step(ScaledArray(jnp.asarray(x), scale))))
        want = np.atleast_1d(np.asarray(jax.jit(fn)(jnp.asarray(x) * scale)))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"2^{k}")
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=f"2^{k}")
        # one f16 tensor holds 2^40: a pad of 3e38 beside 1e-12 keeps only the 3e38
        finite = np.abs(want[np.isfinite(want)])
        held = np.isfinite(want) & (np.abs(want) >= finite.max(initial=0.0) * 2.0 ** -24)
        np.testing.assert_allclose(got[held], want[held], rtol=1e-2, err_msg=f"x at 2^{k}")
