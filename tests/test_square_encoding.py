"""Squares stored by their signed square root between steps (``square_encoding``).

The default policy (f16 data) stores Adam's second moment as ``sign(v) sqrt(|v|)`` in f16 with
its power-of-two scale and squares it back in f32 inside the step: weights and Adam state are
half of fp32's bytes. These tests check the encoding is exact in f32 data, that optax's Adam
family is found without marking, what the entry signature holds, and the host side
(``ScaledArray.unscale``, ``split_inputs``/``join_outputs``, save/load).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, ScaledArray, compile_scaled, load_scaled, unscale_tree
from scalify_hlo.errors import ScalifyError
from scalify_hlo.scaled_array import as_scaled, is_scaled_leaf
from scalify_hlo.signature import (
    decode_sqrt,
    encode_sqrt,
    entry_signature,
    join_outputs,
    split_inputs,
)

F32_SQRT = Policy(data_dtype="float32", fp8_dots=False, square_encoding="sqrt")


def _mlp(key: jax.Array) -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (16, 32)) / 4.0, "b1": jnp.zeros((32,)),
            "w2": jax.random.normal(k2, (32, 4)) / 6.0}


def _loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def _train_step(optimizer: optax.GradientTransformation):
    def step(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step


def _setup(optimizer: optax.GradientTransformation) -> tuple[Any, tuple[Any, ...]]:
    key = jax.random.PRNGKey(0)
    params = _mlp(key)
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 16))
    y = jax.random.normal(jax.random.PRNGKey(2), (8, 4))
    return _train_step(optimizer), (params, optimizer.init(params), x, y)


def _encoded_paths(step: Any) -> list[str]:
    return [spec.path for spec in step._in_specs if spec.encoding == "sqrt"]


def test_f32_encoding_reproduces_adam_to_f32_rounding() -> None:
    """Three Adam steps in f32 data with the second moment stored as a square root: every
    output (weights, both moments, loss) matches the original within f32 rounding."""
    fn, args = _setup(optax.adam(1e-2))
    step = compile_scaled(fn, *args, policy=F32_SQRT)
    assert _encoded_paths(step)  # the second moments
    state, want = step.scale_args(*args), args
    for _ in range(3):
        params, opt_state, loss = step(*state)
        want_params, want_opt, want_loss = jax.jit(fn)(*want)
        got = unscale_tree((params, opt_state, loss))
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves((want_params, want_opt, want_loss)),
                        strict=True):
            a, b = np.asarray(a), np.asarray(b)
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6 * float(np.max(np.abs(b))))
        state = (params, opt_state, *args[2:])
        want = (want_params, want_opt, *args[2:])


def test_default_policy_stores_adam_state_in_16_bits() -> None:
    """From the entry signature: every floating argument's data is f16, the second moments
    are marked sqrt, and weights + Adam state are half of fp32's bytes (plus 4 per scale)."""
    fn, args = _setup(optax.adam(1e-2))
    step = compile_scaled(fn, *args)
    signature = entry_signature(step.text)
    params, opt_state = args[0], args[1]
    nu_count = len(jax.tree.leaves(opt_state[0].nu))
    assert len(signature.sqrt_inputs) == nu_count == len(signature.sqrt_results)
    assert all(signature.inputs[i].element == "f16" for i in signature.sqrt_inputs)
    state_leaves = [x for x in jax.tree.leaves((params, opt_state))
                    if jnp.issubdtype(x.dtype, jnp.floating)]
    fp32_bytes = sum(x.size * 4 for x in state_leaves)
    data_specs = [s for s in signature.inputs[:2 * len(state_leaves) + 1]
                  if s.is_scaled and s.shape != ()]
    data_bytes = sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in data_specs)
    assert data_bytes <= 0.5 * fp32_bytes, (data_bytes, fp32_bytes)


def test_square_dtype_float32_keeps_the_old_f32_second_moment() -> None:
    fn, args = _setup(optax.adam(1e-2))
    step = compile_scaled(fn, *args, policy=Policy(square_dtype="float32"))
    signature = entry_signature(step.text)
    assert signature.sqrt_inputs == () and signature.sqrt_results == ()
    assert "f32" in {s.element for s in signature.inputs if s.shape != ()}


