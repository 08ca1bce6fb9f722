"""``hoist-loop-scales``: the same numbers, and fewer kernels for a rewritten ``lax.scan``.

The golden file shows the IR; these tests run it. Every case of the golden input computes
bit-identical results before and after the pass, and the scan step rewritten by
``compile_scaled`` compiles to at most 1.2x the fusions of ``jax.jit`` (XLA's loop-invariant
code motion made each invariant scale a kernel of its own: 1.32x before the pass).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import run_module
from scalify_hlo.signature import ELEMENT_DTYPES, entry_signature
from testdata import models
from tests.helpers import GOLDEN, fusion_count

GOLDEN_FILE = GOLDEN / "hoist-loop-scales" / "hoist-loop-scales.mlir"
# Each case of the golden input, its function renamed @main for XLA.
CASES = [re.sub(r"func\.func public @\w+", "func.func public @main", case)
         for case in GOLDEN_FILE.read_text().split("// -----")]
NOTHING_TO_HOIST = 1  # the @variant case


def _inputs(text: str, seed: int) -> list[np.ndarray]:
    """Random inputs; integer scalars (exponents) small enough for 2^e to stay finite."""
    rng = np.random.default_rng(seed)
    inputs = []
    for spec in entry_signature(text).inputs:
        dtype = np.dtype(ELEMENT_DTYPES[spec.element])
        if np.issubdtype(dtype, np.integer):
            inputs.append(rng.integers(-20, 20, spec.shape).astype(dtype))
        else:
            inputs.append(rng.normal(size=spec.shape).astype(dtype))
    return inputs


@pytest.mark.parametrize("index", range(len(CASES)))
def test_hoisting_keeps_the_numbers(index: int) -> None:
    original = CASES[index]
    hoisted = rewrite_text(original, "hoist-loop-scales")
    assert ("optimization_barrier" in hoisted) == (index != NOTHING_TO_HOIST)
    for seed in range(3):
        inputs = _inputs(original, seed)
        for want, got in zip(run_module(original, inputs), run_module(hoisted, inputs),
                             strict=True):
            np.testing.assert_array_equal(got, want)


def test_simplify_hoists_and_keeps_a_module_without_loops_as_is() -> None:
    loops = rewrite_text(CASES[0], "simplify")
    assert "optimization_barrier" in loops
    plain = "func.func @f(%a: tensor<f32>) -> tensor<f32> {\n" \
            "  %0 = stablehlo.multiply %a, %a : tensor<f32>\n  return %0 : tensor<f32>\n}\n"
    assert "optimization_barrier" not in rewrite_text(plain, "simplify")


def test_small_integers_leave_a_loop_intact() -> None:
    """jnp.searchsorted's binary search divides by a ui32 2 that the pass hoists out of its
    loop: carried as f32 bits (a subnormal), XLA flushed it to zero and every index came out
    wrong; in a ui32 vector of its own it stays 2."""
    def search(a: jax.Array) -> jax.Array:
        return jnp.searchsorted(jnp.sort(a[0]), a[1], method="scan")

    x = jax.random.normal(jax.random.key(0), (2, 8))
    step = compile_scaled(search, x, policy=Policy(data_dtype="float32", fp8_dots=False))
    np.testing.assert_array_equal(np.asarray(step(x)), np.asarray(jax.jit(search)(x)))


def test_a_rewritten_scan_compiles_to_few_more_kernels() -> None:
    fn, args = models.scan_step()
    step = compile_scaled(fn, *args, policy=Policy(data_dtype="float32", fp8_dots=False))
    state = step.scale_args(*args)
    scaled = fusion_count(step.lower(*state).compile().as_text())
    original = fusion_count(jax.jit(fn).lower(*args).compile().as_text())
    assert scaled <= 1.2 * original, (scaled, original)
