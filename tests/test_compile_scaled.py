"""``compile_scaled``: the rewritten step called like the JAX function it came from.

In f32 mode (``Policy(data_dtype="float32", fp8_dots=False)``) the rewrite computes the same
numbers as the original, so every output must match ``jax.jit(fn)`` to rtol 1e-5, eagerly,
inside ``jax.jit`` and over a ``lax.scan`` of steps whose training state stays scaled. Each
step is compiled once per mode (module-scoped fixtures).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import (
    Policy,
    Report,
    ScaledArray,
    ScaledStep,
    as_scaled,
    compile_scaled,
    module_io,
    scale_tree,
    unscale_tree,
)
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.errors import ScalifyError
from scalify_hlo.module_io import OPS_COUNTED
from scalify_hlo.scaled_array import ZERO_SCALE, is_scaled_leaf
from scalify_hlo.signature import ELEMENT_DTYPES, entry_signature
from testdata import models
from tests.helpers import fusion_count, run_cli

F32 = Policy(data_dtype="float32", fp8_dots=False)
RTOL = 1e-5
SCAN_STEPS = 5


# ----- helpers ------------------------------------------------------------------------------
def assert_tree_close(got: Any, want: Any, rtol: float = RTOL) -> None:
    """Same structure; every leaf within ``rtol``, with an absolute floor of ``rtol`` times
    the leaf's largest magnitude (XLA fuses the two programs differently: a sum that cancels
    to ~0 in one may round to a few ulps of its inputs in the other)."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree
    for index, (a, b) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, f"leaf {index}"
        floor = rtol * float(np.max(np.abs(b))) if b.size else 0.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=floor, err_msg=f"leaf {index}")


def scaled_like(output: Any, reference: Any) -> None:
    """``output`` is ``reference``'s structure with a ScaledArray at every floating leaf."""
    out_leaves, out_tree = jax.tree.flatten(output, is_leaf=is_scaled_leaf)
    ref_leaves, ref_tree = jax.tree.flatten(reference)
    assert out_tree == ref_tree
    for out, ref in zip(out_leaves, ref_leaves, strict=True):
        floating = jnp.issubdtype(ref.dtype, jnp.floating)
        assert isinstance(out, ScaledArray) == floating
        if floating:
            assert out.scale.shape == () and out.scale.dtype == jnp.float32


def warm_adam(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The transformer's arguments with a nonzero Adam second moment.

    From a zero state, Adam's first update is ``g / (|g| + eps)``: for the attention key bias,
    whose gradient is zero in exact arithmetic (softmax is shift-invariant), that is the sign
    of rounding noise, different under any change of fusion. A second-moment history makes
    the update linear in the gradient, so the parameters can be compared to rtol 1e-5.
    """
    params, (adam, *rest), tokens, targets = args
    adam = adam._replace(nu=jax.tree.map(lambda v: jnp.full_like(v, 1e-2), adam.nu))
    return params, (adam, *rest), tokens, targets


# ----- fixtures -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    step: ScaledStep
    reference: Any  # jax.jit(fn)(*args)
    eager_args: tuple[Any, ...]  # args, or as ScaledArrays where XLA compiles slowly


@pytest.fixture(scope="module")
def mlp() -> Case:
    fn, args = models.mlp_step()
    return Case(fn, args, compile_scaled(fn, *args, policy=F32), jax.jit(fn)(*args), args)


@pytest.fixture(scope="module")
def transformer() -> Case:
    """Called eagerly with ScaledArray arguments: plain arguments add an RMS per argument to
    the program, which doubles XLA:CPU's compile time (the MLP covers that path)."""
    fn, args = models.transformer_step()
    step = compile_scaled(fn, *args, policy=F32)
    warm = warm_adam(args)
    return Case(fn, warm, step, jax.jit(fn)(*warm), scale_tree(warm, jnp.float32))


@pytest.fixture(scope="module", params=["mlp", "transformer"])
def case(request: pytest.FixtureRequest) -> Case:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def transformer_fp8() -> ScaledStep:
    fn, args = models.transformer_step()
    return compile_scaled(fn, *args)


# ----- f32 mode matches jax.jit -------------------------------------------------------------
def test_eager_call_matches_jit(case: Case) -> None:
    output = case.step(*case.eager_args)
    scaled_like(output, case.reference)
    assert_tree_close(unscale_tree(output), case.reference)


def test_call_inside_jit_matches_jit(case: Case) -> None:
    """ScaledArray arguments (``scale_tree``), the step called inside ``jax.jit``."""
    output = jax.jit(lambda *a: case.step(*a))(*scale_tree(case.args, jnp.float32))
    scaled_like(output, case.reference)
    assert_tree_close(unscale_tree(output), case.reference)


def test_scan_keeps_the_state_scaled(case: Case) -> None:
    """Five steps in a ``lax.scan``: the carried state is the step's ScaledArray outputs."""
    state, batch = case.args[:-2], case.args[-2:]  # (params[, opt_state]), (inputs, targets)

    def scaled_body(carry: Any, _: None) -> tuple[Any, Any]:
        *carry, loss = case.step(*carry, *batch)
        return tuple(carry), loss

    initial = scale_tree(state, jnp.float32)
    final, losses = jax.jit(lambda s: jax.lax.scan(scaled_body, s, length=SCAN_STEPS))(initial)
    reference, want_final, want_losses = jax.jit(case.fn), state, []
    for _ in range(SCAN_STEPS):  # the same steps through jax.jit(fn), one call at a time
        *want_final, loss = reference(*want_final, *batch)
        want_losses.append(loss)
    want_final, want_losses = tuple(want_final), jnp.stack(want_losses)
    assert isinstance(losses, ScaledArray) and losses.data.shape == (SCAN_STEPS,)
    scaled_like(final, want_final)
    assert_tree_close(losses.unscale(), want_losses)
    assert_tree_close(unscale_tree(final), want_final)


def test_transformer_from_a_fresh_adam_state(transformer: Case) -> None:
    """The model's own zero-initialized Adam state: the loss, moments and step count match;
    parameters match wherever the gradient is above rounding noise (see ``warm_adam``)."""
    args = models.transformer_step()[1]
    (params, (adam, *_), loss) = unscale_tree(transformer.step(*scale_tree(args, jnp.float32)))
    (want_params, (want_adam, *_), want_loss) = jax.jit(transformer.fn)(*args)
    assert_tree_close(loss, want_loss)
    assert_tree_close((adam.mu, adam.nu, adam.count), (want_adam.mu, want_adam.nu,
                                                       want_adam.count))
    for got, want, mu in zip(jax.tree.leaves(params), jax.tree.leaves(want_params),
                             jax.tree.leaves(want_adam.mu), strict=True):
        signal = np.abs(np.asarray(mu)) > 1e-4 * float(np.max(np.abs(mu)))
        np.testing.assert_allclose(np.asarray(got)[signal], np.asarray(want)[signal],
                                   rtol=RTOL, atol=RTOL * float(np.max(np.abs(want))))


def test_return_scaled_false_returns_plain_arrays(mlp: Case) -> None:
    step = compile_scaled(mlp.fn, *mlp.args, policy=F32, return_scaled=False)
    output = step(*scale_tree(mlp.args, jnp.float32))
    assert not any(isinstance(leaf, ScaledArray)
                   for leaf in jax.tree.leaves(output, is_leaf=is_scaled_leaf))
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(output))
    assert_tree_close(output, mlp.reference)


