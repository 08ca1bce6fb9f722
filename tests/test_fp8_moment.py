"""First moments stored in FP8 between steps (``moment_format``, issue 19 goal 2), and the
square root of the second moment in FP8 (``square_format``).

The rewrite finds the first moments itself (optax's adam, adamw, lamb, SGD momentum; not
weights, not BatchNorm's statistics); these tests check that, the rounding at the boundary
against a numpy reference in f32 data, the state's bytes from the entry signature, short
training runs per mode, and the host side (``ScaledArray``, split/join, save/load, the CLI).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from scalify_hlo import Policy, compile_scaled, load_scaled, unscale_tree
from scalify_hlo.api import rewrite_text
from scalify_hlo.errors import ScalifyError
from scalify_hlo.module_io import ir_context, parse_module
from scalify_hlo.names import argument_names
from scalify_hlo.scaled_array import ZERO_SCALE, ScaledArray, as_scaled
from scalify_hlo.signature import entry_signature, join_outputs, split_inputs
from scalify_hlo.symbols import entry_function
from tests.helpers import run_cli

E4M3 = ml_dtypes.float8_e4m3fn
MU8 = Policy(moment_format="float8_e4m3fn")


def _loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def _setup(optimizer: optax.GradientTransformation) -> tuple[Any, tuple[Any, ...]]:
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {"w1": jax.random.normal(k1, (16, 32)) / 4.0, "b1": jnp.zeros((32,)),
              "w2": jax.random.normal(k2, (32, 4)) / 6.0}

    def step(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    x, y = jax.random.normal(k3, (8, 16)), jax.random.normal(k4, (8, 4))
    return step, (params, optimizer.init(params), x, y)


def _fp8_arguments(text: str) -> list[str]:
    """The paths of the entry arguments whose data is FP8."""
    with ir_context():
        module = parse_module(text)
        func = entry_function(module)
        names = argument_names(func)
        return [names[i].removesuffix(".data") for i, arg in
                enumerate(func.regions[0].blocks[0].arguments) if "f8E" in str(arg.type)]


_ADAMW = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(
    optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10), weight_decay=1e-2))


@pytest.mark.parametrize("optimizer, moment", [
    (optax.adam(1e-2), ".mu["), (_ADAMW, ".mu["), (optax.lamb(1e-2), ".mu["),
    (optax.sgd(1e-2, momentum=0.9), ".trace[")], ids=["adam", "clipped-adamw", "lamb", "sgd"])
def test_first_moments_are_found_without_marking(optimizer: Any, moment: str) -> None:
    """Exactly the first moments (one per weight) are FP8: never weights, nu or counts."""
    fn, args = _setup(optimizer)
    text = jax.jit(fn).lower(*args).as_text(debug_info=True)
    paths = _fp8_arguments(rewrite_text(text, MU8.pipeline(), debug_info=True))
    assert len(paths) == 3 and all(moment in p for p in paths), paths


class _BatchNormMLP(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.BatchNorm(use_running_average=False, momentum=0.9)(nn.Dense(8)(x))
        return nn.Dense(2)(nn.relu(x))


def test_batchnorm_statistics_and_weights_are_not_moments() -> None:
    """SGD momentum beside BatchNorm: the traces are FP8, the running mean and variance
    (moving averages of forward values) and the weights stay f16."""
    model, tx = _BatchNormMLP(), optax.sgd(1e-2, momentum=0.9)
    x, y = jnp.ones((4, 3)), jnp.ones((4, 2))
    variables = model.init(jax.random.PRNGKey(0), x)
    params, stats = variables["params"], variables["batch_stats"]

    def step(params: Any, stats: Any, opt_state: Any) -> Any:
        def loss(p: Any) -> Any:
            out, new = model.apply({"params": p, "batch_stats": stats}, x,
                                   mutable=["batch_stats"])
            return jnp.mean((out - y) ** 2), new["batch_stats"]
        (value, new_stats), grads = jax.value_and_grad(loss, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, value

    text = jax.jit(step).lower(params, stats, tx.init(params)).as_text(debug_info=True)
    paths = _fp8_arguments(rewrite_text(text, MU8.pipeline(), debug_info=True))
    assert len(paths) == len(jax.tree.leaves(params)), paths
    assert all(".trace[" in p for p in paths), paths


def _quantized(value: np.ndarray) -> tuple[np.ndarray, float]:
    """What the step stores: E4M3FN data with the amax in [128, 256), and its scale."""
    scale = 2.0 ** (np.floor(np.log2(np.max(np.abs(value)))) - 7)
    return np.clip(value / scale, -448, 448).astype(E4M3).astype(np.float32), scale


def test_f32_data_rounds_only_at_the_boundary() -> None:
    """In f32 data the step with an FP8 mu computes what the original computes from the
    decoded mu (to f32 rounding), and stores the new mu as numpy's E4M3FN rounding to nearest
    of the original's at the amax scale."""
    fn, args = _setup(optax.adam(1e-2))
    _, opt_state, _ = jax.jit(fn)(*args)  # a nonzero first moment
    args = (args[0], opt_state, *args[2:])
    step = compile_scaled(fn, *args, policy=Policy(data_dtype="float32", fp8_dots=False,
                                                   moment_format="float8_e4m3fn",
                                                   moment_rounding="nearest"))
    state = step.scale_args(*args)
    assert state[1][0].mu["w1"].data.dtype == E4M3
    want = jax.jit(fn)(*unscale_tree(state))
    got = step(*state)
    for path in (("w1",), ("b1",)):
        np.testing.assert_allclose(np.asarray(got[0][path[0]].unscale()),
                                   np.asarray(want[0][path[0]]), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(np.asarray(got[1][0].nu[path[0]].unscale()),
                                   np.asarray(want[1][0].nu[path[0]]), rtol=2e-6, atol=1e-12)
        mu = got[1][0].mu[path[0]]
        data, scale = _quantized(np.asarray(want[1][0].mu[path[0]]))
        assert float(mu.scale) == scale
        assert np.mean(np.asarray(mu.data).astype(np.float32) == data) > 0.95
    np.testing.assert_allclose(float(got[2].unscale()), float(want[2]), rtol=1e-6)


@pytest.mark.parametrize("policy, ratio", [
    (MU8, 5 / 12), (Policy(moment_format="float8_e4m3fn", square_format="float8_e4m3fn"),
                    4 / 12)], ids=["mu8", "mu8-root8"])
def test_state_bytes_from_the_entry_signature(policy: Policy, ratio: float) -> None:
    """Weights f16 (2 bytes), mu FP8 (1), nu's root f16 (2) or FP8 (1) of fp32's 12 bytes
    per parameter, plus 4 bytes per scale."""
    fn, args = _setup(optax.adam(1e-2))
    text = rewrite_text(jax.jit(fn).lower(*args).as_text(debug_info=True), policy.pipeline(),
                        debug_info=True)
    state_count = len(jax.tree.leaves(args[:2]))
    specs = entry_signature(text).inputs[:2 * state_count - 1]  # the count is not split
    nbytes = sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in specs)
    floats = [x for x in jax.tree.leaves(args[:2]) if jnp.issubdtype(x.dtype, jnp.floating)]
    fp32 = sum(x.size * 4 for x in floats)
    assert nbytes <= ratio * fp32 + 4 * len(floats) + 4, (nbytes, fp32)


