"""``materialize-scales``: the same numbers, and fewer optimized HLO instructions on XLA:CPU.

The golden file shows the IR; these tests run it. The pass only moves scalar ops and routes
their values through an i32 vector (f32 as bits), so every output is bit-identical.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from scalify_hlo.api import rewrite_text
from scalify_hlo.inputs import random_inputs
from scalify_hlo.runner import compiled_hlo_text, run_module
from scalify_hlo.signature import ELEMENT_DTYPES, entry_signature, split_inputs
from tests.helpers import GOLDEN, MLP_STEP
from tests.step_helpers import random_pow2_scales

GOLDEN_FILE = GOLDEN / "materialize-scales" / "materialize-scales.mlir"
CASES = [re.sub(r"func\.func public @\w+", "func.func public @main", case)
         for case in GOLDEN_FILE.read_text().split("// -----")]
NOTHING_TO_PACK = 1  # the @lone case
STEP = MLP_STEP.read_text()
DEFAULT = "inline,rescale{at=gradients},scalify{data-dtype=f16},fp8-dots,simplify"


def _same_outputs(before: str, after: str, inputs: list[np.ndarray]) -> None:
    for want, got in zip(run_module(before, inputs), run_module(after, inputs), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_golden_cases_keep_their_numbers(index: int) -> None:
    original = CASES[index]
    packed = rewrite_text(original, "materialize-scales")
    assert ("optimization_barrier" in packed) == (index != NOTHING_TO_PACK)
    rng = np.random.default_rng(index)
    inputs = random_inputs(entry_signature(original), rng)
    _same_outputs(original, packed, inputs)


@pytest.mark.parametrize("pipeline", ["inline,scalify{data-dtype=f32},simplify", DEFAULT])
def test_a_rewritten_step_keeps_its_numbers(pipeline: str) -> None:
    """f32 exactness mode and the default policy: bit-identical with and without the pass
    (the default's FP8 operand shifts are f16 factors, packed by their bits as i16)."""
    rewritten = rewrite_text(STEP, pipeline)
    packed = rewrite_text(rewritten, "materialize-scales")
    assert "optimization_barrier" in packed
    assert ("tensor<i16>" in packed) == (pipeline == DEFAULT)
    signature = entry_signature(STEP)
    rng = np.random.default_rng(0)
    inputs = split_inputs(signature, random_inputs(signature, rng),
                          random_pow2_scales(signature, rng, -6, 6))
    specs = entry_signature(rewritten).inputs  # data in the data dtype
    inputs = [np.asarray(x).astype(ELEMENT_DTYPES[spec.element])
              for x, spec in zip(inputs, specs, strict=True)]
    _same_outputs(rewritten, packed, inputs)


def _instructions(text: str) -> int:
    return len(re.findall(r"^\s*(?:ROOT )?%\S+ = ", compiled_hlo_text(text), re.MULTILINE))


def test_xla_cpu_stops_copying_scale_chains() -> None:
    """The default policy's MLP step: XLA:CPU copied each exponent chain into every
    fusion that uses it; read from the vectors, the optimized module is smaller (by 6%
    since every FP8 operand, E5M2 ones too, takes an amax shift whose short chain stays
    scalar; 10% before)."""
    rewritten = rewrite_text(STEP, DEFAULT)
    before = _instructions(rewritten)
    after = _instructions(rewrite_text(rewritten, "materialize-scales"))
    assert after < 0.95 * before, (after, before)


def test_a_delayed_step_packs_its_exponents_and_keeps_its_numbers() -> None:
    """A delayed step (the program a GPU target runs from its second call) reads its
    exponents as elements of an argument vector: they join the argument epoch's pack,
    and every output, the handed-on exponents included, is the same bit for bit."""
    from scalify_hlo import Policy
    from scalify_hlo.rewrites.delayed_statistics import with_delayed_mode

    # Packing alone (vectorize-scalar-chains, on for GPUs, has tests of its own).
    passes = with_delayed_mode(Policy.for_target("h100", vectorize_scalar_chains=False)
                               .passes(), "use")
    pipeline = ",".join(str(p) for p in passes)
    assert pipeline.endswith("simplify{pack-width=64}")
    packed = rewrite_text(STEP, pipeline)
    unpacked = rewrite_text(STEP, pipeline.replace("simplify{pack-width=64}",
                                                   "simplify{pack-scales=none}"))
    signature = entry_signature(unpacked)
    barrier = re.search(r"optimization_barrier (%\S+) : tensor<(\d+)xi32>", packed)
    assert barrier and int(barrier.group(2)) > signature.inputs[-1].shape[0] // 2, barrier
    rng = np.random.default_rng(0)
    inputs = split_inputs(entry_signature(STEP), random_inputs(entry_signature(STEP), rng),
                          random_pow2_scales(entry_signature(STEP), rng, -6, 6))
    specs = signature.inputs
    inputs = [np.asarray(x).astype(ELEMENT_DTYPES[spec.element])
              for x, spec in zip(inputs, specs[:-1], strict=True)]
    exponents = rng.integers(-20, 20, specs[-1].shape).astype(np.int32)
    _same_outputs(unpacked, packed, [*inputs, exponents])