def test_scales_travel_as_one_vector(mlp: Case) -> None:
    """A step returns all its scales in one bank (one buffer, not one per scale), and a call
    with its outputs takes the bank's vector: the second step has one scale argument for the
    six weights. The values are those of the same ScaledArrays with scales of their own."""
    params, x, y = scale_tree(mlp.args, jnp.float32)
    new_params, loss = mlp.step(params, x, y)
    outputs = jax.tree.leaves((new_params, loss), is_leaf=is_scaled_leaf)
    assert len({id(leaf.bank[0]) for leaf in outputs}) == 1
    assert [leaf.bank[1] for leaf in outputs] == list(range(len(outputs)))
    lowered = mlp.step.lower(new_params, x, y)
    assert len(jax.tree.leaves(lowered.args_info)) == 6 + 1 + 2 * 2  # data, bank, x and y
    banked = mlp.step(new_params, x, y)
    own = [{name: ScaledArray(a.data, a.scale) for name, a in layer.items()}
           for layer in new_params]
    assert all(leaf.bank is None for leaf in jax.tree.leaves(own, is_leaf=is_scaled_leaf))
    for got, want in zip(jax.tree.leaves(banked), jax.tree.leaves(mlp.step(own, x, y)),
                         strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_training_loop_compiles_once(mlp: Case, caplog: pytest.LogCaptureFixture) -> None:
    """State from ``scale_args``, then the step's own outputs fed back: both calls take a bank
    of the same length and committed arrays, so XLA compiles the step once. (Counting traces
    was not enough: the state ``scale_args`` made was uncommitted and the step's outputs are
    committed, so jax.jit traced once but lowered and compiled ``_run`` again.)"""
    step = compile_scaled(mlp.fn, *mlp.args, policy=F32)
    params, x, y = mlp.args
    state = step.scale_args(params, x, y)[0]
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        for _ in range(3):
            state, loss = step(state, x, y)
    compiled = [r.getMessage() for r in caplog.records
                if "Finished XLA compilation of jit(_run)" in r.getMessage()]
    assert len(compiled) == 1, compiled
    want = params
    for _ in range(3):
        want, want_loss = jax.jit(mlp.fn)(want, x, y)
    assert_tree_close(unscale_tree((state, loss)), (want, want_loss))


def test_scale_args_of_a_step_whose_outputs_are_not_its_state() -> None:
    """Arguments with no output at their path and shape take bank slots after the outputs'."""
    def fn(x: jax.Array, y: jax.Array) -> tuple[jax.Array, ...]:
        return y * 2.0, x + 1.0, jnp.sum(x * x)

    x, y = jnp.arange(3.0), jnp.linspace(-1.0, 1.0, 4)
    step = compile_scaled(fn, x, y, policy=F32)
    sx, sy = step.scale_args(x, y)
    assert (sx.bank[1], sy.bank[1]) == (3, 4) and sx.bank[0] is sy.bank[0]
    assert_tree_close(unscale_tree(step(sx, sy)), fn(x, y))
    out = step(sx, sy)
    assert_tree_close(unscale_tree(step(out[1], out[0])), fn(x + 1.0, y * 2.0))


def test_a_bank_of_many_scales_costs_a_few_kernels(transformer: Case) -> None:
    """The transformer step returns 85 scales, some the same value: XLA:CPU would run each
    one as a kernel of its own if the bank were one concatenate of them; built in groups it
    adds about one kernel per eight, and the program stays within 1.1x jax.jit's fusions."""
    step = transformer.step
    firsts = step._first_same_scale
    assert len(firsts) > 64 and len(set(firsts)) < len(firsts)  # long, with repeats
    state = step.scale_args(*transformer.args)
    scaled = fusion_count(step.lower(*state).compile().as_text())
    original = fusion_count(jax.jit(transformer.fn).lower(*transformer.args).compile().as_text())
    assert scaled <= 1.1 * original, (scaled, original)
    output = step(*state)  # the repeated scales land where their outputs read them
    want = jax.jit(transformer.fn)(*unscale_tree(state))
    assert_tree_close(unscale_tree(output), want)


def test_steps_without_floating_arguments_or_results() -> None:
    count = compile_scaled(lambda n: n + 1, jnp.int32(3), policy=F32)
    assert count.scale_args(jnp.int32(3)) == (3,) and int(count(jnp.int32(3))) == 4
    x = jnp.array([1.0, 5.0, 2.0])
    argmax = compile_scaled(jnp.argmax, x, policy=F32)
    assert int(argmax(*argmax.scale_args(x))) == 1 and int(argmax(x)) == 1


def test_outputs_that_share_one_scale_value() -> None:
    x = jnp.arange(4.0)
    step = compile_scaled(lambda x: (x * 2.0, x * 2.0, jnp.sum(x)), x, policy=F32)
    # f32 data: x * 2.0 is handed back at x's scale (hand_back.py), both copies share it;
    # the sum has its own type and keeps its rule's scale.
    assert step._first_same_scale == [0, 0, 2]
    assert_tree_close(unscale_tree(step(*step.scale_args(x))), (x * 2.0, x * 2.0, jnp.sum(x)))


def test_facts_read_from_the_rewritten_module_match_its_text(transformer: Case) -> None:
    """ScaledStep reads the signature and the shared scales off the module in memory (the
    ``inspect`` hook), not from a second parse of its text: both must agree with the text."""
    step = transformer.step
    signature = entry_signature(step.text)
    assert [(tuple(a.shape), np.dtype(a.dtype)) for a in step.exported.in_avals] == [
        (s.shape, ELEMENT_DTYPES[s.element]) for s in signature.inputs]
    assert [(tuple(a.shape), np.dtype(a.dtype)) for a in step.exported.out_avals] == [
        (s.shape, ELEMENT_DTYPES[s.element]) for s in signature.results]
    returned = re.findall(r"return (.*?) :", step.text)[-1].split(", ")
    position, names = 0, []  # the SSA name each scaled output returns as its scale
    for spec in step._out_specs:
        if spec.scaled:
            names.append(returned[position + 1])
        position += 2 if spec.scaled else 1
    assert len(set(names)) < len(names)  # some outputs share a scale value
    assert step._first_same_scale == [names.index(name) for name in names]


def test_the_inspect_hook_sees_the_rewritten_module_once() -> None:
    text = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n" \
           "  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    seen: list[int] = []
    result = rewrite_module_source(text, "scalify{data-dtype=f32},simplify",
                                   inspect=lambda module: seen.append(
                                       len(module.body.operations[0].arguments)))
    assert result.error is None and seen == [2]  # (data, scale): after the pipeline

    def refuse(module: object) -> None:
        raise ScalifyError("not this module")

    refused = rewrite_module_source(text, "scalify", inspect=refuse)
    assert refused.output is None and refused.error == "not this module"


def test_scales_of_a_bank_are_rank0_f32_arrays(mlp: Case) -> None:
    params, loss = mlp.step(*scale_tree(mlp.args, jnp.float32))
    jax.block_until_ready((params, loss))  # flattening reads every scale of the bank
    vector = loss.bank[0].vector
    for index, leaf in enumerate(jax.tree.leaves((params, loss), is_leaf=is_scaled_leaf)):
        assert isinstance(leaf.scale, jax.Array) and leaf.scale.shape == ()
        assert leaf.scale.dtype == jnp.float32 and float(leaf.scale) == float(vector[index])
    loss.scale = jnp.float32(2.0)  # a scale set by hand leaves the bank
    assert loss.bank is None and float(loss.unscale()) == 2.0 * float(loss.data)


def test_scales_given_as_python_floats(mlp: Case) -> None:
    params, x, y = scale_tree(mlp.args, jnp.float32)
    unit = [{name: ScaledArray(a.data, 1.0) for name, a in layer.items()} for layer in params]
    output = mlp.step(unit, x, y)
    for leaf in jax.tree.leaves(output[0], is_leaf=is_scaled_leaf):
        assert isinstance(leaf.scale, jax.Array) and leaf.scale.dtype == jnp.float32
    reference = jax.jit(mlp.fn)(unscale_tree(unit), x.unscale(), y.unscale())
    assert_tree_close(unscale_tree(output), reference)


# ----- ScaledArray, as_scaled, scale_tree ---------------------------------------------------
def test_scaled_array_is_a_pytree() -> None:
    value = ScaledArray(jnp.arange(6.0).reshape(2, 3), jnp.float32(4.0))
    leaves, treedef = jax.tree.flatten(value)
    assert [np.asarray(x).tolist() for x in leaves] == [[[0, 1, 2], [3, 4, 5]], 4.0]
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt, ScaledArray) and rebuilt.shape == (2, 3)
    assert rebuilt.dtype == jnp.float32
    doubled = jax.tree.map(lambda x: 2 * x, value)
    assert isinstance(doubled, ScaledArray) and float(doubled.scale) == 8.0
    through_jit = jax.jit(lambda s: s)(value)
    assert isinstance(through_jit, ScaledArray)
    np.testing.assert_array_equal(through_jit.unscale(), value.unscale())


