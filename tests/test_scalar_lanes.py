"""``vectorize-scalar-chains``: the same numbers from one vector op per chain step.

The golden file shows the IR of small cases; these tests run whole rewritten training steps
with and without the pass (simplify's ``vectorize`` option): an elementwise op computes each
element alone, so every output must be bit-identical, and the chains must really be gone.
"""

from __future__ import annotations

import dataclasses

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


def _pipeline(policy: Policy, vectorize: bool, delayed: str | None) -> str:
    passes = policy.passes()
    if delayed is not None:
        passes = with_delayed_mode(passes, delayed)
    passes = [dataclasses.replace(p, vectorize=vectorize) if isinstance(p, Simplify) else p
              for p in passes]
    return ",".join(str(p) for p in passes)


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


@pytest.mark.parametrize(("target", "delayed"), [
    ("h100", "use"),  # what a GPU training loop runs from its second call
    ("h100", "measure"),  # its first call
    (None, None),  # the default policy: current statistics, packs of 8
])
def test_vectorized_step_is_bit_identical(target: str | None, delayed: str | None) -> None:
    step_fn, example = models.gpt_step(n_layers=1, d_model=32, n_heads=2, context=8,
                                       vocab=32, batch=2)
    original = models.export_text(step_fn, example)
    policy = Policy.for_target(target) if target else Policy()
    plain = rewrite_module_source(original, _pipeline(policy, False, delayed))
    vectorized = rewrite_module_source(original, _pipeline(policy, True, delayed))
    assert plain.error is None and vectorized.error is None
    assert vectorized.context.stats["simplify.scalar-ops-vectorized"] > 0
    plain_text, vectorized_text = plain.output.decode(), vectorized.output.decode()
    assert len(vectorized_text) < len(plain_text)
    inputs = _inputs(original, plain_text, seed=1)
    for want, got in zip(run_module(plain_text, inputs), run_module(vectorized_text, inputs),
                         strict=True):
        np.testing.assert_array_equal(got, want)
