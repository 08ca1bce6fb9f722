"""Sharded steps on 8 host devices (issue 18): shard_map with collectives, sharding
constraints, and the output shardings of data-parallel, FSDP and 4x2 tensor-parallel steps,
in the f32, f16 and default policies.

As in test_distributed.py, JAX's device count is fixed at start, so one subprocess runs every
case (testdata/sharded_setups.py builds them) and reports JSON; the assertions are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import REPO_ROOT, TESTDATA, simulated_devices_flags

SCRIPT = r"""
import dataclasses, json, sys
import jax
import numpy as np
sys.path.insert(0, sys.argv[1])
import models
import sharded_setups as setups
from scalify_hlo import Policy, ScaledArray, compile_scaled, unscale_tree
from scalify_hlo.scaled_array import is_scaled_leaf
from scalify_hlo.rewrites import print_pipeline
from scalify_hlo.rewrites.simplify import Simplify
from scalify_hlo.targets.collectives import serial_collectives

POLICIES = {"f32": Policy(data_dtype="float32", fp8_dots=False),
            "f16": Policy(data_dtype="float16", fp8_dots=False), "default": Policy()}


def errors(got, want):
    # per leaf: max |got - want| / max |want|
    out = []
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        out.append(float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30)))
    return out


def same_shardings(got, want):
    return [(x.data if isinstance(x, ScaledArray) else x).sharding.is_equivalent_to(
                y.sharding, y.ndim)
            for x, y in zip(jax.tree.leaves(got, is_leaf=is_scaled_leaf), jax.tree.leaves(want),
                            strict=True)]


report = {}
# Output shardings: jax.jit's, for every output of every setup.
def all_reduces(compiled):
    return sum(line.count(" all-reduce(") + line.count(" all-reduce-start(")
               for line in compiled.as_text().splitlines())


for name, policies in (("data_parallel", ["f32", "default"]), ("fsdp", ["default"]),
                       ("tensor_parallel", ["f32", "f16", "default"])):
    step, args = setups.setup(name)
    want = jax.jit(step)(*args)
    original = jax.jit(step).lower(*args).compile()
    original_all_reduces = all_reduces(original)
    for policy in policies:
        scaled = compile_scaled(step, *args, policy=POLICIES[policy])
        out = scaled(*args)
        again = scaled(*out[:-1], *args[-2:])  # outputs fed back: no resharding
        fed_back = scaled.lower(*out[:-1], *args[-2:]).compile()
        report[f"{name}/{policy}"] = {
            "errors": errors(unscale_tree(out), want), "same": same_shardings(out, want),
            "again_same": same_shardings(again, want),
            "fallbacks": len(scaled.report().warnings),
            "all_reduces": all_reduces(scaled.lower(*args).compile()),
            "fed_back_all_reduces": all_reduces(fed_back),
            "fed_back_serial": serial_collectives(fed_back.as_text()),
            "original_serial": serial_collectives(original.as_text()),
            "delayed_points": scaled._delayed, "original_all_reduces": original_all_reduces,
            "gradients_marked": scaled.report().stats.get("scalify.gradients-marked", 0),
            "gradients_joined": scaled.report().stats.get("simplify.gradients-joined", 0)}

# shard_map: psum of gradients, psum of their squares; and 4 steps of training.
step, args = setups.setup("shard_map")
single, _ = models.mlp_step(batch=16, sizes=(16, 32, 16))
want = jax.jit(step)(*args)
original_psums = jax.jit(step).lower(*args).as_text().count("stablehlo.all_reduce")
for policy in POLICIES:
    scaled = compile_scaled(step, *args, policy=POLICIES[policy])
    out = unscale_tree(scaled(*args))
    unsharded = jax.tree.map(np.asarray, args)  # the same step on one device, as a reference
    single_errors = errors(unscale_tree(compile_scaled(single, *unsharded, policy=POLICIES[
        policy])(*unsharded))[0], jax.jit(single)(*unsharded)[0])
    losses, reference, reference_losses = [], unsharded[0], []
    state = args[0]
    for _ in range(4):
        state, loss, _ = scaled(state, *args[1:])
        losses.append(float(unscale_tree(loss)))
        reference, loss = jax.jit(single)(reference, *unsharded[1:])
        reference_losses.append(float(loss))
    report[f"shard_map/{policy}"] = {
        "errors": errors(out, want), "single_errors": single_errors,
        "norm": float(out[2]), "want_norm": float(want[2]),
        "losses": losses, "reference_losses": reference_losses,
        "fallbacks": len(scaled.report().warnings),
        "agreed": scaled.report().stats.get("scalify.agreed-scales", 0),
        "module_all_reduces": scaled.lower(*args).as_text().count("stablehlo.all_reduce"),
        "original_all_reduces": original_psums,
        "combined": scaled.report().stats.get("simplify.all-reduces-combined", 0),
        "param_leaves": len(jax.tree.leaves(args[0]))}