def test_unscale_is_data_times_scale_in_the_requested_dtype() -> None:
    value = ScaledArray(jnp.array([0.5, -1.5], jnp.float16), jnp.float32(2.0 ** -10))
    unscaled = value.unscale()
    assert unscaled.dtype == jnp.float32
    np.testing.assert_array_equal(unscaled, np.array([0.5, -1.5]) * 2.0 ** -10)
    assert value.unscale(jnp.bfloat16).dtype == jnp.bfloat16


def test_as_scaled_takes_a_power_of_two_from_the_rms() -> None:
    x = jnp.full((4, 4), 3.0)  # RMS 3 -> 2^round(log2 3) = 4
    scaled = as_scaled(x, jnp.float16)
    assert scaled.data.dtype == jnp.float16 and float(scaled.scale) == 4.0
    np.testing.assert_array_equal(scaled.data, np.full((4, 4), 0.75))
    tiny = as_scaled(jnp.array([1e-6, -3e-6]), jnp.float32)  # RMS 2.2e-6 -> 2^-19
    assert float(tiny.scale) == 2.0 ** -19
    np.testing.assert_array_equal(tiny.unscale(), np.array([1e-6, -3e-6], np.float32))


def test_as_scaled_scales_are_exact_powers_of_two() -> None:
    """Over f32's whole normal range: beyond 2^+-63 the f32 sum of squares overflows or
    flushes to zero, which gave the largest scale or 1 (and f16 data of zeros)."""
    exponents = np.arange(-126, 127, 3)
    x = jnp.asarray(1.37 * 2.0 ** exponents, jnp.float32)
    scales = jax.jit(jax.vmap(lambda v: as_scaled(v, jnp.float32).scale))(x[:, None])
    np.testing.assert_array_equal(np.asarray(scales), 2.0 ** exponents)


