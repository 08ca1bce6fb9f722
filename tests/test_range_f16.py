"""f16 data with power-of-two scales covers tensors from 1e-9 to 1e9, which plain f16 cannot."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_module_source, rewrite_text
from scalify_hlo.runner import run_module
from scalify_hlo.signature import (
    entry_signature,
    input_data_dtypes,
    join_outputs,
    split_inputs,
)
from tests.step_helpers import assert_close_per_tensor

# x ~ 1e9, w ~ 1e-9, s ~ 1e-9: dot products, products, sums and a sqrt across the range.
WIDE_RANGE = """
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %s: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %y = stablehlo.multiply %h, %s : tensor<8x4xf32>
  %sq = stablehlo.multiply %x, %x : tensor<8x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %norm = stablehlo.sqrt %sum : tensor<8xf32>
  %c = stablehlo.constant dense<1.0e-3> : tensor<8x16xf32>
  %z = stablehlo.multiply %x, %c : tensor<8x16xf32>
  %y2 = stablehlo.add %y, %y : tensor<8x4xf32>
  return %y, %y2, %norm, %z : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x16xf32>
}
"""


def test_f16_data_spans_1e_minus_9_to_1e9() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 16)) * 1e9).astype(np.float32)
    w = (rng.standard_normal((16, 4)) * 1e-9).astype(np.float32)
    s = (rng.standard_normal((8, 4)) * 1e-9).astype(np.float32)
    with np.errstate(over="ignore"):  # plain f16 overflows x and flushes w
        assert np.isinf(np.float16(x)).any() and (np.float16(w) == 0).all()
    reference = run_module(WIDE_RANGE, [x, w, s])
    signature = entry_signature(WIDE_RANGE)
    scaled = rewrite_text(WIDE_RANGE, "scalify{data-dtype=f16},simplify")
    raw = run_module(scaled, split_inputs(signature, [x, w, s], data_dtype=np.float16))
    # The norm, a sqrt of a sum of squares, is in a square class: f32 data.
    assert [r.dtype for r in raw[0::2]] == [np.float16, np.float16, np.float32, np.float16]
    got = join_outputs(signature, raw)
    # f16 keeps 11 significant bits: a few roundings of 2^-11 each, plus a 16-term dot.
    assert_close_per_tensor(reference, got, rtol=4e-3)


# Adam's second moment and update, as optax writes them, for one parameter tensor.
ADAM_UPDATE = """
func.func public @main(%g: tensor<256xf32>, %mu: tensor<256xf32>, %nu: tensor<256xf32>)
    -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  %b1 = stablehlo.constant dense<0.9> : tensor<256xf32>
  %c1 = stablehlo.constant dense<0.1> : tensor<256xf32>
  %b2 = stablehlo.constant dense<0.999> : tensor<256xf32>
  %c2 = stablehlo.constant dense<0.001> : tensor<256xf32>
  %eps = stablehlo.constant dense<1.0e-8> : tensor<256xf32>
  %m0 = stablehlo.multiply %b1, %mu : tensor<256xf32>
  %m1 = stablehlo.multiply %c1, %g : tensor<256xf32>
  %m = stablehlo.add %m0, %m1 : tensor<256xf32>
  %sq = stablehlo.multiply %g, %g : tensor<256xf32>
  %v0 = stablehlo.multiply %b2, %nu : tensor<256xf32>
  %v1 = stablehlo.multiply %c2, %sq : tensor<256xf32>
  %v = stablehlo.add %v0, %v1 : tensor<256xf32>
  %root = stablehlo.sqrt %v : tensor<256xf32>
  %den = stablehlo.add %root, %eps : tensor<256xf32>
  %u = stablehlo.divide %m, %den : tensor<256xf32>
  return %u, %m, %v : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}