# Delayed statistics: data parallel in f16, three calls each fed the one before's outputs;
# collectives of the program a fed-back call runs, against current statistics.
step, args = setups.setup("data_parallel")
calls = {}
for stats in ("current", "delayed"):
    scaled = compile_scaled(step, *args, policy=Policy(data_dtype="float16", fp8_dots=False,
                                                       statistics=stats))
    state, outs = scaled.scale_args(*args), []
    for _ in range(3):
        out = scaled(*state)
        outs.append(unscale_tree(out))
        state = (*out[:-1], *state[-2:])
    calls[stats] = {"outs": outs, "all_reduces": all_reduces(scaled.lower(*state).compile()),
                    "points": scaled._delayed, "same": same_shardings(out, jax.jit(step)(*args))}
report["data_parallel/f16-delayed"] = {
    "errors": [max(errors(d, c)) for d, c in zip(calls["delayed"]["outs"],
                                                  calls["current"]["outs"], strict=True)],
    "all_reduces": calls["delayed"]["all_reduces"], "points": calls["delayed"]["points"],
    "current_all_reduces": calls["current"]["all_reduces"], "same": calls["delayed"]["same"],
    "original_all_reduces": all_reduces(jax.jit(step).lower(*args).compile())}

# join-gradients changes no bit: data parallel, default policy, with and without it, two
# calls (the second fed the first's outputs: the program a training loop runs).
step, args = setups.setup("data_parallel")
bits = {}
for join in (True, False):
    passes = [dataclasses.replace(p, join_gradients=join) if isinstance(p, Simplify) else p
              for p in POLICIES["default"].passes()]
    scaled = compile_scaled(step, *args, pipeline=print_pipeline(passes))
    state, leaves = scaled.scale_args(*args), []
    for _ in range(2):
        out = scaled(*state)
        leaves += [np.asarray(x).tobytes() for x in jax.tree.leaves(out)]
        state = (*out[:-1], *state[-2:])
    bits[join] = (leaves, scaled.report().stats.get("simplify.gradients-joined", 0))
report["data_parallel/join"] = {"identical": bits[True][0] == bits[False][0],
                                "joined": bits[True][1], "unjoined": bits[False][1]}

# with_sharding_constraint on values that f16 at scale 1 would flush.
step, args = setups.setup("constraint")
want = jax.jit(step)(*args)
scaled = compile_scaled(step, *args, policy=POLICIES["f16"])
got = np.asarray(unscale_tree(scaled(*args)), np.float64)
report["constraint/f16"] = {
    "errors": errors(got, want), "zeros": int(np.sum(got == 0)),
    "fallbacks": len(scaled.report().warnings)}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    env = {**os.environ, "XLA_FLAGS": simulated_devices_flags(8),
           "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(TESTDATA)], env=env,
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["data_parallel/f32", "data_parallel/default", "fsdp/default",
                                  "tensor_parallel/f32", "tensor_parallel/f16",
                                  "tensor_parallel/default"])
def test_outputs_keep_jax_shardings(report: dict[str, Any], case: str) -> None:
    """Every output leaf has the sharding jax.jit gives the original's, also on a second
    call fed with the first one's outputs."""
    found = report[case]
    assert all(found["same"]) and all(found["again_same"]), found
    assert found["fallbacks"] == 0


def test_plain_sharded_inputs_cost_one_all_reduce(report: dict[str, Any]) -> None:
    """A data-parallel f32 step has static scales only; what it adds is the split of the
    batch (plain arrays sharded over 'data') into data and scale on each call: its
    statistics are all sums, which XLA combines into one all-reduce (an any, an all and an
    integer count made four)."""
    found = report["data_parallel/f32"]
    assert found["all_reduces"] <= found["original_all_reduces"] + 1, found


def test_tensor_parallel_f32_is_exact(report: dict[str, Any]) -> None:
    assert max(report["tensor_parallel/f32"]["errors"]) <= 1e-6


def test_shard_map_f32_is_exact(report: dict[str, Any]) -> None:
    found = report["shard_map/f32"]
    assert max(found["errors"]) <= 1e-6, found
    assert found["fallbacks"] == 0


@pytest.mark.parametrize("policy", ["f16", "default"])
def test_shard_map_body_is_scaled(report: dict[str, Any], policy: str) -> None:
    """The body has rules (no fallback): a sum of squares of values near 1e-4 is not
    flushed to 0 in f16, and the new parameters are as close to jax.jit's as those of the
    same step rewritten on one device."""
    found = report[f"shard_map/{policy}"]
    assert found["fallbacks"] == 0
    tolerance = 2e-3 if policy == "f16" else 5e-2
    assert abs(found["norm"] - found["want_norm"]) <= tolerance * found["want_norm"], found
    params = len(found["single_errors"])
    assert max(found["errors"][:params]) <= 2 * max(found["single_errors"]) + 1e-3, found


def test_rescaled_gradients_agree_before_the_psum(report: dict[str, Any]) -> None:
    """The default policy rescales gradients by their local amax: those scales differ per
    device and are agreed (max all-reduce) before the collective sums them."""
    assert report["shard_map/default"]["agreed"] > 0
    assert report["shard_map/f32"]["agreed"] == 0  # static scales: nothing to agree on