@pytest.mark.parametrize("values", [[1e20, -3e19], [1e-30, 2e-31], [3e38, -1.0]],
                         ids=["huge", "tiny", "near-f32-max"])
def test_as_scaled_keeps_far_magnitudes_in_f16_data(values: list[float]) -> None:
    """f16 data holds what its scale was chosen for: a value near f32's largest divided by
    2^127 was flushed to zero by XLA:CPU (a product with the subnormal reciprocal)."""
    x = jnp.asarray(values, jnp.float32)
    scaled = as_scaled(x, jnp.float16)
    assert 0.25 <= float(jnp.max(jnp.abs(scaled.data.astype(jnp.float32)))) < 4.0
    np.testing.assert_allclose(np.asarray(scaled.unscale())[0], values[0], rtol=1e-3)


@pytest.mark.parametrize("magnitude", [1e5, 1e-9], ids=["above-f16", "below-f16"])
def test_f32_data_outside_f16_range_keeps_its_value(magnitude: float) -> None:
    """A ScaledArray made by the caller with f32 data at scale 1, given to an f16 step: the
    data's cast to f16 made inf of 1e5 and 0 of 1e-9. A power of two now moves from the
    data to the scale first, on a call (the scale split in the program) and in as_scaled."""
    w = jnp.linspace(0.5, 1.5, 16).reshape(4, 4)
    x = jnp.ones((2, 4))
    step = compile_scaled(lambda w, x: jnp.sum(x @ w), w, x, policy=Policy(fp8_dots=False),
                          return_scaled=False)
    given = ScaledArray(w * magnitude, jnp.float32(1.0))
    np.testing.assert_allclose(float(step(given, x)), float(jnp.sum(x @ w)) * magnitude,
                               rtol=2e-3)
    fitted = as_scaled(given, jnp.float16)
    np.testing.assert_allclose(np.asarray(fitted.unscale()), np.asarray(w * magnitude),
                               rtol=1e-3)
    kept = as_scaled(ScaledArray(w, jnp.float32(magnitude)), jnp.float16)  # in range: kept
    assert float(kept.scale) == np.float32(magnitude)


def test_a_scaled_array_converts_to_its_value() -> None:
    """numpy made a 0-d object array of a ScaledArray, ``jnp.asarray`` and ``float`` failed
    (``float(loss)`` of a step's scaled output): each now gives the value, in f32 (through
    the data's dtype, f16, 2e5 would have overflowed)."""
    value = ScaledArray(jnp.array([[1.0, 2.0]], jnp.float16), jnp.float32(1e5))
    np.testing.assert_array_equal(np.asarray(value), np.array([[1e5, 2e5]], np.float32))
    assert jnp.asarray(value).dtype == jnp.float32 and float(jnp.sum(value)) == 3e5
    assert float(ScaledArray(jnp.float16(0.75), jnp.float32(4.0))) == 3.0
    assert (value.ndim, value.size, value.shape) == (2, 2, (1, 2))


