"""Layers under ``lax.scan`` (stacked weights, the layout of Flax ``nn.scan`` and MaxText):
gradients in f16 data match fp32, and a few training steps under the default policy stay
finite and close to fp32.

The transposed scan carries what a scan loop carries (the accumulated gradients and stacked
per-layer outputs, entering as zeros; the causal mask's -1e9, passed in unchanged): they lost
their scales' meaning in the loop, and every weight gradient came out 0 or NaN in f16.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo.compile import compile_scaled
from scalify_hlo.examples.char_gpt import GPT, GPTConfig
from scalify_hlo.policy import Policy
from scalify_hlo.scaled_array import unscale_tree
from scalify_hlo.training.modes import make_train_step

F16 = Policy(data_dtype="float16", fp8_dots=False)
VOCAB, LENGTH, WIDTH, HEADS, LAYERS, BATCH = 16, 8, 16, 2, 2, 4
STEPS = 6


def _tokens(seed: int) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, (BATCH, LENGTH + 1))
    return jnp.asarray(x[:, :-1], jnp.int32), jnp.asarray(x[:, 1:], jnp.int32)


def _relative_errors(got: Any, want: Any) -> dict[str, float]:
    errors = jax.tree.map(lambda a, b: float(jnp.linalg.norm(jnp.asarray(a, jnp.float32) - b)
                                             / max(float(jnp.linalg.norm(b)), 1e-30)),
                          got, want)
    return {jax.tree_util.keystr(path): e
            for path, e in jax.tree_util.tree_flatten_with_path(errors)[0]}


def _assert_f16_gradients_match(loss: Any, params: Any) -> None:
    """One gradient evaluation in f16 data within 2e-2 of fp32 per leaf."""
    x, y = _tokens(0)
    grad = jax.value_and_grad(loss)
    want_loss, want = grad(params, x, y)
    got_loss, got = compile_scaled(grad, params, x, y, policy=F16, return_scaled=False)(
        params, x, y)
    errors = _relative_errors(got, want)
    assert max(errors.values()) < 2e-2, errors
    assert abs(float(got_loss) - float(want_loss)) < 1e-2 * float(want_loss)


def _assert_trains_like_fp32(loss: Any, params: Any, optimizer: Any) -> None:
    """A few steps under the default policy (FP8 dots, f16 data): finite, close to fp32."""
    step = make_train_step(loss, optimizer)
    state = optimizer.init(params)
    x, y = _tokens(1)
    scaled = compile_scaled(step, params, state, x, y)
    reference, scaled_state = (params, state), scaled.scale_args(params, state, x, y)[:2]
    fp32_step = jax.jit(step)
    want, got = [], []
    for seed in range(STEPS):
        x, y = _tokens(seed + 1)
        *reference, loss_ref = fp32_step(*reference, x, y)
        *scaled_state, loss_got = scaled(*scaled_state, x, y)
        want.append(float(loss_ref))
        got.append(float(loss_got.unscale()))
    assert np.all(np.isfinite(got)), got
    assert want[-1] < want[0], want  # it trains at all
    np.testing.assert_allclose(got, want, rtol=3e-2)
    # All weights together: Adam moves zero-initialized biases by +-lr per step whatever
    # the gradient's size, so a leaf of them alone differs in sign noise; FP8 dots move
    # the rest by about 1% in these steps (before the loop-carry fix: NaN).
    got_weights = jax.flatten_util.ravel_pytree(unscale_tree(scaled_state[0], jnp.float32))[0]
    want_weights = jax.flatten_util.ravel_pytree(reference[0])[0]
    assert bool(jnp.all(jnp.isfinite(got_weights)))
    error = jnp.linalg.norm(got_weights - want_weights) / jnp.linalg.norm(want_weights)
    assert float(error) < 5e-2, float(error)


# ----- (a) Flax nn.scan over the example GPT's blocks, rematerialized ----------------------
def _flax_gpt(remat_policy: str | None = None) -> tuple[Any, Any]:
    config = GPTConfig(VOCAB, LAYERS, WIDTH, HEADS, LENGTH, scan_layers=True, remat=True,
                       remat_policy=remat_policy)
    model = GPT(config)
    params = model.init(jax.random.key(0), _tokens(0)[0])["params"]

    def loss(p: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        logits = model.apply({"params": p}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    return loss, params


def test_flax_scan_gpt_f16_gradients_match_fp32() -> None:
    loss, params = _flax_gpt()
    assert params["blocks"]["Block_0"]["Dense_0"]["kernel"].shape[0] == LAYERS  # stacked
    _assert_f16_gradients_match(loss, params)


@pytest.mark.parametrize("saving", ["everything_saveable", "dots_saveable"])
def test_flax_scan_gpt_saving_residuals_f16_gradients_match_fp32(saving: str) -> None:
    """A remat policy that saves residuals: JAX hands the mask's -1e9 to the scan body as a
    loop-invariant carry, and the logits reach the select at a static scale. The sentinel
    must still follow the logits (before: it set the scale by its own exponent, 2^30, and
    flushed every logit to 0 in f16: gradients 60% off)."""
    _assert_f16_gradients_match(*_flax_gpt(saving))


def test_flax_scan_gpt_trains_like_fp32() -> None:
    loss, params = _flax_gpt()
    _assert_trains_like_fp32(loss, params, optax.adamw(3e-3, weight_decay=0.1))


# ----- (b) a plain lax.scan GPT: tied embedding, -inf mask, clip + AdamW -----------------
def _layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias


def _block(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    batch, length, width = x.shape
    head = width // HEADS
    q, k, v = jnp.split(_layer_norm(x, p["ln1"], p["b1"]) @ p["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(batch, length, HEADS, head) for t in (q, k, v))
    logits = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(head)
    causal = np.tril(np.ones((length, length), bool))
    weights = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1)
    y = jnp.einsum("bhts,bshd->bthd", weights, v).reshape(batch, length, width)
    x = x + y @ p["out"]
    h = _layer_norm(x, p["ln2"], p["b2"])
    return x + jax.nn.gelu(h @ p["up"], approximate=True) @ p["down"]


def _lax_scan_loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    h = params["embed"][x] + params["position"][None, : x.shape[1]]
    h, _ = jax.lax.scan(lambda carry, p: (_block(carry, p), None), h, params["blocks"])
    logits = _layer_norm(h, params["ln"], params["b"]) @ params["embed"].T  # tied
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def _lax_scan_params() -> Any:
    keys = iter(jax.random.split(jax.random.key(1), 8))

    def normal(*shape: int) -> jax.Array:
        return 0.02 * jax.random.normal(next(keys), shape)

    stacked = {"ln1": jnp.ones((LAYERS, WIDTH)), "b1": jnp.zeros((LAYERS, WIDTH)),
               "qkv": normal(LAYERS, WIDTH, 3 * WIDTH), "out": normal(LAYERS, WIDTH, WIDTH),
               "ln2": jnp.ones((LAYERS, WIDTH)), "b2": jnp.zeros((LAYERS, WIDTH)),
               "up": normal(LAYERS, WIDTH, 4 * WIDTH), "down": normal(LAYERS, 4 * WIDTH, WIDTH)}
    return {"embed": normal(VOCAB, WIDTH), "position": normal(LENGTH, WIDTH),
            "ln": jnp.ones(WIDTH), "b": jnp.zeros(WIDTH), "blocks": stacked}


def test_lax_scan_gpt_f16_gradients_match_fp32() -> None:
    _assert_f16_gradients_match(_lax_scan_loss, _lax_scan_params())


def test_lax_scan_gpt_trains_like_fp32() -> None:
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-3, weight_decay=0.1))
    _assert_trains_like_fp32(_lax_scan_loss, _lax_scan_params(), optimizer)


# ----- the two loop carries alone --------------------------------------------------------
@pytest.mark.parametrize("data_dtype", ["float16", "float32"])
def test_scan_outputs_and_sums_of_small_values(data_dtype: str) -> None:
    """Stacked outputs and a running sum of values at 2^-26 (gradients of a scanned layer):
    the zero-filled carries take the values' scale, not 1 (where f16 holds them as 0)."""
    xs = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4, 4)), jnp.float32) * 2.0**-26

    def fn(xs: jax.Array) -> tuple[jax.Array, jax.Array]:
        total, stacked = jax.lax.scan(lambda c, x: (c + x, 2.0 * x), jnp.zeros((4, 4)), xs)
        return total, stacked

    step = compile_scaled(fn, xs, policy=Policy(data_dtype=data_dtype, fp8_dots=False),
                          return_scaled=False)
    errors = _relative_errors(step(xs), fn(xs))
    assert max(errors.values()) < (1e-3 if data_dtype == "float16" else 1e-7), errors