@pytest.mark.parametrize("policy", ["f16", "default"])
def test_scales_of_values_every_device_holds_are_not_agreed(report: dict[str, Any],
                                                            policy: str) -> None:
    """Only the scales of what each device computes from its own shard are agreed: the
    gradients before their psum and the loss before its pmean. The updated parameters, made
    from replicated ones and the summed gradients, are the same on every device, and so are
    the scales measured from them (device_invariance.py): they leave the region unagreed."""
    found = report[f"shard_map/{policy}"]
    assert 0 < found["agreed"] <= found["param_leaves"] + 1


@pytest.mark.parametrize("policy", ["f32", "f16", "default"])
def test_shard_map_psums_are_combined(report: dict[str, Any], policy: str) -> None:
    """The body's independent psums reach XLA as one all-reduce per kind (combine-all-reduces):
    fewer than the original's one per leaf, and in f32 mode two, the gradients' sum and the
    sum of their squares that reads it (XLA:GPU's fusion chained them one after another)."""
    found = report[f"shard_map/{policy}"]
    assert found["combined"] > 0
    assert found["module_all_reduces"] < found["original_all_reduces"]
    if policy == "f32":
        assert found["module_all_reduces"] == 2


@pytest.mark.parametrize("policy", ["f32", "f16", "default"])
def test_shard_map_step_trains_as_the_unsharded_one(report: dict[str, Any],
                                                    policy: str) -> None:
    found = report[f"shard_map/{policy}"]
    tolerance = {"f32": 1e-5, "f16": 2e-3, "default": 2e-2}[policy]
    for got, want in zip(found["losses"], found["reference_losses"], strict=True):
        assert abs(got - want) <= tolerance * abs(want), found
    assert found["losses"][-1] < found["losses"][0]


def test_sharding_constraint_keeps_small_values(report: dict[str, Any]) -> None:
    found = report["constraint/f16"]
    assert found["fallbacks"] == 0 and found["zeros"] == 0, found
    assert max(found["errors"]) <= 1e-3, found


def test_delayed_statistics_take_one_combined_all_reduce(report: dict[str, Any]) -> None:
    """With delayed statistics a fed-back call applies the exponents the call before
    measured, so its statistics wait for nothing and XLA combines their all-reduces: at most
    the original's plus two, where current statistics chain one per rescale point. The
    numbers are those of current statistics (a power-of-two shift of f16 data is exact away
    from the ends of its range), and the outputs keep jax.jit's shardings."""
    found = report["data_parallel/f16-delayed"]
    assert found["points"] > 2, found
    assert found["all_reduces"] <= found["original_all_reduces"] + 2, found
    assert found["current_all_reduces"] > found["all_reduces"], found
    assert max(found["errors"]) < 1e-3, found
    assert all(found["same"]), found


def test_default_policy_delays_statistics_of_a_partitioned_step(report: dict[str, Any]) -> None:
    """Policy() (statistics="auto") delays the statistics of a step that is partitioned:
    a data-parallel call fed the outputs of the one before takes at most the original's
    all-reduces plus two; the f32 policy has no rescale point and keeps one program."""
    found = report["data_parallel/default"]
    assert found["delayed_points"] > 2, found
    assert found["fed_back_all_reduces"] <= found["original_all_reduces"] + 2, found
    assert report["data_parallel/f32"]["delayed_points"] == 0


def test_fsdp_statistics_wait_for_no_statistic(report: dict[str, Any]) -> None:
    """FSDP, default policy, a fed-back call (delayed statistics): the results are stored at
    the exponents the call before measured and the statistics are fenced together, so no
    statistic's all-reduce waits for another's. Past the original's (one for the
    gradients): the f16 gradients' own, and one each for the max and the sum statistics;
    on the data path at most one collective more than the original's."""
    found = report["fsdp/default"]
    assert found["fed_back_all_reduces"] <= found["original_all_reduces"] + 3, found
    assert found["fed_back_serial"] <= found["original_serial"] + 1, found


def test_replicated_gradients_are_joined(report: dict[str, Any]) -> None:
    """join-gradients: every gradient of a data-parallel step (all of replicated
    parameters) that scalify marks reaches the join; FSDP's and tensor parallelism's steps,
    with sharded parameters, mark none."""
    found = report["data_parallel/default"]
    assert found["gradients_marked"] == found["gradients_joined"] == 4, found
    assert report["data_parallel/f32"]["gradients_joined"] == 4
    for case in ("fsdp/default", "tensor_parallel/default", "tensor_parallel/f16"):
        assert report[case]["gradients_marked"] == report[case]["gradients_joined"] == 0


def test_joining_gradients_changes_no_bit(report: dict[str, Any]) -> None:
    found = report["data_parallel/join"]
    assert found["joined"] == 4 and found["unjoined"] == 0, found
    assert found["identical"], found