def test_as_scaled_of_zeros() -> None:
    """All-zero tensors: the smallest normal scale with f16 data, 1 with f32/bf16 data."""
    for dtype, scale in ((jnp.float16, ZERO_SCALE), (jnp.float32, 1.0), (jnp.bfloat16, 1.0)):
        zero = as_scaled(jnp.zeros((3,)), dtype)
        assert float(zero.scale) == scale
        np.testing.assert_array_equal(zero.data, np.zeros(3))


def test_as_scaled_ignores_nan_and_inf() -> None:
    x = jnp.array([1.0, jnp.nan, jnp.inf, 4.0, -jnp.inf])  # finite RMS sqrt(8.5) -> 4
    scaled = as_scaled(x, jnp.float32)
    assert float(scaled.scale) == 4.0
    np.testing.assert_array_equal(scaled.unscale(), x)
    nothing_finite = as_scaled(jnp.array([jnp.nan, jnp.inf]), jnp.float32)
    assert float(nothing_finite.scale) == 1.0


def test_as_scaled_of_a_scaled_array_keeps_the_scale() -> None:
    value = ScaledArray(jnp.array([1.0, 2.0]), jnp.float32(0.25))
    cast = as_scaled(value, jnp.float16)
    assert cast.data.dtype == jnp.float16 and float(cast.scale) == 0.25
    traced = jax.jit(lambda x: as_scaled(x, jnp.float16))(jnp.full((2,), 3.0))
    assert float(traced.scale) == 4.0


def test_scale_tree_and_unscale_tree_round_trip() -> None:
    tree = {"w": jnp.linspace(-2.0, 2.0, 8), "step": jnp.int32(3),
            "inner": [jnp.ones((2,), jnp.bfloat16)]}
    scaled = scale_tree(tree)  # f16 data by default
    assert isinstance(scaled["w"], ScaledArray) and scaled["w"].data.dtype == jnp.float16
    assert isinstance(scaled["inner"][0], ScaledArray)
    assert not isinstance(scaled["step"], ScaledArray) and int(scaled["step"]) == 3
    back = unscale_tree(scaled)
    assert back["w"].dtype == jnp.float32 and back["step"].dtype == jnp.int32
    np.testing.assert_allclose(back["w"], tree["w"], rtol=1e-3)  # f16's 11-bit mantissa
    exact = unscale_tree(scale_tree(tree, jnp.float32))
    np.testing.assert_array_equal(exact["w"], tree["w"])
    assert exact["inner"][0].dtype == jnp.float32
    rescaled = scale_tree(scaled, jnp.float32)  # ScaledArray leaves: recast, scale kept
    assert rescaled["w"].data.dtype == jnp.float32
    assert float(rescaled["w"].scale) == float(scaled["w"].scale)


# ----- report and stages --------------------------------------------------------------------
def test_report_counts_ops(mlp: Case) -> None:
    step = mlp.step
    report = step.report()
    assert isinstance(report, Report)
    dots = step.stage("exported").count("stablehlo.dot_general")
    assert report.ops_before["stablehlo.dot_general"] == dots > 0
    assert sum(report.ops_after.values()) > sum(report.ops_before.values())
    assert report.fp8_dots == (0, 0) and report.fallbacks == []
    text = str(report)
    assert text.startswith("operations (all in the module") and "fp8 dots: 0 / 0" in text