@pytest.mark.parametrize("encoder_start", ["zeros", "ones"])
def test_scan_started_by_another_scans_carry(encoder_start: str) -> None:
    """An encoder scan's final carry starts a decoder scan (LSTM seq2seq): the decoder's
    loop enters with the encoder's exponent, not the unset one (the encoder's state read as
    0: its gradients were all zero in f16 and the decoder's 60% off; with an encoder that
    starts from ones, its gradient through the decoder's transposed carry was lost)."""
    rng = np.random.default_rng(0)
    w1, w2 = (jnp.asarray(rng.normal(size=(8, 8)) / np.sqrt(8), jnp.float32) for _ in range(2))
    xs = jnp.asarray(rng.normal(size=(5, 4, 8)) * 0.3, jnp.float32)
    weights = jnp.asarray(rng.normal(size=(5, 4, 8)), jnp.float32)

    def loss(w1: jax.Array, w2: jax.Array, xs: jax.Array) -> jax.Array:
        start = jnp.zeros((4, 8)) if encoder_start == "zeros" else jnp.full((4, 8), 0.5)
        state, _ = jax.lax.scan(lambda h, x: (jnp.tanh(h @ w1 + x), None), start, xs)
        _, hs = jax.lax.scan(lambda h, x: (jnp.tanh(h @ w2 + x),) * 2, state, xs)
        return jnp.sum(hs * weights)

    def grads(w1: jax.Array, w2: jax.Array, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.grad(loss, argnums=(0, 1))(w1, w2, xs)

    step = compile_scaled(grads, w1, w2, xs, policy=F16, return_scaled=False)
    errors = _relative_errors(step(w1, w2, xs), grads(w1, w2, xs))
    assert max(errors.values()) < 1e-2, errors


def _encoder_then_decoder(w: jax.Array, xs: jax.Array) -> jax.Array:
    state, _ = jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None), jnp.zeros((3, 6)), xs)
    return jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, state, xs)[1]


