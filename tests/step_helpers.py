"""Running an original module and its scaled rewrite on the same inputs."""

from __future__ import annotations

import numpy as np

from scalify_hlo.api import rewrite_text
from scalify_hlo.inputs import random_inputs
from scalify_hlo.runner import run_module
from scalify_hlo.signature import EntrySignature, entry_signature, join_outputs, split_inputs


def random_pow2_scales(signature: EntrySignature, rng: np.random.Generator, lo: int,
                       hi: int) -> list[float]:
    return [float(2.0 ** rng.integers(lo, hi + 1)) for _ in signature.inputs]


def run_both(text: str, pipeline: str, seed: int = 0, lo: int = -6, hi: int = 6):
    """Reference outputs of ``text`` and the unscaled outputs of its rewrite."""
    signature = entry_signature(text)
    rng = np.random.default_rng(seed)
    inputs = random_inputs(signature, rng)
    reference = run_module(text, inputs)
    rewritten = rewrite_text(text, pipeline)
    scales = random_pow2_scales(signature, rng, lo, hi)
    raw = run_module(rewritten, split_inputs(signature, inputs, scales))
    return reference, join_outputs(signature, raw), rewritten


def assert_close_per_tensor(reference, got, rtol: float) -> None:
    """Elementwise rtol, with an absolute floor of rtol times the tensor's largest magnitude:
    XLA fuses the two programs differently, so a sum that cancels to ~0 in one may round to
    a few ulps of its inputs in the other."""
    for index, (ref, out) in enumerate(zip(reference, got, strict=True)):
        ref = np.asarray(ref, np.float64)
        out = np.asarray(out, np.float64)
        assert ref.shape == out.shape, f"output {index}: shape {out.shape} != {ref.shape}"
        finite = np.isfinite(ref)
        assert np.array_equal(np.isnan(ref), np.isnan(out)), f"output {index}: NaN positions"
        assert np.array_equal(ref[~finite & ~np.isnan(ref)], out[~finite & ~np.isnan(ref)]), \
            f"output {index}: inf positions"
        floor = rtol * (np.max(np.abs(ref[finite])) if finite.any() else 0.0)
        np.testing.assert_allclose(out[finite], ref[finite], rtol=rtol, atol=floor,
                                   err_msg=f"output {index}")