def test_cli_stats_and_the_report_count_ops_one_way(mlp: Case, tmp_path: Path) -> None:
    """``--stats`` on the module compile_scaled exported says what ``report()`` says, under
    the same name (they used to be labelled differently and read as different counts)."""
    step = mlp.step
    (tmp_path / "step.mlir").write_text(step.stage("exported"))
    result = run_cli("rewrite", "step.mlir", "--pipeline", step.pipeline, "--stats",
                     "-o", "out.mlir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = step.report()
    before, after = sum(report.ops_before.values()), sum(report.ops_after.values())
    total = next(line for line in result.stderr.splitlines() if line.startswith("total "))
    assert total.split()[1:3] == [str(before), str(after)] and OPS_COUNTED in total
    assert str(report).splitlines()[0].startswith(f"{OPS_COUNTED}: {before} -> {after}")


def test_report_of_the_default_policy_puts_every_dot_but_the_output_head_in_fp8(
        transformer_fp8: ScaledStep) -> None:
    report = transformer_fp8.report()
    fp8, dots = report.fp8_dots
    assert fp8 == dots - 3 > 0  # the logits dot and its two gradient dots stay in f16
    assert f"fp8 dots: {fp8} / {dots} (3 in the output head stay in the data dtype)" \
        in str(report)
    assert report.fallbacks == []
    assert "f8E4M3FN" in transformer_fp8.stage("fp8-dots")
    assert "f8E4M3FN" not in transformer_fp8.stage("scalify")


def test_report_records_say_how_each_op_is_scaled(transformer_fp8: ScaledStep) -> None:
    """The records that ``scalify-hlo explain`` prints, kept with the step's report: every
    FP8 dot with its formats, Adam's second moment kept wide, the user's source lines."""
    report = transformer_fp8.report()
    kinds = {record.kind for record in report.records}
    assert {"static", "runtime", "fp8", "wide"} <= kinds and "fallback" not in kinds
    fp8 = [record for record in report.records if record.kind == "fp8"]
    assert len(fp8) == report.fp8_dots[0]
    assert {record.detail for record in fp8} == {"f8E4M3FN x f8E4M3FN", "f8E5M2 x f8E4M3FN"}
    table = report.table()
    assert table.startswith("by op family") and "by source line" in table
    assert "testdata/models.py:" in table and "fp8" in table
    data = json.loads(report.table("json"))
    assert sum(row["kinds"].get("fp8", 0) for row in data["families"]) == len(fp8)
    assert data["pipeline"] == transformer_fp8.pipeline
    heads = [line.split(": ")[0] for line in str(report).splitlines()[:4]]
    assert heads == [OPS_COUNTED, "fp8 dots", "fallbacks (ops run unscaled)", "rescale points"]
    with pytest.raises(ScalifyError, match="unknown table format 'yaml'"):
        report.table("yaml")


def test_stages_are_the_module_after_each_pass(
        mlp: Case) -> None:
    step = mlp.step
    scalify = "scalify{data-dtype=f32 delayed-statistics=auto}"
    assert list(step.stages) == ["exported", "inline", scalify, "simplify"]
    assert step.stage("scalify") is step.stages[scalify]
    exported = step.stage("exported")
    assert ".scale" not in exported and ".scale" in step.stage("scalify")
    with pytest.raises(KeyError, match="no stage 'fp8-dots'; stages: exported, inline"):
        step.stage("fp8-dots")


def test_stages_are_printed_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Printing the module after every pass cost compile_scaled as much as the rewrite itself
    (0.47 s -> 0.87 s on the transformer step): it happens on the first ``stage()``, from a
    rerun of the pipeline that gives the same module."""
    printed: list[int] = []
    real = module_io.module_to_text

    def counting(*args: Any, **kwargs: Any) -> str:
        printed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module_io, "module_to_text", counting)
    fn, args = models.mlp_step()
    step = compile_scaled(fn, *args, policy=F32)
    assert printed == []
    assert step.stage("simplify") == step.text
    assert len(printed) == 3 and list(step.stages)[1:] == [
        "inline", "scalify{data-dtype=f32 delayed-statistics=auto}", "simplify"]


# ----- argument errors ----------------------------------------------------------------------
def _error(step: ScaledStep, *args: Any) -> str:
    with pytest.raises(ScalifyError) as info:
        step(*args)
    return str(info.value)


def test_wrong_shape_names_the_argument(mlp: Case) -> None:
    (params, x, y), step = mlp.args, mlp.step
    step(params, x, y)  # a valid call first: jax.jit's cache must not hide later errors
    bad = [dict(layer) for layer in params]
    bad[1]["w"] = jnp.zeros((64, 65))
    assert _error(step, bad, x, y) == ("args[0][1]['w']: shape (64, 65) does not match the "
                                       "compiled step's (64, 64)")
    assert _error(step, params, x[:4], y).startswith("args[1]: shape (4, 32) does not match")
    scaled_bad = scale_tree(bad, jnp.float32)
    assert _error(step, scaled_bad, x, y).startswith("args[0][1]['w']: shape (64, 65)")
    with pytest.raises(ScalifyError, match=r"args\[0\]\[1\]\['w'\]: shape"):
        jax.jit(lambda *a: step(*a))(bad, x, y)


def test_wrong_dtype_names_the_argument(
        transformer: Case) -> None:
    (params, opt_state, tokens, targets), step = transformer.args, transformer.step
    message = _error(step, params, opt_state, tokens.astype(jnp.float32), targets)
    assert message == "args[2]: dtype float32 does not match the compiled step's int32"
    message = _error(step, params, opt_state, tokens, as_scaled(targets, jnp.float32))
    assert message == "args[3]: a ScaledArray where the step takes int32"
    bad_params = {**params, "wte": params["wte"].astype(jnp.int32)}
    assert _error(step, bad_params, opt_state, tokens, targets) == (
        "args[0]['wte']: dtype int32 does not match the compiled step's float32")


@pytest.mark.parametrize("leaf", ["relu", object(), np.array(["a", "b"]),
                                  np.zeros(2, dtype=[("a", "f4")])],
                         ids=["str", "object", "str-array", "record-array"])
def test_a_non_array_argument_is_a_one_line_error(leaf: Any) -> None:
    """A string among the arguments gave JAX's multi-frame TypeError naming no argument."""
    with pytest.raises(ScalifyError) as info:
        compile_scaled(lambda p, how: p["w"] * 2, {"w": jnp.ones(3)}, {"act": leaf},
                       policy=F32)
    message = str(info.value)
    assert message.startswith("args[1]['act']: a ") and "not an array" in message
    assert "\n" not in message


def test_bfloat16_parameters_are_arrays() -> None:
    """bfloat16 (numpy kind "V", as every ml_dtypes type) was refused as "not an array": a
    mixed-precision step whose weights are bf16 could not be compiled at all."""
    w = jax.random.normal(jax.random.PRNGKey(0), (16, 16)).astype(jnp.bfloat16)
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 16))

    def train_step(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def loss(w: jax.Array) -> jax.Array:
            return jnp.mean(jnp.tanh((x.astype(jnp.bfloat16) @ w).astype(jnp.float32)) ** 2)
        value, grad = jax.value_and_grad(loss)(w)
        return (w.astype(jnp.float32) - 0.1 * grad.astype(jnp.float32)).astype(jnp.bfloat16), value

    step = compile_scaled(train_step, w, x, policy=F32, return_scaled=False)
    new_w, value = step(w, x)
    want_w, want_value = jax.jit(train_step)(w, x)
    assert new_w.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(new_w, np.float32), np.asarray(want_w, np.float32))
    assert float(value) == float(want_value)