def _nested_scans(w: jax.Array, xs: jax.Array) -> jax.Array:
    def outer(acc: jax.Array, x: jax.Array) -> tuple[jax.Array, None]:
        inner, _ = jax.lax.scan(lambda a, y: (a + jnp.tanh(y @ w), None), acc, xs)
        return inner * 0.5 + x, None
    return jax.lax.scan(outer, jnp.zeros((3, 6)), xs)[0]


def _fori_then_scan(w: jax.Array, xs: jax.Array) -> jax.Array:
    h = jax.lax.fori_loop(0, 3, lambda i, h: h + jnp.tanh(xs[i] @ w), jnp.zeros((3, 6)))
    return jax.lax.scan(lambda c, x: (jnp.tanh(c @ w + x), c), h, xs)[1]


def _scan_result_starts_two_scans(w: jax.Array, xs: jax.Array) -> jax.Array:
    h, _ = jax.lax.scan(lambda c, x: (c + x @ w, None), jnp.zeros((3, 6)), xs)
    a, _ = jax.lax.scan(lambda c, x: (jnp.maximum(c, x), None), h, xs)
    b, _ = jax.lax.scan(lambda c, x: (c * 0.5 + x, None), h, xs)
    return a + b


def _scan_then_cond(w: jax.Array, xs: jax.Array) -> jax.Array:
    h, _ = jax.lax.scan(lambda c, x: (c + x @ w, None), jnp.zeros((3, 6)), xs)
    return jax.lax.cond(jnp.sum(xs) > 0, lambda h: h * 2.0, lambda h: h - 1.0, h)