@pytest.mark.parametrize("policy", [
    MU8, Policy(moment_format="float8_e4m3fn", square_format="float8_e5m2",
                square_rounding="stochastic")], ids=["mu8", "mu8-root8"])
def test_short_training_is_finite_and_close_to_fp32(policy: Policy) -> None:
    fn, args = _setup(_ADAMW)
    step = compile_scaled(fn, *args, policy=policy)
    state, reference = step.scale_args(*args), args
    for _ in range(12):
        params, opt_state, loss = step(*state)
        state = (params, opt_state, *args[2:])
        *kept, want = jax.jit(fn)(*reference)
        reference = (*kept, *args[2:])
    leaves = jax.tree.leaves(unscale_tree(state[:2]))
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves)
    assert state[1][1][0].mu["w1"].data.dtype == E4M3
    got = float(loss.unscale())
    assert abs(got - float(want)) < 0.05 * float(want), (got, float(want))


def test_scaled_array_in_fp8() -> None:
    """``as_scaled`` to FP8: the amax in the top binade, clamping, zeros at f16's zero
    scale, wider ScaledArrays split again, the sqrt encoding on top."""
    v = jnp.array([3.0, -0.5, 0.1, 0.0, 200.0], jnp.float32)
    a = as_scaled(v, E4M3)
    assert a.data.dtype == E4M3 and float(a.scale) == 2.0 ** (7 - 7)
    np.testing.assert_allclose(np.asarray(a.unscale()), np.asarray(v), rtol=2 ** -4)
    assert float(as_scaled(jnp.zeros(3), E4M3).scale) == ZERO_SCALE
    wide = ScaledArray(jnp.array([1.0, 2.0], jnp.float16), jnp.float32(2.0 ** -20))
    again = as_scaled(wide, E4M3)
    np.testing.assert_allclose(np.asarray(again.unscale()), np.asarray(wide.unscale()))
    root = as_scaled(jnp.array([4.0, 9.0, 0.25]), E4M3, encoding="sqrt")
    np.testing.assert_allclose(np.asarray(root.unscale()), [4.0, 9.0, 0.25], rtol=2 ** -3)
    nan = as_scaled(jnp.array([1.0, jnp.inf]), E4M3)  # E4M3FN has no inf: NaN, never 448
    assert np.isnan(np.asarray(nan.unscale())[1])