def test_a_python_float_argument_is_weakly_typed_as_under_jit() -> None:
    """A learning rate given as a Python float is weakly typed under ``jax.jit``: a bfloat16
    update stays bfloat16. Exported at a strong float32, the step returned float32 weights,
    which the next call refused as the wrong dtype."""
    w = jnp.linspace(-1.0, 1.0, 16).reshape(4, 4).astype(jnp.bfloat16)
    x = jnp.ones((2, 4), jnp.bfloat16)

    def train_step(w: jax.Array, x: jax.Array, lr: float) -> jax.Array:
        grad = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w).astype(jnp.float32) ** 2))(w)
        return w - lr * grad

    step = compile_scaled(train_step, w, x, 0.1, policy=F32, return_scaled=False)
    new_w = step(w, x, 0.1)
    assert new_w.dtype == jax.jit(train_step)(w, x, 0.1).dtype == jnp.bfloat16
    assert step(new_w, x, 0.1).dtype == jnp.bfloat16  # fed back: the same program
    weak_lr = jax.ShapeDtypeStruct((), jnp.float32, weak_type=True)  # shapes only, no values
    by_shapes = compile_scaled(train_step, w, x, weak_lr, policy=F32, return_scaled=False)
    assert by_shapes(w, x, 0.1).dtype == jnp.bfloat16


@pytest.mark.parametrize("dtype", [jnp.int4, jnp.uint2, jnp.float8_e4m3fnuz,
                                   jnp.float4_e2m1fn, jnp.complex64])
def test_narrow_and_complex_arguments_pass_through(dtype: Any) -> None:
    """A quantized weight (int4, an FP4 or FP8 variant) or a complex argument crashed the
    step's signature with a KeyError traceback: its element type had no numpy dtype."""
    codes = jnp.arange(4).astype(dtype)
    x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)

    def dequantized(codes: jax.Array, x: jax.Array) -> jax.Array:
        return x * jnp.real(codes.astype(jnp.complex64))

    step = compile_scaled(dequantized, codes, x, policy=F32, return_scaled=False)
    np.testing.assert_array_equal(np.asarray(step(codes, x)),
                                  np.asarray(jax.jit(dequantized)(codes, x)))


def test_wrong_tree_structure_names_the_argument(
        mlp: Case) -> None:
    (params, x, y), step = mlp.args, mlp.step
    prefix = "arguments do not have the structure the step was compiled for: "
    assert _error(step, params[:2], x, y) == prefix + "args[0][2]['b'] is missing"
    extra = [dict(layer) for layer in params]
    extra[0]["scale"] = jnp.ones(())
    assert _error(step, extra, x, y) == (
        prefix + "args[0][0]['scale'] is not an argument of the compiled step")
    assert _error(step, params, x) == prefix + "args[2] is missing"
    assert _error(step, tuple(params), x, y).startswith(prefix + "expected PyTreeDef(")