def _zero_trip_loop_then_scan(w: jax.Array, xs: jax.Array) -> jax.Array:
    h = jax.lax.fori_loop(0, 0, lambda i, h: h + xs[i] @ w, jnp.zeros((3, 6)))
    return jax.lax.scan(lambda c, x: (c + x @ w, None), h, xs)[0]


def _scan_outputs(w: jax.Array, h: jax.Array, xs: jax.Array) -> jax.Array:
    return jax.lax.scan(lambda c, x: (jnp.tanh(c @ w + x), c), h, xs)[1]


def _scan_outputs_from_a_branch(w: jax.Array, xs: jax.Array) -> jax.Array:
    return jax.lax.cond(jnp.sum(xs) > 0, lambda h: _scan_outputs(w, h, xs),
                        lambda h: jnp.zeros_like(xs), xs[0])


def _scan_outputs_carried_by_a_loop(w: jax.Array, xs: jax.Array) -> jax.Array:
    return jax.lax.fori_loop(0, 3, lambda i, ys: _scan_outputs(w, ys[i], xs),
                             jnp.zeros_like(xs))


def _gradient_of(fn: Any) -> Any:
    def grad(w: jax.Array, xs: jax.Array) -> jax.Array:
        return jax.grad(lambda w: jnp.sum(fn(w, xs) ** 2))(w)
    return grad


@pytest.mark.parametrize("fn", [
    _encoder_then_decoder, _nested_scans, _fori_then_scan, _scan_result_starts_two_scans,
    _scan_then_cond, _zero_trip_loop_then_scan, _gradient_of(_nested_scans),
    _gradient_of(_fori_then_scan), _scan_outputs_from_a_branch, _scan_outputs_carried_by_a_loop,
    _gradient_of(_scan_outputs_carried_by_a_loop),
], ids=["encoder-decoder", "nested", "fori-then-scan", "one-result-two-scans", "scan-then-cond",
        "zero-trip", "grad-nested", "grad-fori-then-scan", "stack-from-branch",
        "stack-carried-by-loop", "grad-stack-carried-by-loop"])
def test_loop_results_and_carries_exact_under_max_common_scale(fn: Any) -> None:
    """Loops started from other loops' results or from an outer loop's carry, in f32 data
    with the f16 rule for common scales (the maximum, which skips an unset exponent): exact,
    so the loop rule is right and not merely f16-close.
    A carry whose exponent may be unset entered as unset whatever it held (4 of these 7
    were 13-100% off)."""
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(6, 6)) / 3, jnp.float32)
    xs = jnp.asarray(rng.normal(size=(4, 3, 6)) * 0.5, jnp.float32)
    pipeline = "inline,scalify{data-dtype=f32 common-scale=max},simplify"
    got = compile_scaled(fn, w, xs, pipeline=pipeline, return_scaled=False)(w, xs)
    want = fn(w, xs)
    assert float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want))) < 1e-6