"""


def _adam_update(pipeline: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    scaled = rewrite_text(ADAM_UPDATE, pipeline)
    signature = entry_signature(ADAM_UPDATE)
    scaled_signature = entry_signature(scaled)
    dtypes = input_data_dtypes(signature, scaled_signature)
    encoded_inputs, encoded_results = scaled_signature.original_encodings(signature)
    flat = split_inputs(signature, inputs, data_dtype=dtypes, encoded=encoded_inputs)
    return join_outputs(signature, run_module(scaled, flat), encoded_results)


def test_adam_second_moment_of_gradients_spanning_20_binades() -> None:
    """Gradients from 2^-20 to 1 times their largest (a sparse input's weights) and exact
    zeros. In f16 the small squares flush, nu is 0 where mu is not, and mu / eps is far
    from mu / sqrt(nu) (an MLP on MNIST diverges from it in two steps); with squares in
    f32 (square-dtype=auto) every update matches f32 Adam, and zero gradients give zero
    updates, not 0 / 0; so does nu stored by its square root in f16 (the default) or in
    f32 (square-encoding=none)."""
    rng = np.random.default_rng(0)
    g = (rng.choice([-1, 1], 256) * 2.0 ** rng.uniform(-20, 0, 256) * 1e-2).astype(np.float32)
    g[:16] = 0
    inputs = [g, np.zeros(256, np.float32), np.zeros(256, np.float32)]
    reference = run_module(ADAM_UPDATE, inputs)
    for encoding in ("auto", "none"):
        got = _adam_update(f"scalify{{data-dtype=f16 square-encoding={encoding}}},simplify",
                           inputs)
        for name, want, have in zip(("update", "mu", "nu"), reference, got, strict=True):
            assert np.all(np.isfinite(have)), name
            np.testing.assert_allclose(have, want, rtol=2e-3, atol=1e-3 * np.abs(want).max(),
                                       err_msg=f"{name}, square-encoding={encoding}")
        assert np.all(got[0][:16] == 0)
    flushed = _adam_update("scalify{data-dtype=f16 square-dtype=f16},simplify", inputs)
    nonzero = reference[0] != 0
    wrong = np.abs(flushed[0] - reference[0])[nonzero] > 0.5 * np.abs(reference[0])[nonzero]
    assert wrong.sum() >= 5, wrong.sum()  # entries where f16 nu flushed and mu did not


def test_mixed_data_types_pair_with_the_original() -> None:
    """``compare`` and ``run`` read each argument's data type from the rewritten signature."""
    from scalify_hlo.inputs import scaled_data_dtype, scaled_data_dtypes

    original = entry_signature(ADAM_UPDATE)
    scaled = entry_signature(rewrite_text(
        ADAM_UPDATE, "scalify{data-dtype=f16 square-encoding=none},simplify"))
    assert scaled_data_dtypes(original, scaled) == ("f16", "f16", "f32")
    assert scaled_data_dtype(original, scaled) == "f16+f32"
    assert input_data_dtypes(original, scaled) == [np.float16, np.float16, np.float32]
    assert scaled_data_dtypes(original, original) is None


# Squares carried by a while loop, returned by one branch of an if, summed by a reduce.
SQUARES_IN_REGIONS = """
func.func public @main(%g: tensor<8xf32>, %nu: tensor<8xf32>, %p: tensor<i1>)
    -> (tensor<8xf32>, tensor<8xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<3> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%v = %nu, %i = %c0) : tensor<8xf32>, tensor<i32>
  cond {
    %q = stablehlo.compare LT, %i, %c1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %q : tensor<i1>
  } do {
    %sq = stablehlo.multiply %g, %g : tensor<8xf32>
    %h = stablehlo.constant dense<0.5> : tensor<8xf32>
    %a = stablehlo.multiply %h, %v : tensor<8xf32>
    %b = stablehlo.add %a, %sq : tensor<8xf32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %b, %j : tensor<8xf32>, tensor<i32>
  }
  %s = "stablehlo.if"(%p) ({
    %t = stablehlo.sqrt %r#0 : tensor<8xf32>
    stablehlo.return %t : tensor<8xf32>
  }, {
    stablehlo.return %g : tensor<8xf32>
  }) : (tensor<i1>) -> tensor<8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %red = stablehlo.reduce(%r#0 init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  %rb = stablehlo.broadcast_in_dim %red, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %o = stablehlo.divide %s, %rb : tensor<8xf32>
  return %r#0, %o : tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("encoding, nu_dtype, rtol", [("none", np.float32, 2e-3),
                                                      ("auto", np.float16, 4e-3)])
def test_squares_through_while_if_and_reduce(encoding: str, nu_dtype: type,
                                             rtol: float) -> None:
    """Loop carries, branch results and reductions of wide values keep consistent types
    (f32 inside; at the boundary f32, or by the square root in f16 by default: nu is rounded
    to 11 bits of its root going in and coming out, 2^-10 of nu each)."""
    rng = np.random.default_rng(0)
    g = (rng.choice([-1, 1], 8) * 2.0 ** rng.uniform(-18, 0, 8)).astype(np.float32)
    nu = (np.abs(g) ** 2 * 0.3).astype(np.float32)
    scaled = rewrite_text(SQUARES_IN_REGIONS,
                          f"scalify{{data-dtype=f16 square-encoding={encoding}}},simplify")
    signature = entry_signature(SQUARES_IN_REGIONS)
    scaled_signature = entry_signature(scaled)
    dtypes = input_data_dtypes(signature, scaled_signature)
    assert dtypes[1] == nu_dtype
    encoded_inputs, encoded_results = scaled_signature.original_encodings(signature)
    for branch in (True, False):
        inputs = [g, nu, np.array(branch)]
        reference = run_module(SQUARES_IN_REGIONS, inputs)
        flat = split_inputs(signature, inputs, data_dtype=dtypes, encoded=encoded_inputs)
        got = join_outputs(signature, run_module(scaled, flat), encoded_results)
        for want, have in zip(reference, got, strict=True):
            np.testing.assert_allclose(have, want, rtol=rtol)


def test_a_constant_branch_stays_in_range_beside_a_zero_tensors_tiny_scale() -> None:
    """LAMB, LARS, Fromage and Adafactor divide parameter norms and keep a constant where a
    norm is 0: ``where(norm(b) > 0, norm(b) / norm(u), 1.0)``. A zero-initialized bias has
    the tiny f16 zero scale (2^-126), and the select's constant branch used to follow the
    ratio's scale down there, where 1.0 is 2^126 times f16's range: inf, then NaN weights."""
    import jax
    import jax.numpy as jnp
    import optax

    from scalify_hlo import Policy, compile_scaled, scale_tree, unscale_tree

    params = {"w": jnp.linspace(-1.0, 1.0, 32, dtype=jnp.float32).reshape(4, 8),
              "b": jnp.zeros((8,), jnp.float32)}
    x = jnp.linspace(-2.0, 2.0, 12, dtype=jnp.float32).reshape(3, 4)

    def loss(p: dict, x: jax.Array) -> jax.Array:
        return jnp.mean(jnp.tanh(x @ p["w"] + p["b"]) ** 2)

    for name, optimizer in (("lamb", optax.lamb(1e-2)), ("lars", optax.lars(1e-2)),
                            ("fromage", optax.fromage(1e-2))):
        state = optimizer.init(params)

        def step(p: dict, s: object, x: jax.Array, optimizer=optimizer) -> tuple:
            grads = jax.grad(loss)(p, x)
            updates, s = optimizer.update(grads, s, p)
            return optax.apply_updates(p, updates), s

        scaled = compile_scaled(step, params, state, x, policy=Policy(fp8_dots=False))
        got = unscale_tree(scaled(*scale_tree((params, state, x), jnp.float16)))
        want = jax.jit(step)(params, state, x)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            assert np.isfinite(np.asarray(g, np.float64)).all(), name
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=2e-2, atol=1e-3, err_msg=name)


def test_values_made_from_integers_stay_in_range_past_65504() -> None:
    """An int32 step count converted to f32 is inf in f16 data at scale 1 from 65520 on, so a
    learning-rate schedule of it (cosine decay, inverse square root) was 0 or NaN after 65k
    steps; an iota as long as a long sequence overflowed the same way. Both now take a scale
    that keeps them in f16's range (the count's measured at run time)."""
    import jax
    import jax.numpy as jnp
    import optax

    from scalify_hlo import Policy, compile_scaled, unscale_tree

    w = jnp.full((4,), 0.5, jnp.float32)
    cosine = optax.warmup_cosine_decay_schedule(0.0, 1.0, 1000, 200_000)
    cases = {
        "cosine schedule": (lambda c, w: w * cosine(c), jnp.int32(150_000)),
        "inverse square root": (lambda c, w: w / jnp.sqrt(c.astype(jnp.float32)),
                                jnp.int32(70_000)),
        "small count": (lambda c, w: w / jnp.sqrt(c.astype(jnp.float32)), jnp.int32(3)),
        "long iota": (lambda c, w: jnp.arange(100_000, dtype=jnp.float32)[-4:] * w,
                      jnp.int32(0)),
        "shifted ids": (lambda c, w: jnp.arange(70_000, 70_004) * w, jnp.int32(0)),
    }
    for name, (fn, count) in cases.items():
        step = compile_scaled(fn, count, w, policy=Policy(fp8_dots=False))
        got = np.asarray(unscale_tree(step(count, w)), np.float64)
        want = np.asarray(jax.jit(fn)(count, w), np.float64)
        np.testing.assert_allclose(got, want, rtol=5e-3, err_msg=name)


def test_a_sum_of_many_same_sign_values_accumulates_in_f32() -> None:
    """jnp.mean(|x|) over 512x512 values summed f16 data to about 2e5, past 65504: inf. Sums
    of f16 data now accumulate in f32 (as the f32 original does), then move sqrt(N) to the
    scale before rounding to f16."""
    import jax
    import jax.numpy as jnp

    from scalify_hlo import Policy, compile_scaled, unscale_tree

    x = jax.random.normal(jax.random.PRNGKey(0), (512, 512))
    for name, fn in {"mean abs": lambda x: jnp.mean(jnp.abs(x)),
                     "column sums": lambda x: jnp.sum(jnp.abs(x), axis=0),
                     "sum": lambda x: jnp.sum(x + 3.0)}.items():
        step = compile_scaled(fn, x, policy=Policy(fp8_dots=False))
        got = np.asarray(unscale_tree(step(x)), np.float64)
        want = np.asarray(jax.jit(fn)(x), np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-3, err_msg=name)


@pytest.mark.parametrize("data_dtype", ["float16", "bfloat16"])
def test_a_fully_masked_softmax_row_stays_finite(data_dtype: str) -> None:
    """Attention with a padding mask (Flax masks with ``finfo(f32).min``): a padded query row
    has every key masked. The mask constant follows the scores' scale and passes the data
    type's range; saturated to -inf, the row's softmax was -inf - (-inf) = NaN (an
    encoder-decoder transformer and a tagger were NaN from step 0 in f16)."""
    def attention(q: jax.Array, k: jax.Array, mask: jax.Array) -> jax.Array:
        scores = jnp.where(mask, q @ k.T, jnp.finfo(jnp.float32).min)
        return jax.nn.softmax(scores, axis=-1)

    q = jax.random.normal(jax.random.key(0), (4, 8))
    k = jax.random.normal(jax.random.key(1), (5, 8))
    mask = jnp.array([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    step = compile_scaled(attention, q, k, mask, return_scaled=False,
                          policy=Policy(data_dtype=data_dtype, fp8_dots=False))
    got = np.asarray(step(q, k, mask))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, np.asarray(jax.jit(attention)(q, k, mask)), atol=1e-2)


def test_a_stored_square_keeps_its_small_entries() -> None:
    """With squares in f16 and no root encoding (square-dtype=f16), the second moment is
    stored as it is: the update tail puts its amax at the top of f16's range, so squares 34
    binades below the largest are kept. At unit RMS, everything 2^-24 below the RMS flushed
    to zero, and Adam divided by eps on the next step."""
    def adam_step(w: jax.Array, nu: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        g = jax.grad(lambda w: jnp.sum(w * x))(w)
        nu = 0.999 * nu + 0.001 * g**2  # as optax writes it
        return w - 1e-3 * g / (jnp.sqrt(nu) + 1e-8), nu

    x = np.where(np.arange(256) % 2 == 0, 1.0, 2.0 ** -17).astype(np.float32)
    w, nu = np.ones(256, np.float32), np.zeros(256, np.float32)
    step = compile_scaled(adam_step, w, nu, x,
                          policy=Policy(square_dtype="float16", fp8_dots=False))
    _, got = step(w, nu, x)
    want = 0.001 * x.astype(np.float64) ** 2
    got = np.asarray(got.unscale())
    np.testing.assert_allclose(got[::2], want[::2], rtol=1e-3)
    # 2^-20 of the largest data in f16: a subnormal with 4 significant bits, not zero.
    np.testing.assert_allclose(got[1::2], want[1::2], rtol=2**-5)


@pytest.mark.parametrize("magnitude", [3.7e37, 1e20])
def test_a_wide_result_past_1e19_keeps_its_value(magnitude: float) -> None:
    """A result computed unscaled in f32 (a constant gradient, a nonlinear op's output) is
    measured before it is stored in f16: from |x| = 1.8e19 on its f32 sum of squares is inf,
    and the rescale kept the data as it was (inf in f16). Its amax places it instead."""
    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)

    def fn(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        gradient = jax.grad(lambda x: jnp.sum(x * magnitude))(x)
        return gradient, jnp.exp(x + float(np.log(magnitude)))

    got = compile_scaled(fn, x, return_scaled=False)(x)
    for got_leaf, want_leaf in zip(got, fn(x), strict=True):
        np.testing.assert_allclose(np.asarray(got_leaf), np.asarray(want_leaf), rtol=2e-3)


@pytest.mark.parametrize("data_dtype", ["float16", "bfloat16"])
def test_f32_largest_as_a_constant_stays_finite(data_dtype: str) -> None:
    """``jnp.finfo(f32).max`` (a fill value) has 24 mantissa bits: rounded to nearest in f16
    or bf16 data its mantissa is 2.0, which at scale 2^127 is inf. The data is rounded
    toward zero there instead (bf16's largest, 0.4% below)."""
    largest = float(jnp.finfo(jnp.float32).max)
    x = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32).reshape(2, 4)

    def fn(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return 2.0 * x, jnp.full((2, 4), largest), jnp.full((3,), -largest)

    got = compile_scaled(fn, x, policy=Policy(data_dtype=data_dtype, fp8_dots=False),
                         return_scaled=False)(x)[1:]
    for leaf, sign in zip(got, (1.0, -1.0), strict=True):
        np.testing.assert_allclose(np.asarray(leaf), sign * largest, rtol=5e-3)


_GUARDED_FROM_ZERO = {
    "masked-mean": lambda x, m: jnp.sum(x * m, 1) / (jnp.sum(m, 1) + 1e-9),
    "sign-like": lambda x, m: x / (jnp.abs(x) + 1e-8),
    "maximum": lambda x, m: x / jnp.maximum(m, 1e-7),
    "where": lambda x, m: x / jnp.where(m == 0, 1e-7, m),
    "clip": lambda x, m: x / jnp.clip(m, 1e-7, None),
    "log": lambda x, m: jnp.log(m * jnp.abs(x) + 1e-9),
    "log-maximum": lambda x, m: jnp.log(jnp.maximum(m * jnp.abs(x), 1e-12)),
    "cross-entropy": lambda x, m: -jnp.sum(m * jnp.log(jax.nn.softmax(x) * m + 1e-9), 1),
    "rsqrt": lambda x, m: jax.lax.rsqrt(m * jnp.abs(x) + 1e-8),
    "through-sqrt": lambda x, m: x / jnp.sqrt(m * jnp.abs(x) + 1e-8),
    "through-product": lambda x, m: x / (2.0 * (m + 1e-8)),
    "log1p": lambda x, m: jnp.log1p(m * jnp.abs(x) / (1 + jnp.abs(x)) - 1.0 + 1e-7),
}


@pytest.mark.parametrize("name", list(_GUARDED_FROM_ZERO))
def test_a_value_guarded_from_zero_by_a_small_constant_keeps_it(name: str) -> None:
    """``x / (y + eps)``, ``log(y + eps)`` and their kin where ``y`` is 0 (an all-padding row
    of a masked mean, a probability that is 0): in f16 data the constant sat at ``y``'s
    scale, where 1e-9 is 0, and the result was NaN or inf. A guarded operand of an op that
    is infinite at 0 is computed wide, as a square is."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(4, 8)), jnp.float32).at[0].set(0.0)
    mask = jnp.asarray(rng.uniform(0.0, 1.0, size=(4, 8)) > 0.5, jnp.float32).at[1].set(0.0)
    fn = _GUARDED_FROM_ZERO[name]
    got = np.asarray(compile_scaled(fn, x, mask, policy=Policy(fp8_dots=False),
                                    return_scaled=False)(x, mask))
    want = np.asarray(fn(x, mask))
    assert np.all(np.isfinite(got)), got
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * float(np.abs(want).max()))


def test_a_reciprocal_of_a_guarded_tensor_keeps_its_small_entries() -> None:
    """The gradient of ``sum(s * c / (c + eps))`` (a loss weighted by a mask count, 0 for an
    all-padding row) takes ``1 / (c + eps)``: 1e9 where ``c`` is 0, 0.125 where it is 8. At
    its RMS in f16 the small entries were 0, and so was every gradient."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(8, 16)), jnp.float32)
    mask = jnp.asarray(rng.uniform(size=(8, 16)) > 0.5, jnp.float32).at[:2].set(0.0)
    w = jnp.asarray(rng.normal(size=(16, 4)) / 4, jnp.float32)

    def gradient(w: jax.Array, x: jax.Array, mask: jax.Array) -> jax.Array:
        def loss(w: jax.Array) -> jax.Array:
            count = jnp.sum(mask, 1)
            return jnp.sum(jnp.sum((x @ w) ** 2, 1) * count / (count + 1e-9))
        return jax.grad(loss)(w)

    got = compile_scaled(gradient, w, x, mask, policy=Policy(fp8_dots=False),
                         return_scaled=False)(w, x, mask)
    want = gradient(w, x, mask)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=3e-3,
                               atol=3e-3 * float(jnp.max(jnp.abs(want))))


# Nonlinear results past f16's 65504 where f32 holds them: at scale 1 they were inf.
_GROWING = {
    "exp": jnp.exp,
    "expm1": jnp.expm1,
    "exp_summed": lambda x: jnp.sum(jnp.exp(x)),
    "power": lambda x: x ** 4.5,
    "cosh": jnp.cosh,
    "floor": lambda x: jnp.floor(x * 1e4),
    "round": lambda x: jnp.round(x * 1e4),
    "floor_of_a_static_scale": lambda x: jnp.floor(jnp.tanh(x / 20.0) * 1e6),
}


@pytest.mark.parametrize("name", list(_GROWING))
def test_a_nonlinear_result_past_65504_keeps_its_value(name: str) -> None:
    fn = _GROWING[name]
    x = jnp.asarray([[9.5, 10.0, 12.0, 15.0], [14.0, 11.0, 9.0, 13.0]], jnp.float32)
    step = compile_scaled(fn, x, return_scaled=False, policy=Policy(fp8_dots=False))
    want = np.asarray(jax.jit(fn)(x))
    np.testing.assert_allclose(np.asarray(step(x)), want, rtol=2e-3)


# Bounded exps (a softmax's exp(x - max x), also behind jnp.max's -inf initial, and along
# the other axis; the exact GELU's exp(-z^2)) and bounded ops (tanh) stay at scale 1 with no
# measurement; an exp of a value that may be positive is measured, and so is one of x minus
# its rows' maxima broadcast along the wrong axis (y[i, j] - max_k y[j, k]).
_MEASURED_NONLINEAR = """
func.func public @main(%x: tensor<2x4xf32>, %y: tensor<4x4xf32>) -> (tensor<2x4xf32>,
    tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
  %ninf2 = stablehlo.constant dense<0xFF800000> : tensor<2xf32>
  %mi = stablehlo.maximum %ninf2, %m : tensor<2xf32>
  %mb = stablehlo.broadcast_in_dim %mi, dims = [0] : (tensor<2xf32>) -> tensor<2x4xf32>
  %s = stablehlo.subtract %x, %mb : tensor<2x4xf32>
  %softmax = stablehlo.exponential %s : tensor<2x4xf32>
  %m0 = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
  %m0b = stablehlo.broadcast_in_dim %m0, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
  %s0 = stablehlo.subtract %x, %m0b : tensor<2x4xf32>
  %columns = stablehlo.exponential %s0 : tensor<2x4xf32>
  %sq = chlo.square %x : tensor<2x4xf32> -> tensor<2x4xf32>
  %nsq = stablehlo.negate %sq : tensor<2x4xf32>
  %gelu = stablehlo.exponential %nsq : tensor<2x4xf32>
  %t = stablehlo.tanh %x : tensor<2x4xf32>
  %e = stablehlo.exponential %x : tensor<2x4xf32>
  %my = stablehlo.reduce(%y init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  %other = stablehlo.broadcast_in_dim %my, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
  %s2 = stablehlo.subtract %y, %other : tensor<4x4xf32>
  %wrong_axis = stablehlo.exponential %s2 : tensor<4x4xf32>
  return %softmax, %columns, %gelu, %t, %e, %wrong_axis : tensor<2x4xf32>, tensor<2x4xf32>,
      tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>
}
"""


def test_only_nonlinear_results_that_can_pass_the_range_are_measured() -> None:
    result = rewrite_module_source(_MEASURED_NONLINEAR, "scalify{data-dtype=f16}")
    assert result.error is None, result.error
    assert result.context.stats.get("scalify.measured-nonlinear") == 2


def test_the_sign_analysis_reads_a_long_chain_once() -> None:
    """exp of a chain of 40 products of runtime values (no sign known): the analysis that
    looks for a nonpositive operand read both signs of every product's operand, 2^24 visits
    (63 s) before its depth limit; each value is classified once now (0.02 s)."""
    lines = ["func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {",
             "  %p0 = stablehlo.multiply %x, %y : tensor<4xf32>"]
    lines += [f"  %p{i} = stablehlo.multiply %p{i - 1}, %y : tensor<4xf32>" for i in range(1, 40)]
    lines += ["  %e = stablehlo.exponential %p39 : tensor<4xf32>", "  return %e : tensor<4xf32>",
              "}"]
    start = time.perf_counter()
    result = rewrite_module_source("\n".join(lines), "scalify{data-dtype=f16}")
    assert result.error is None, result.error
    assert time.perf_counter() - start < 10.0
    assert result.context.stats.get("scalify.measured-nonlinear") == 1


_INTEGER_CONSTANT = """
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %f = stablehlo.convert %one : (tensor<i32>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %r = stablehlo.add %x, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_an_integer_constant_converted_to_float_is_split_at_rewrite_time() -> None:
    """jnp.where(x > 1, 1, x) converts the int 1: an i32 can pass f16's range, so a
    converted integer's largest magnitude is measured at run time, but a constant of the
    program is known: its scale is static (a clamp between constants needs that)."""
    result = rewrite_module_source(_INTEGER_CONSTANT, "scalify{data-dtype=f16}")
    assert result.error is None, result.error
    assert not result.context.stats.get("scalify.integer-range")
    assert "stablehlo.reduce" not in result.output.decode()
    x = np.array([0.5, -2.0, 3.0, 1e4], np.float32)
    signature = entry_signature(_INTEGER_CONSTANT)
    scaled = rewrite_text(_INTEGER_CONSTANT, "scalify{data-dtype=f16},simplify")
    got = join_outputs(signature, run_module(scaled, split_inputs(signature, [x],
                                                                 data_dtype=np.float16)))
    np.testing.assert_allclose(got[0], x + 1.0, rtol=1e-3)


# |f(x)| <= 2|x|: at scale 1, tanh of x at 2^-20 kept an f16 subnormal's 4 bits (1.4% off)
# and flushed x at 2^-30; their results now follow the operand's scale (rules_small.py), the
# measured ones (tan, sinh, expm1 of a value that may be positive) at no smaller scale.
_VANISHING_AT_ZERO = {"tanh": jnp.tanh, "sin": jnp.sin, "erf": jax.scipy.special.erf,
                      "arctan": jnp.arctan, "arcsinh": jnp.arcsinh, "arcsin": jnp.arcsin,
                      "tan": jnp.tan, "sinh": jnp.sinh, "expm1": jnp.expm1,
                      "tanh gradient": jax.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2))}


@pytest.mark.parametrize("name", _VANISHING_AT_ZERO)
@pytest.mark.parametrize("exponent", [-30, -20, 0])
def test_a_bounded_op_that_vanishes_at_zero_keeps_small_values(name: str,
                                                              exponent: int) -> None:
    fn = _VANISHING_AT_ZERO[name]
    x = (np.random.default_rng(3).uniform(-0.9, 0.9, 16) * 2.0 ** exponent).astype(np.float32)
    step = compile_scaled(fn, x, policy=Policy(fp8_dots=False), return_scaled=False)
    want = np.asarray(jax.jit(fn)(x), np.float64)
    got = np.asarray(step(x), np.float64)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))
    if name.endswith("gradient"):  # a NaN gradient leaves its rescale's scale as it is
        return
    # An infinite operand's data is inf at any scale: tanh(inf) = 1 must still fit, and one
    # inf result (sinh) must not flush the others.
    x[:3] = np.inf, -np.inf, np.nan
    want = np.asarray(jax.jit(fn)(x), np.float64)
    got = np.asarray(step(x), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.max(np.abs(want[3:])))


# Ops without a scale rule run unscaled. At scale 1 in f16, a legacy dot of values near 4000
# overflowed and a batch norm's output for inputs near 2^-24 (epsilon dominates the
# variance: outputs near 2^-34) flushed; their results are measured now, at any scale.
_NO_RULE = """
func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %x: tensor<2x3xf32>,
                       %s: tensor<3xf32>, %o: tensor<3xf32>)
    -> (tensor<3x5xf32>, tensor<2x3xf32>) {
  %d = stablehlo.dot %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o)
      {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
      : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %d, %y : tensor<3x5xf32>, tensor<2x3xf32>
}
"""


@pytest.mark.parametrize("exponent", [-24, 0, 12])
def test_an_op_without_a_rule_keeps_its_results_in_range(exponent: int) -> None:
    rng = np.random.default_rng(5)
    shapes = [(3, 4), (4, 5), (2, 3), (3,), (3,)]
    inputs = [(rng.uniform(0.5, 1.0, s) * rng.choice([-1, 1], s) * 2.0 ** exponent)
              .astype(np.float32) for s in shapes]
    inputs[3] = np.abs(inputs[3])
    result = rewrite_module_source(_NO_RULE, "scalify{data-dtype=f16},simplify")
    assert result.error is None, result.error
    assert result.context.stats.get("scalify.fallback-ops") == 2
    signature = entry_signature(_NO_RULE)
    feed = split_inputs(signature, inputs, data_dtype=np.float16)
    data = [feed[2 * k].astype(np.float64) * feed[2 * k + 1] for k in range(len(inputs))]
    reference = run_module(_NO_RULE, [d.astype(np.float32) for d in data])  # f16-rounded
    got = join_outputs(signature, run_module(result.output.decode(), feed))
    assert_close_per_tensor(reference, got, rtol=4e-3)


_NO_RULE_PRODUCTS = """
func.func public @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %d = stablehlo.dot %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p = stablehlo.multiply %d, %d : tensor<4x4xf32>
  %q = stablehlo.dot_general %d, %d, contracting_dims = [1] x [0]
      : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %p, %q : tensor<4x4xf32>, tensor<4x4xf32>
}
"""


def test_products_of_an_op_without_a_rule_keep_f16s_headroom() -> None:
    """A measured result used to come at the top of f16's range (its largest near 2^14):
    its square and its product with itself were inf."""
    rng = np.random.default_rng(6)
    inputs = [rng.uniform(-1.0, 1.0, (4, 4)).astype(np.float32) for _ in range(2)]
    result = rewrite_module_source(_NO_RULE_PRODUCTS, "scalify{data-dtype=f16},simplify")
    assert result.error is None, result.error
    signature = entry_signature(_NO_RULE_PRODUCTS)
    feed = split_inputs(signature, inputs, data_dtype=np.float16)
    data = [feed[2 * k].astype(np.float64) * feed[2 * k + 1] for k in range(len(inputs))]
    reference = run_module(_NO_RULE_PRODUCTS, [d.astype(np.float32) for d in data])
    got = join_outputs(signature, run_module(result.output.decode(), feed))
    assert_close_per_tensor(reference, got, rtol=4e-3)


def test_a_pseudo_inverse_from_lapacks_svd_is_finite_in_f16_data() -> None:
    """``jnp.linalg.pinv``: LAPACK's SVD has no rule, and the dot of its factors was inf."""
    x = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    want = np.asarray(jax.jit(jnp.linalg.pinv)(x), np.float64)
    got = compile_scaled(jnp.linalg.pinv, x, policy=Policy(fp8_dots=False),
                         return_scaled=False)(x)
    np.testing.assert_allclose(np.asarray(got, np.float64), want,
                               atol=4e-3 * np.abs(want).max())


