"""``vectorize-scalar-chains``: the same numbers from one vector op per chain step.

The golden file shows the IR of small cases; these tests run whole rewritten training steps
with and without the pass (simplify's ``vectorize`` option): an elementwise op computes each
element alone, so every output must be bit-identical, and the chains must really be gone.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pytest

from scalify_hlo import Policy
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.inputs import random_inputs
from scalify_hlo.rewrites.delayed_statistics import with_delayed_mode
from scalify_hlo.rewrites.simplify import Simplify
from scalify_hlo.runner import run_module
from scalify_hlo.signature import entry_signature, split_inputs
from testdata import models


def _pipeline(policy: Policy, vectorize: str, delayed: str | None) -> str:
    """The policy's passes in ``delayed`` mode with simplify's ``vectorize`` option
    (``option``), the pass after them (``pass``) or neither (``none``)."""
    passes = policy.passes()
    if delayed is not None:
        passes = with_delayed_mode(passes, delayed)
    passes = [dataclasses.replace(p, vectorize=vectorize == "option")
              if isinstance(p, Simplify) else p for p in passes]
    text = ",".join(str(p) for p in passes)
    return text + ",vectorize-scalar-chains" if vectorize == "pass" else text


def _inputs(original: str, rewritten: str, seed: int) -> list[np.ndarray]:
    """The original's random inputs split into (data, scale) pairs with power-of-two scales
    (data in the rewrite's types), and a given exponent vector of small exponents where the
    rewrite takes one."""
    signature = entry_signature(original)
    rng = np.random.default_rng(seed)
    scales = [float(2.0 ** rng.integers(-4, 5)) for _ in signature.inputs]
    inputs = split_inputs(signature, random_inputs(signature, rng), scales)
    specs = entry_signature(rewritten).inputs
    return ([x.astype(spec.dtype) for x, spec in zip(inputs, specs, strict=False)]
            + [rng.integers(-3, 4, size=spec.shape).astype(np.int32)
               for spec in specs[len(inputs):]])


@pytest.mark.parametrize(("target", "delayed", "how", "stat"), [
    # what a GPU training loop runs from its second call: simplify vectorizes
    ("h100", "use", "option", "simplify.scalar-ops-vectorized"),
    # its first call, whose chains scale its data (simplify leaves them), and the default
    # policy (current statistics): the pass alone
    ("h100", "measure", "pass", "vectorize-scalar-chains.ops"),
    (None, None, "pass", "vectorize-scalar-chains.ops"),
])
def test_vectorized_step_is_bit_identical(target: str | None, delayed: str | None, how: str,
                                          stat: str) -> None:
    original = _gpt_text()
    policy = Policy.for_target(target) if target else Policy()
    plain = rewrite_module_source(original, _pipeline(policy, "none", delayed))
    vectorized = rewrite_module_source(original, _pipeline(policy, how, delayed))
    assert plain.error is None and vectorized.error is None
    assert vectorized.context.stats[stat] > 0
    plain_text, vectorized_text = plain.output.decode(), vectorized.output.decode()
    assert len(vectorized_text) < len(plain_text)
    inputs = _inputs(original, plain_text, seed=1)
    for want, got in zip(run_module(plain_text, inputs), run_module(vectorized_text, inputs),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_simplify_vectorizes_only_steps_given_their_exponents() -> None:
    """Where a step applies what its statistics measure (current statistics, a delayed
    step's first call), XLA:GPU runs each vector op as a kernel of its own, where it copied
    the scalar chain into the kernels that read it: simplify's option leaves such steps."""
    original = _gpt_text()
    for policy, delayed in ((Policy.for_target("h100"), "measure"),
                            (Policy.for_target("h100", statistics="current"), None)):
        result = rewrite_module_source(original, _pipeline(policy, "option", delayed))
        assert result.error is None
        assert not result.context.stats.get("simplify.scalar-ops-vectorized"), delayed


def test_given_exponents_are_clamped_as_one_vector() -> None:
    """Each exponent a GPU step is given is clamped to bounds of its use (-126/126,
    -127/127): per-lane constants, which become one constant vector whatever the lane count
    (the 1-layer GPT's delayed exponents outnumber the pack width): no clamp is left on one
    element of the given vector."""
    text = _rewritten_text(_pipeline(Policy.for_target("h100"), "option", "use"))
    given = text.split("delayed_exponents")[0].rsplit("%arg", 1)[1].split(":")[0]
    size = int(re.search(rf"%arg{given}: tensor<(\d+)xi32>", text).group(1))
    assert size > Policy.for_target("h100").scale_pack_width
    lanes = set(re.findall(rf"(%\w+) = stablehlo.slice %arg{given} \[\d+:\d+\]", text))
    reads = {m.group(1) for m in re.finditer(r"(%\w+) = stablehlo.reshape (%\w+) ", text)
             if m.group(2) in lanes}
    scalar_clamps = [line for line in text.splitlines() if "stablehlo.clamp" in line
                     and any(f" {read}," in line for read in reads)]
    assert not scalar_clamps, scalar_clamps[:2]
    assert re.search(rf"stablehlo.clamp %\w+, %arg{given}, %\w+ : tensor<{size}xi32>", text)


@functools.cache
def _rewritten_text(pipeline: str) -> str:
    result = rewrite_module_source(_gpt_text(), pipeline)
    assert result.error is None
    return result.output.decode()


@functools.cache
def _gpt_text() -> str:
    step_fn, example = models.gpt_step(n_layers=1, d_model=32, n_heads=2, context=8,
                                       vocab=32, batch=2)
    return models.export_text(step_fn, example)