@pytest.mark.parametrize("name, optimizer, moments", [
    ("adamw", optax.adamw(1e-2, weight_decay=1e-2), 3),
    ("lamb", optax.lamb(1e-2), 3),
    ("clipped adam with a schedule", optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adam(optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10))), 3),
    # Factored second moments: a row and a column for w1 (16x32), full ones for b1 and
    # w2 (32x4: a dimension under 8 is not factored); the unused (1,) placeholders are not.
    ("adafactor", optax.adafactor(1e-2, min_dim_size_to_factor=8), 4),
])
def test_optax_second_moments_are_found_without_marking(name: str, optimizer: Any,
                                                        moments: int) -> None:
    """The second moments (and only they, not the first moments or weights) are encoded;
    two default-policy steps stay finite and lower the loss."""
    fn, args = _setup(optimizer)
    step = compile_scaled(fn, *args)
    paths = _encoded_paths(step)
    assert len(paths) == moments, paths
    assert not any(".mu" in p or "params" in p for p in paths), paths
    state = step.scale_args(*args)
    losses = []
    for _ in range(3):
        params, opt_state, loss = step(*state)
        losses.append(float(loss.unscale()))
        state = (params, opt_state, *args[2:])
    leaves = jax.tree.leaves(unscale_tree(state[:2]))
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves), name
    assert losses[-1] < losses[0], losses
    encoded = [x for x in jax.tree.leaves(state[1], is_leaf=is_scaled_leaf)
               if isinstance(x, ScaledArray) and x.encoding == "sqrt"]
    assert len(encoded) == moments and all(x.data.dtype == jnp.float16 for x in encoded)


def test_scaled_array_sqrt_unscale_returns_the_square() -> None:
    v = jnp.array([4.0, 0.0, 1e-6, 9.0, -2.25], jnp.float32)
    encoded = as_scaled(v, jnp.float16, encoding="sqrt")
    assert encoded.encoding == "sqrt" and encoded.data.dtype == jnp.float16
    np.testing.assert_allclose(np.asarray(encoded.unscale()), np.asarray(v), rtol=2e-3)
    # a pytree: the encoding survives flatten / unflatten (jax.tree.map)
    mapped = jax.tree.map(lambda x: x, encoded)
    assert mapped.encoding == "sqrt"
    # re-encoding a plain ScaledArray gives the same value
    plain = as_scaled(v, jnp.float32)
    again = as_scaled(plain, jnp.float32, encoding="sqrt")
    np.testing.assert_allclose(np.asarray(again.unscale()), np.asarray(v), rtol=1e-6)
    with pytest.raises(ScalifyError, match="unknown ScaledArray encoding"):
        ScaledArray(v, 1.0, encoding="log")


def test_host_split_and_join_encode_and_decode() -> None:
    text = """
func.func public @main(%g: tensor<4xf32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.add %nu, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}"""
    from scalify_hlo.api import rewrite_module_source

    result = rewrite_module_source(text, "scalify{data-dtype=f32 square-encoding=sqrt},simplify")
    scaled = entry_signature(result.output)
    original = entry_signature(text)
    encoded_in, encoded_out = scaled.original_encodings(original)
    assert encoded_in == (False, True) and encoded_out == (True,)
    g, nu = np.array([1.0, -2.0, 3.0, 0.5], np.float32), np.array([4.0, 1.0, 0.0, 2.0],
                                                                   np.float32)
    flat = split_inputs(original, [g, nu], encoded=encoded_in)
    np.testing.assert_allclose(decode_sqrt(flat[2] * flat[3]), nu, rtol=1e-6)
    from scalify_hlo.runner import run_module

    joined = join_outputs(original, run_module(result.output.decode(), flat), encoded_out)
    np.testing.assert_allclose(joined[0], nu + g * g, rtol=1e-6)
    np.testing.assert_allclose(encode_sqrt(np.array([-4.0, 9.0])), [-2.0, 3.0])