def test_host_split_and_join_in_fp8() -> None:
    original = entry_signature("""
func.func public @main(%m: tensor<3xf32>) -> tensor<3xf32> {
  return %m : tensor<3xf32>
}""")
    m = np.array([1000.0, -3.0, 0.5], np.float32)
    data, scale = split_inputs(original, [m], data_dtype=[np.dtype(E4M3)])
    assert data.dtype == E4M3 and float(scale) == 2.0 ** (9 - 7)
    joined = join_outputs(original, [data, scale])[0]
    np.testing.assert_allclose(joined, m, rtol=2 ** -4)
    clamped, _ = split_inputs(original, [m], scales=[1.0], data_dtype=[np.dtype(E4M3)])
    assert float(clamped.astype(np.float32)[0]) == 448.0  # clamped, not NaN


def test_saved_step_keeps_fp8_moments(tmp_path: Path) -> None:
    inner, (params, opt_state, x, y) = _setup(optax.adam(1e-2))
    tree = jax.tree.structure(opt_state)

    def fn(params: Any, leaves: list[Any], x: jax.Array, y: jax.Array) -> Any:
        new_params, new_state, loss = inner(params, jax.tree.unflatten(tree, leaves), x, y)
        return new_params, jax.tree.leaves(new_state), loss

    args = (params, jax.tree.leaves(opt_state), x, y)
    step = compile_scaled(fn, *args, policy=MU8)
    step.save(tmp_path / "step.zip")
    loaded = load_scaled(tmp_path / "step.zip")
    state = step.scale_args(*args)
    _, opt_a, _ = step(*state)
    _, opt_b, _ = loaded(*state)
    fp8 = [i for i, leaf in enumerate(opt_b) if getattr(leaf, "dtype", None) == E4M3]
    assert len(fp8) == 3
    for i in fp8:
        np.testing.assert_array_equal(np.asarray(opt_a[i].unscale()),
                                      np.asarray(opt_b[i].unscale()))


def test_bad_options_are_one_line_errors() -> None:
    with pytest.raises(ScalifyError, match="unsupported moment_format 'float8'"):
        Policy(moment_format="float8")
    with pytest.raises(ScalifyError, match="square-format=f8E4M3FN .* needs square-encoding"):
        Policy(square_format="float8_e4m3fn", square_dtype="float32")
    assert "moment-format=f8E5M2" in Policy(moment_format="float8_e5m2").pipeline()


_SR_MODULE = """
func.func public @main(%mu: tensor<4096xf32>, %x: tensor<4096xf32>) -> tensor<4096xf32> {
  %g = stablehlo.negate %x : tensor<4096xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %b = stablehlo.constant dense<0.9> : tensor<4096xf32>
  %c = stablehlo.constant dense<0.1> : tensor<4096xf32>
  %0 = stablehlo.multiply %c, %g : tensor<4096xf32>
  %1 = stablehlo.multiply %b, %mu : tensor<4096xf32>
  %2 = stablehlo.add %0, %1 : tensor<4096xf32>
  return %2 : tensor<4096xf32>
}"""


def test_stochastic_rounding_keeps_the_moment_unbiased(tmp_path: Path) -> None:
    """mu = 0.9 * 1 + 0.1 * 1.05 = 1.005 lies between the E4M3FN values 1 and 1.125 (at
    the scale the step picks, 1 sits at 128 and the next value is 144): nearest stores 1
    (the step's change lost), stochastic rounding 1.125 for 4% of the elements, a mean of
    1.005. Run through the CLI's ``run``, which splits inputs and joins outputs as the
    signature says."""
    means = {}
    np.savez(tmp_path / "in.npz", np.ones(4096, np.float32), np.full(4096, -1.05, np.float32))
    for rounding in ("nearest", "stochastic"):
        module = tmp_path / f"{rounding}.mlir"
        module.write_text(rewrite_text(_SR_MODULE, "scalify{data-dtype=f16 moment-format="
                                       f"f8E4M3FN moment-rounding={rounding}}},simplify"))
        done = run_cli("run", module, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
        assert done.returncode == 0, done.stderr
        means[rounding] = float(np.mean(np.load(tmp_path / "o.npz")["arr_0"]))
    assert means["nearest"] == 1.0
    assert abs(means["stochastic"] - 1.005) < 1.5e-3, means