@pytest.mark.parametrize("fn", [
    _scan_outputs_from_a_branch, _scan_outputs_carried_by_a_loop,
    _gradient_of(_scan_outputs_carried_by_a_loop),
], ids=["from-branch", "carried-by-loop", "grad-carried-by-loop"])
def test_scan_outputs_leaving_through_a_branch_or_an_outer_loop(fn: Any) -> None:
    """In f16 data a scan's stacked outputs carry a vector of exponents, one per slice.
    Returned by a cond branch or carried by an outer loop they kept it where the branch's
    or the loop's types hold one exponent: the rewrite was an invalid module (found on
    ``jax.scipy.linalg.expm``'s gradient)."""
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(6, 6)) / 3, jnp.float32)
    xs = jnp.asarray(rng.normal(size=(4, 3, 6)) * 0.5, jnp.float32)
    got = compile_scaled(fn, w, xs, policy=F16, return_scaled=False)(w, xs)
    errors = _relative_errors(got, fn(w, xs))
    assert max(errors.values()) < 1e-2, errors


def test_scan_with_masked_select_keeps_values() -> None:
    """A -1e9 mask value carried into the loop unchanged follows the logits' scale (and
    saturates to -inf in f16) instead of setting it (and flushing the logits to 0)."""
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4, 4)), jnp.float32)
    mask = np.tril(np.ones((4, 4), bool))

    def fn(xs: jax.Array) -> jax.Array:
        fill = jnp.full((4, 4), -1e9)
        return jax.lax.scan(lambda c, x: (c, jax.nn.softmax(jnp.where(mask, x, fill))),
                            None, xs)[1]

    got = compile_scaled(fn, logits, policy=F16, return_scaled=False)(logits)
    np.testing.assert_allclose(np.asarray(got, np.float32), fn(logits), atol=2e-3)


@pytest.mark.parametrize(("body", "tolerance"), [
    ("inverse_square", 5e-3),  # its residual 1/m^2: 2^23 at the first layer, 2^-19 at the second
    ("layer_norm", 5e-2),  # as the unrolled layers (2%: f16 in LayerNorm's backward pass)
])
def test_stacked_residuals_far_apart_across_layers(body: str, tolerance: float) -> None:
    """The residuals a scan stacks for its transpose keep one exponent per layer: inputs
    of std 0.02 (a GPT's embeddings) and a residual stream that grows put a layer's
    residuals 2^17 to 2^42 apart from the next one's; at one scale for the stack they lost
    their bits or flushed to 0 in f16 (before: both gradients 100% off)."""
    def layer(c: jax.Array) -> jax.Array:
        if body == "inverse_square":
            return c + 0.01 / (c * c).mean(-1, keepdims=True)
        mean = c.mean(-1, keepdims=True)
        var = ((c - mean) ** 2).mean(-1, keepdims=True)
        return c + 0.5 * (c - mean) * jax.lax.rsqrt(var + 1e-6)

    def loss(x: jax.Array) -> jax.Array:
        y, _ = jax.lax.scan(lambda c, _: (layer(c), None), x, None, length=2)
        return (y ** 2).mean()

    x = 0.02 * jax.random.normal(jax.random.key(2), (4, 8))
    grad = jax.grad(loss)
    got = compile_scaled(grad, x, policy=F16, return_scaled=False)(x)
    errors = _relative_errors({"x": got}, {"x": grad(x)})
    assert errors["['x']"] < tolerance, errors


def test_example_scan_gpt_f16_gradients_at_initialization() -> None:
    """The example GPT's own width and depth (d 128, 4 layers) at initialization: the final
    LayerNorm's backward sums nearly cancel and, left at their static scale, lose their bits
    in f16; the scan carries that into every layer (Dense kernels 30% off with the backward
    dots alone rescaled). The default rescales the backward sums too."""
    config = GPTConfig(65, 4, 128, 4, 32, scan_layers=True)
    model = GPT(config)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(0, 65, (4, 32)), jnp.int32)
    y = jnp.asarray(rng.integers(0, 65, (4, 32)), jnp.int32)
    params = model.init(jax.random.key(0), x)["params"]

    def loss(p: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        logits = model.apply({"params": p}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    grad = jax.grad(loss)
    got = compile_scaled(grad, params, x, y, policy=F16, return_scaled=False)(params, x, y)
    errors = _relative_errors(got, grad(params, x, y))
    assert max(errors.values()) < 2e-2, errors