def test_a_saved_step_keeps_its_encodings(tmp_path: Path) -> None:
    """The optax state as a list of leaves (its named tuples have no registered
    serialization): the encodings are saved with the leaf specs."""
    inner, (params, opt_state, x, y) = _setup(optax.adam(1e-2))
    tree = jax.tree.structure(opt_state)

    def fn(params: Any, leaves: list[Any], x: jax.Array, y: jax.Array) -> Any:
        new_params, new_state, loss = inner(params, jax.tree.unflatten(tree, leaves), x, y)
        return new_params, jax.tree.leaves(new_state), loss

    args = (params, jax.tree.leaves(opt_state), x, y)
    step = compile_scaled(fn, *args)
    path = tmp_path / "step.zip"
    step.save(path)
    loaded = load_scaled(path)
    assert _encoded_paths(loaded) == _encoded_paths(step) != []
    state = step.scale_args(*args)
    _, opt_a, _ = step(*state)
    _, opt_b, _ = loaded(*state)
    encoded = [i for i, leaf in enumerate(opt_b) if getattr(leaf, "encoding", "") == "sqrt"]
    assert len(encoded) == 3
    for i in encoded:
        np.testing.assert_array_equal(np.asarray(opt_a[i].unscale()),
                                      np.asarray(opt_b[i].unscale()))


def test_caller_made_state_in_another_encoding_is_encoded_again() -> None:
    """A ScaledArray made by the caller (scale_tree: plain data * scale) where the step takes
    a square root is re-encoded on the way in: the same outputs as from scale_args."""
    from scalify_hlo import scale_tree

    fn, args = _setup(optax.adam(1e-2))
    adam, *rest = args[1]
    adam = adam._replace(nu=jax.tree.map(lambda v: v + 1e-3, adam.nu))  # a nonzero nu
    args = (args[0], (adam, *rest), *args[2:])
    step = compile_scaled(fn, *args)
    _, from_step, _ = step(*step.scale_args(*args))
    _, from_caller, _ = step(*scale_tree(args[:2]), *args[2:])
    for a, b in zip(jax.tree.leaves(unscale_tree(from_caller)),
                    jax.tree.leaves(unscale_tree(from_step)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-3, atol=1e-6)
    assert from_caller[0].nu["w1"].encoding == "sqrt"


def test_stochastic_rounding_keeps_the_moving_average_unbiased() -> None:
    """nu = 0.999 * 1 + 0.001 * 1.5^2: its root 1.000625 lies between the f16 values 1 and
    1 + 2^-10. Nearest rounding stores 1 + 2^-10 for every element (nu 1.00195, 56% more
    than the step's change); stochastic rounding stores either, 64% of them up, and the mean
    is nu to a few parts in 1e5."""
    from scalify_hlo.api import rewrite_module_source
    from scalify_hlo.runner import run_module

    n = 4096
    text = f"""
func.func public @main(%nu: tensor<{n}xf32>, %g: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %b = stablehlo.constant dense<0.999> : tensor<{n}xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<{n}xf32>
  %0 = stablehlo.multiply %g, %g : tensor<{n}xf32>
  %1 = stablehlo.multiply %c, %0 : tensor<{n}xf32>
  %2 = stablehlo.multiply %b, %nu : tensor<{n}xf32>
  %3 = stablehlo.add %2, %1 : tensor<{n}xf32>
  return %3 : tensor<{n}xf32>
}}"""
    original = entry_signature(text)
    inputs = [np.ones(n, np.float32), np.full(n, 1.5, np.float32)]
    want = 0.999 + 0.001 * 2.25
    means = {}
    for rounding in ("nearest", "stochastic"):
        pipeline = f"scalify{{data-dtype=f16 square-rounding={rounding}}},simplify"
        scaled = rewrite_module_source(text, pipeline).output.decode()
        encoded_in, encoded_out = entry_signature(scaled).original_encodings(original)
        flat = split_inputs(original, inputs, data_dtype=[np.float16, np.float16],
                            encoded=encoded_in)
        means[rounding] = float(np.mean(join_outputs(original, run_module(scaled, flat),
                                                     encoded_out)[0]))
    assert abs(means["nearest"] - want) > 5e-4, means
    assert abs(means["stochastic"] - want) < 1e-4, means