# ----- PRNG keys, and pipelines that do not scale -------------------------------------------
def _noisy(x: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A dropout-like step: takes a typed PRNG key and returns the next one."""
    key, sub = jax.random.split(key)
    return x * jax.random.bernoulli(sub, 0.5, x.shape) * 2.0, key


def test_typed_prng_keys_go_in_and_come_out_as_keys() -> None:
    """A key array crosses the exported module as its uint32 key data and comes back a key:
    eagerly, fed back in a loop, and inside jax.jit."""
    x = jnp.linspace(-1.0, 1.0, 16)
    step = compile_scaled(_noisy, x, jax.random.key(0), policy=F32)
    state, want = step.scale_args(x, jax.random.key(0)), (x, jax.random.key(0))
    for _ in range(3):
        state, want = step(*state), jax.jit(_noisy)(*want)
        assert jax.dtypes.issubdtype(state[1].dtype, jax.dtypes.prng_key)
        np.testing.assert_array_equal(jax.random.key_data(state[1]),
                                      jax.random.key_data(want[1]))
        assert_tree_close(unscale_tree(state[0]), want[0])
    jitted = jax.jit(step)(x, jax.random.key(1))
    assert_tree_close(unscale_tree(jitted[0]), _noisy(x, jax.random.key(1))[0])


def test_a_wrong_key_names_the_argument() -> None:
    x = jnp.linspace(-1.0, 1.0, 16)
    step = compile_scaled(_noisy, x, jax.random.key(0), policy=F32)
    assert _error(step, x, jax.random.PRNGKey(0)) == (
        "args[1]: the step takes a PRNG key array (threefry2x32), got uint32")
    assert _error(step, x, jax.random.key(0, impl="rbg")) == (
        "args[1]: a rbg key array of shape () where the step takes threefry2x32 keys of "
        "shape ()")
    plain = compile_scaled(lambda x, n: x * n, x, jnp.uint32(3), policy=F32)
    with pytest.raises(ScalifyError, match=r"args\[1\]: a PRNG key array where the step "
                                           r"takes uint32"):
        plain(x, jax.random.key(0))


def test_a_host_callback_in_the_step_is_a_one_line_error() -> None:
    """jax.export cannot serialize a host callback: that is a ScalifyError naming what to
    remove, not jax's NotImplementedError."""
    def step(x: jax.Array) -> jax.Array:
        jax.debug.print("x0 {}", x[0])
        return jnp.tanh(x)

    with pytest.raises(ScalifyError, match=r"cannot export the step with jax.export: .*"
                                           r"host_callbacks.*remove jax.debug.print"):
        compile_scaled(step, jnp.ones(4), policy=F32)


def test_a_pipeline_without_scalify_is_refused() -> None:
    x = jnp.linspace(-1.0, 1.0, 16)
    with pytest.raises(ScalifyError, match="does not give the scaled calling convention"):
        compile_scaled(lambda x: x * 2.0, x, pipeline="inline,simplify")


def test_delayed_statistics_apply_the_exponents_a_call_before_measured() -> None:
    """Policy(statistics="delayed"): the first call measures and applies, a call fed the
    outputs of one before applies the exponents that call measured (carried in the bank),
    and the numbers are those of current statistics (a power-of-two shift of f16 data is
    exact away from the ends of its range). An unknown choice is one error line."""
    train_step, (params, x, y) = models.mlp_step(batch=8, sizes=(8, 16, 4))
    for fp8_dots in (False, True):  # rescale points; and FP8 operands' amaxes too
        runs = {}
        for statistics in ("current", "delayed"):
            step = compile_scaled(train_step, params, x, y, policy=Policy(
                data_dtype="float16", fp8_dots=fp8_dots, statistics=statistics))
            state, losses = step.scale_args(params, x, y)[0], []
            for _ in range(3):
                state, loss = step(state, x, y)
                losses.append(float(loss.unscale()))
            runs[statistics] = (step, losses)
        step, losses = runs["delayed"]
        assert step._delayed > 0 and sorted(layout[-1] for layout in step._programs) == [-1, 0]
        # f16 data: exact but for the ends of its range. An FP8 operand shifted by an amax
        # one binade away from the current one (the weight's amax crossed a power of two
        # between calls) rounds its smallest values in E4M3FN's subnormals differently.
        np.testing.assert_allclose(losses, runs["current"][1], rtol=1e-2 if fp8_dots else 1e-3)
        assert "delayed_exponents" in step.delayed_text
    with pytest.raises(ScalifyError, match="unknown statistics 'later'"):
        Policy(statistics="later")


def test_delayed_result_that_was_all_zero_is_not_saturated() -> None:
    """A result of the update (a momentum, say) that is all zero at one call hands on
    exponent 0 to the next, not the smallest exponent all-zero data takes: stored at that
    one, the next call's nonzero values would saturate at f16's largest data, 2^126 times
    too small once scaled (a gradient accumulator reset to zero every k steps)."""

    def step(w, m, x, decay):
        g = jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
        m = decay * m + g
        return w - 0.1 * m, m

    w = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    m, zeros = np.zeros((8, 4), np.float32), np.zeros((4, 8), np.float32)
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    decay = np.float32(0.9)
    scaled = compile_scaled(step, w, m, zeros, decay,
                            policy=Policy(fp8_dots=False, statistics="delayed"))
    assert scaled._delayed > 0
    state = scaled.scale_args(w, m, zeros, decay)
    w1, m1 = scaled(*state)  # x = 0: zero gradient, m stays all zero
    assert not np.any(np.asarray(unscale_tree(m1)))
    w2, m2 = scaled(w1, m1, *scaled.scale_args(w, m, x, decay)[2:])
    want_w, want_m = jax.jit(step)(*jax.jit(step)(w, m, zeros, decay), x, decay)
    np.testing.assert_allclose(np.asarray(unscale_tree(m2)), want_m, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(np.asarray(unscale_tree(w2)), want_w, rtol=2e-2, atol=2e-2)


def test_an_internal_error_of_the_rewrite_is_a_scalify_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug of ours inside the rewrite (a TypeError from the MLIR bindings, say) reaches
    the caller as a ScalifyError that names it, as the CLI's one line does: it came through
    as the bare TypeError (the gradient of abs(rfft(v)), docs/robustness.md)."""
    def broken(*args: Any, **kwargs: Any) -> None:
        raise TypeError("Can't cast unknown element type\n DenseTypedElementsAttr")

    monkeypatch.setattr("scalify_hlo.scaled_step.rewrite_module_source", broken)
    with pytest.raises(ScalifyError, match=r"^cannot rewrite the step: internal error "
                                           r"\(TypeError\): Can't cast unknown element type "
                                           r"DenseTypedElementsAttr$"):
        compile_scaled(lambda x: x * 2.0, jnp.ones(4))
