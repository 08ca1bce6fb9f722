"""Every propagation rule is exact in f32: the scalified module reproduces the original.

For each case of the op corpus the original module runs on random inputs for a reference;
the module rewritten by ``scalify{data-dtype=f32},simplify`` runs on the same values split into
``data * 2**k`` with random k in [-40, 40] per input, and its ``(data, scale)`` outputs, put
back together, must match the reference to f32 rounding (see ``assert_matches``). With power of
two scales and f32 data nothing but the op itself may round, so a mismatch is a rule bug.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalify_hlo.runner import compile_module, run_executable
from tests.op_cases import CASES, OpCase, covering_cases, ops_in_text
from tests.scaled_helpers import (
    TensorSig,
    assert_matches,
    is_floating,
    main_signature,
    scaled_inputs,
    split_scaled,
    unscale_outputs,
)

PIPELINE = "scalify{data-dtype=f32},simplify"
DATA_DTYPE = np.dtype(np.float32)
SEEDS = (0, 1, 2)
RTOL = 1e-6

# Ops a rule table may name that the corpus cannot exercise on XLA:CPU with static shapes.
EXEMPT: dict[str, str] = {
    **dict.fromkeys(
        ("func.func", "func.return", "stablehlo.return", "builtin.module"),
        "containers and terminators: every case exercises them, none is about them",
    ),
    **dict.fromkeys(
        (
            "stablehlo.dynamic_broadcast_in_dim",
            "stablehlo.dynamic_reshape",
            "stablehlo.dynamic_iota",
            "stablehlo.dynamic_pad",
            "stablehlo.dynamic_gather",
            "stablehlo.dynamic_conv",
            "stablehlo.real_dynamic_slice",
        ),
        "needs dynamic shapes; XLA compiles only static shapes and the corpus is static",
    ),
    **dict.fromkeys(
        (
            "stablehlo.after_all",
            "stablehlo.create_token",
            "stablehlo.infeed",
            "stablehlo.outfeed",
            "stablehlo.send",
            "stablehlo.recv",
        ),
        "token-ordered host I/O: run_module has no host transfer to feed or drain it",
    ),
    "stablehlo.rng": (
        "draws from XLA's per-executable generator state: two compilations give different "
        "numbers, so the original cannot serve as a reference"
    ),
    "stablehlo.collective_broadcast": "XLA:CPU cannot compile it (no ThunkEmitter for it)",
    "sdy.reshard": (
        "written by Shardy's propagation, not by JAX's lowering (jax.sharding.reshard lowers "
        "to sharding_constraint), and XLA's module import refuses it ('unknown mesh'); "
        "golden scalify/sharding.mlir covers its rule"
    ),
    **dict.fromkeys(
        ("stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"),
        "quantized element types, outside the float scale model",
    ),
}


def _rewrite_text():
    try:
        from scalify_hlo.api import rewrite_text
    except ImportError as exc:
        pytest.skip(f"scalify_hlo.api.rewrite_text is not available yet ({exc})")
    return rewrite_text


def _check_scaled_signature(
    original: list[TensorSig], scaled: list[TensorSig], what: str
) -> list[np.dtype]:
    """Each float becomes (data with its shape, rank-0 f32 scale); the rest is unchanged.

    Returns the data dtypes of the floating slots, in order.
    """
    data_dtypes: list[np.dtype] = []
    pos = 0
    for i, sig in enumerate(original):
        if sig.floating:
            assert pos + 1 < len(scaled), f"{what} {i} ({sig.mlir}): missing (data, scale) pair"
            data, scale = scaled[pos], scaled[pos + 1]
            assert data.shape == sig.shape and data.dtype == DATA_DTYPE, (
                f"{what} {i} ({sig.mlir}): data is {data.mlir}, expected that shape in f32"
            )
            assert scale.shape == () and scale.dtype == np.float32, (
                f"{what} {i} ({sig.mlir}): scale is {scale.mlir}, expected tensor<f32>"
            )
            data_dtypes.append(data.dtype)
            pos += 2
        else:
            assert pos < len(scaled), f"{what} {i} ({sig.mlir}) is missing"
            assert scaled[pos].mlir == sig.mlir, (
                f"{what} {i}: non-float {sig.mlir} became {scaled[pos].mlir}"
            )
            pos += 1
    assert pos == len(scaled), f"{len(scaled)} {what}s after scalify, expected {pos}"
    return data_dtypes


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_exactness(case: OpCase) -> None:
    rewrite_text = _rewrite_text()
    if case.setup is not None:
        case.setup()
    scaled_text = rewrite_text(case.mlir, PIPELINE)
    orig_args, orig_results = main_signature(case.mlir)
    new_args, new_results = main_signature(scaled_text)
    data_dtypes = _check_scaled_signature(orig_args, new_args, "argument")
    _check_scaled_signature(orig_results, new_results, "result")

    original = compile_module(case.mlir)
    scaled = compile_module(scaled_text)
    lo, hi = case.scale_range
    # Unit scales first: a failure there is the rule itself, not its scale arithmetic.
    runs = [(SEEDS[0], 0, 0)] + [(seed, lo, hi) for seed in SEEDS]
    for seed, k_lo, k_hi in runs:
        inputs = case.inputs(np.random.default_rng(seed))
        ref = run_executable(original, inputs)
        feed = scaled_inputs(inputs, np.random.default_rng(seed + 1000), k_lo, k_hi, data_dtypes)
        _check_run(case, seed, orig_results, scaled, ref, inputs, feed)
    # The sweep: every operand at 2^-20 or 2^20, together and against each other (random
    # exponents rarely put every operand at an extreme at once). The same compiled modules.
    inputs = case.inputs(np.random.default_rng(SEEDS[0]))
    ref = run_executable(original, inputs)
    try:
        for exponents in _sweep(len(data_dtypes), lo, hi):
            feed = _inputs_at(inputs, exponents, data_dtypes)
            _check_run(case, SEEDS[0], orig_results, scaled, ref, inputs, feed)
    except AssertionError as exc:
        if case.name in SWEEP_KNOWN:
            pytest.xfail(f"{SWEEP_KNOWN[case.name]} ({exc})")
        raise
    assert case.name not in SWEEP_KNOWN, f"{case.name} passes the sweep: drop it from SWEEP_KNOWN"


SWEEP_EXPONENT = 20
# Cases the sweep fails on for a known reason not fixed yet (strict: a pass fails the test).
SWEEP_KNOWN: dict[str, str] = {}


def _sweep(count: int, lo: int, hi: int) -> list[list[int]]:
    """Exponent assignments for ``count`` float inputs: all at -20, all at 20, alternating
    both ways (clipped to the case's range)."""
    k = [max(lo, -SWEEP_EXPONENT), min(hi, SWEEP_EXPONENT)]
    rows = [[k[0]] * count, [k[1]] * count]
    if count > 1:
        rows += [[k[i % 2] for i in range(count)], [k[1 - i % 2] for i in range(count)]]
    return rows


def _inputs_at(inputs: list[np.ndarray], exponents: list[int],
               data_dtypes: list[np.dtype]) -> list[np.ndarray]:
    """``inputs`` split as ``data * 2**k`` with the given k per float input, in order."""
    feed: list[np.ndarray] = []
    position = 0
    for x in inputs:
        if is_floating(np.asarray(x).dtype):
            k = exponents[position]
            feed += scaled_inputs([x], np.random.default_rng(0), k, k,
                                  [data_dtypes[position]])
            position += 1
        else:
            feed.append(x)
    return feed


def _check_run(case: OpCase, seed: int, orig_results: list[TensorSig], scaled,
               ref: list[np.ndarray], inputs: list[np.ndarray], feed: list[np.ndarray]) -> None:
    try:
        got = unscale_outputs(orig_results, run_executable(scaled, feed))
        assert_matches(ref, got, RTOL)
    except AssertionError as exc:
        raise AssertionError(
            f"{case.name}, seed {seed}, input scales 2**{_exponents(inputs, feed)}: {exc}"
        ) from None


def _exponents(inputs: list[np.ndarray], feed: list[np.ndarray]) -> list[int]:
    """The k of each floating input's scale 2**k, for failure messages."""
    out, pos = [], 0
    for x in inputs:
        if is_floating(np.asarray(x).dtype):
            out.append(int(np.frexp(feed[pos + 1])[1]) - 1)
            pos += 2
        else:
            pos += 1
    return out


def test_every_rule_is_covered() -> None:
    try:
        from scalify_hlo.rewrites.rules import RULES
    except ImportError as exc:
        pytest.skip(f"scalify_hlo.rewrites.rules is not available yet ({exc})")
    covered = covering_cases()
    missing = sorted(op for op in RULES if op not in covered and op not in EXEMPT)
    assert not missing, f"ops with a rule but no case in tests/op_cases.py: {missing}"


# The exactness test above runs in f32 data mode, where an op keeps its original result types;
# in the narrow data types a rule that gives a result the data type where the op fixes it (the
# f32 abs of a complex value) makes an invalid module. Every case must rewrite (and verify) in
# every data type and pipeline a user can choose.
OTHER_PIPELINES = (
    "inline,scalify{data-dtype=f16},simplify",
    "inline,scalify{data-dtype=bf16},simplify",
    "inline,scalify{data-dtype=f16 common-scale=max},fp8-dots,simplify",
    "inline,scalify{data-dtype=f32 common-scale=max},fp8-dots,simplify",
    "inline,rescale{at=gradients method=amax rounding=nearest},scalify{data-dtype=f16},"
    "fp8-dots,simplify",
)


@pytest.mark.parametrize("pipeline", OTHER_PIPELINES)
def test_every_case_rewrites_in_every_data_type(pipeline: str) -> None:
    from scalify_hlo.api import rewrite_module_source

    failed = [f"{case.name}: {result.error}" for case in CASES
              if (result := rewrite_module_source(case.mlir, pipeline)).error is not None]
    assert not failed, "\n".join(failed)


# --------------------------------------------------------------------------- the corpus itself


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_original_runs(case: OpCase) -> None:
    """The corpus is only useful if each original parses, compiles and runs as declared."""
    if case.setup is not None:
        case.setup()
    args, results = main_signature(case.mlir)
    inputs = case.inputs(np.random.default_rng(0))
    assert [(x.shape, x.dtype) for x in inputs] == [(a.shape, a.dtype) for a in args]
    outputs = run_executable(compile_module(case.mlir), inputs)
    assert [(y.shape, y.dtype) for y in outputs] == [(r.shape, r.dtype) for r in results]


def test_case_metadata() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        missing = set(case.ops) - ops_in_text(case.mlir)
        assert not missing, f"{case.name} declares ops its module does not contain: {missing}"
        lo, hi = case.scale_range
        assert lo <= 0 <= hi, case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_inputs_split_exactly_at_extreme_scales(case: OpCase) -> None:
    """Every input must survive ``x / 2**k`` in f32 for the case's extreme exponents."""
    lo, hi = case.scale_range
    for seed in SEEDS:
        inputs = case.inputs(np.random.default_rng(seed))
        for k in (lo, hi):
            scaled_inputs(inputs, np.random.default_rng(0), k, k)


# --------------------------------------------------------------------------- the helpers


def test_split_and_unscale_round_trip() -> None:
    rng = np.random.default_rng(0)
    x = np.array([1.5, -0.0, np.nan, np.inf, -np.inf, 3e-20, 7e20], np.float32)
    data, scale = split_scaled(x, rng)
    assert data.dtype == np.float32 and scale.dtype == np.float32
    assert np.frexp(scale)[0] == 0.5
    (back,) = unscale_outputs([x], [data, np.asarray(scale)])
    np.testing.assert_array_equal(back, x)
    assert np.signbit(back[1])


def test_split_refuses_inexact_data() -> None:
    with pytest.raises(ValueError):
        split_scaled(np.array([1e-30], np.float32), np.random.default_rng(0), 40, 40)


def test_scaled_inputs_keeps_non_floats_in_place() -> None:
    rng = np.random.default_rng(0)
    inputs = [np.int32(3), np.ones((2,), np.float32), np.array([True])]
    feed = scaled_inputs([np.asarray(x) for x in inputs], rng)
    assert [np.asarray(x).dtype for x in feed] == [np.int32, np.float32, np.float32, np.bool_]
    assert feed[2].shape == ()


def test_unscale_rejects_bad_scales() -> None:
    ref = [np.zeros(2, np.float32)]
    for bad in (np.float32(3.0), np.float32(np.inf), np.float32(0.0), np.float64(2.0)):
        with pytest.raises(AssertionError):
            unscale_outputs(ref, [np.zeros(2, np.float32), np.asarray(bad)])
    with pytest.raises(AssertionError):
        unscale_outputs(ref, [np.zeros(2, np.float32)])


@pytest.mark.parametrize(
    ("got", "ok"),
    [
        ([1.0, np.nan, np.inf, 0.0], True),
        ([1.0 + 1e-7, np.nan, np.inf, -0.0], True),
        ([1.0 + 1e-5, np.nan, np.inf, 0.0], False),
        ([1.0, 0.0, np.inf, 0.0], False),
        ([1.0, np.nan, -np.inf, 0.0], False),
        ([1.0, np.nan, np.inf, 1e-30], False),
    ],
)
def test_assert_matches(got: list[float], ok: bool) -> None:
    ref = [np.array([1.0, np.nan, np.inf, 0.0], np.float32)]
    if ok:
        assert_matches(ref, [np.array(got, np.float32)], RTOL)
    else:
        with pytest.raises(AssertionError):
            assert_matches(ref, [np.array(got, np.float32)], RTOL)


def test_assert_matches_integers_exactly() -> None:
    assert_matches([np.array([1, 2], np.int32)], [np.array([1, 2], np.int32)], RTOL)
    with pytest.raises(AssertionError):
        assert_matches([np.array([1, 2], np.int32)], [np.array([1, 3], np.int32)], RTOL)