def test_a_second_moment_written_as_a_scaled_copy_times_itself_keeps_its_small_entries(
) -> None:
    """Prodigy writes its second moment as ``(1 - b2) * d * d`` with ``d = lr * g``: a product
    of ``(1 - b2) * d`` and ``d``, a square up to a factor. Seen as a product of two tensors
    it was not a square; its entries 2^-27 below the largest flushed in f16 data, and the
    update there was ``m / (lr * eps)``, 35 times too large after three steps. The runtime
    ``lr`` joins the square's class (through ``sqrt(nu) + lr * eps``) and comes back exactly:
    a rank-0 square keeps f32 data instead of a root in 16 bits."""
    def update(lr: jax.Array, m: jax.Array, nu: jax.Array, g: jax.Array
               ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        d = lr * g
        m = 0.9 * m + 0.1 * d
        nu = 0.999 * nu + (1 - 0.999) * d * d
        return -lr * m / (jnp.sqrt(nu) + lr * 1e-8), jnp.maximum(lr, 0.0), m, nu

    rng = np.random.default_rng(0)
    g = (rng.choice([-1, 1], 256) * 2.0 ** rng.uniform(-14, 0, 256) * 0.1).astype(np.float32)
    lr, m, nu = np.float32(1e-6), np.zeros(256, np.float32), np.zeros(256, np.float32)
    step = compile_scaled(update, lr, m, nu, g, policy=Policy(fp8_dots=False),
                          return_scaled=False)
    want, got = (lr, m, nu), (lr, m, nu)
    for _ in range(3):
        u_want, *want = jax.jit(update)(*want, g)
        u_got, *got = step(*got, g)
        np.testing.assert_allclose(np.asarray(u_got), np.asarray(u_want), rtol=1e-2)
        assert np.asarray(got[2]).min() > 0, "second-moment entries flushed to zero"
        assert float(got[0]) == float(want[0]), (float(got[0]), float(want[0]))
