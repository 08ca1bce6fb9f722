"""``dot-transposes`` (part of ``simplify``): the same numbers, and no transpose of a dot's
result left behind the scale arithmetic, where XLA cannot fold it into the GEMM.

The golden file shows the IR; these tests run it, and check the rule on a rewritten GPT step
(and, with the ``gpu-aot`` extra, what XLA makes of it on an H100 target)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scalify_hlo import gpu_aot, module_io
from scalify_hlo.api import rewrite_text
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites.emitter import defining_op, ops_named
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.runner import run_module
from scalify_hlo.signature import ELEMENT_DTYPES, entry_signature
from testdata import models
from tests.helpers import GOLDEN

GOLDEN_FILE = GOLDEN / "dot-transposes" / "dot-transposes.mlir"
# Each case of the golden input, its function renamed @main for XLA.
CASES = [re.sub(r"func\.func @\w+", "func.func public @main", case)
         for case in GOLDEN_FILE.read_text().split("// -----")]
MOVED = (0, 1)  # the cases whose transposes move; the others are left alone
_ELEMENTWISE = ops_with(Trait.ELEMENTWISE)


def _inputs(text: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=spec.shape) * 4).astype(np.dtype(ELEMENT_DTYPES[spec.element]))
            for spec in entry_signature(text).inputs]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_moving_keeps_the_numbers(index: int) -> None:
    original = CASES[index]
    moved = rewrite_text(original, "dot-transposes")
    assert (moved != rewrite_text(original, "")) == (index in MOVED)
    for seed in range(2):
        inputs = _inputs(original, seed)
        for want, got in zip(run_module(original, inputs), run_module(moved, inputs),
                             strict=True):
            np.testing.assert_array_equal(got, want)


def transposes_behind_dots(text: str) -> tuple[int, int]:
    """Transposes of a dot's result: (directly on the dot, behind elementwise ops)."""
    direct = behind = 0
    with module_io.ir_context():
        module = module_io.parse_module(text, "-", 0)
        for transpose in ops_named(module.operation, "stablehlo.transpose"):
            op, steps = defining_op(transpose.operands[0]), 0
            while op is not None and op.name in _ELEMENTWISE and steps < 64:
                tensors = [v for v in op.operands if v.type.rank > 0]
                op, steps = (defining_op(tensors[0]) if tensors else None), steps + 1
            if op is not None and op.name == "stablehlo.dot_general":
                direct, behind = (direct + 1, behind) if steps == 0 else (direct, behind + 1)
    return direct, behind


@pytest.fixture(scope="module")
def gpt_text() -> str:
    step, args = models.gpt_step(n_layers=1, d_model=64, n_heads=4, context=32, vocab=64)
    return models.export_text(step, args)


def test_the_gpt_steps_transposes_stay_on_their_dots(gpt_text: str) -> None:
    """JAX's weight gradients and attention outputs are transposes of dots; under the default
    policy every one of them still follows its dot directly (it fell behind the unit-scaling
    multiply, the f16 round trip and the saturating clamp before)."""
    direct, behind = transposes_behind_dots(gpt_text)
    assert direct >= 6 and behind == 0
    without = rewrite_text(gpt_text, DEFAULT_PIPELINE.replace(",simplify", ""))
    assert transposes_behind_dots(without)[1] >= 6  # what the rule has to do
    assert transposes_behind_dots(rewrite_text(gpt_text, DEFAULT_PIPELINE)) == (direct, 0)


needs_extra = pytest.mark.skipif(not gpu_aot.available(),
                                 reason="the gpu-aot extra is not installed")


def _wide_transposes(hlo_text: str) -> int:
    """Transposing kernels of the entry computation that write f16 or f32 (FP8 operands'
    transposes are the FP8 floor's too: cuBLASLt wants the contracting dimension minor)."""
    entry = hlo_text[hlo_text.index("\nENTRY"):]
    return len(re.findall(r"= \(?f(?:16|32)\[[\d,]*\][^=]*fusion\([^\n]*calls=%\w*transpose",
                          entry))


@needs_extra
def test_h100_updates_run_in_the_weights_layout(gpt_text: str) -> None:
    """On an H100 target, the rewritten step transposes few more f16/f32 tensors than the
    FP8 floor (the same dots in FP8, no scales): before, Adam's update of every weight ran in
    the layout of its gradient's GEMM or of its FP8 cast, a transpose kernel per weight,
    moment and result (here 23 against the floor's 1). What is left: each of the 4 weights
    cast once for both of its dots (forward, input gradient) is transposed in f16 before its
    cast kernel writes both layouts, and 2 more since the E5M2 gradient operands take their
    amax shift too (``measures_amax``: E5M2 flushes f16's subnormals)."""
    floor = gpu_aot.compile_h100(rewrite_text(gpt_text, "inline,fp8-dots{scaling=none}"))
    rewritten = gpu_aot.compile_h100(rewrite_text(gpt_text, DEFAULT_PIPELINE))
    assert rewritten.cublas_f8 == floor.cublas_f8 > 0
    assert _wide_transposes(rewritten.hlo_text) <= _wide_transposes(floor.hlo_text) + 6
