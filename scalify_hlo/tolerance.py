"""When an output of ``compare`` counts as close enough to the reference.

``--rtol`` (max error relative to the tensor's largest magnitude) suits exact rewrites (f32
data: 1e-5). It does not suit FP8: an FP8 step's error is noise spread over every element,
and a few elements move a lot (Adam's first update is ``lr * sign(g)``: where the gradient is
near zero, FP8 noise flips the sign, an error of 2 lr). So ``--fp8`` judges each tensor output
by its signal-to-noise ratio, ``10 log10(sum a^2 / sum (a - b)^2)``, and each scalar output
(the loss) by its relative error. The defaults come from the sample steps
(``benchmarks/fp8_snr.py``, docs/benchmarks.md "FP8 accuracy"), with margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalify_hlo.inputs import OutputDiff

DEFAULT_RTOL = 1e-5
# --fp8 (benchmarks/fp8_snr.py, three seeds of the sample steps): the worst tensor output
# read 11.1 dB on real inputs (the MLP's first bias under SGD), 14.6 dB from a trained
# state, 14.7 dB on random inputs; the loss was within 2.1% (real and trained inputs). Not
# covered: Adam's first step from a zero state (biases at 1-9 dB: sign noise) and the loss
# on random inputs (up to 12%: random labels make it a difference of large terms).
FP8_MIN_SNR_DB = 8.0
FP8_SCALAR_RTOL = 0.05


@dataclass(frozen=True)
class Tolerance:
    """The checks an output must pass; None turns a check off. NaN/Inf appearing or
    disappearing always fails."""

    rtol: float | None = DEFAULT_RTOL
    min_snr_db: float | None = None
    scalar_rtol: float | None = None

    def failure(self, diff: OutputDiff) -> str | None:
        """Why ``diff`` is out of tolerance, or None."""
        if diff.nonfinite_mismatch:
            return f"NaN/Inf differ at {diff.nonfinite_mismatch} positions"
        scalar = math.prod(diff.shape) == 1
        if scalar and self.scalar_rtol is not None:
            if not diff.max_rel <= self.scalar_rtol:  # NaN fails too
                return (f"rel error {diff.max_rel:.3g} > {self.scalar_rtol:g} (a scalar "
                        f"output: --scalar-rtol)")
        elif self.min_snr_db is not None and not diff.snr_db >= self.min_snr_db:
            return f"SNR {diff.snr_db:.1f} dB < {self.min_snr_db:g} dB (--min-snr)"
        if self.rtol is not None and not diff.max_rel <= self.rtol:
            return f"max rel error {diff.max_rel:.3g} > rtol {self.rtol:g}"
        return None

    def describe(self) -> str:
        parts = []
        if self.min_snr_db is not None:
            parts.append(f"SNR >= {self.min_snr_db:g} dB")
        if self.scalar_rtol is not None:
            parts.append(f"scalar rel error <= {self.scalar_rtol:g}")
        if self.rtol is not None:
            parts.append(f"max rel error <= {self.rtol:g}")
        return ", ".join(parts)


def choose(rtol: float | None, fp8: bool, min_snr_db: float | None,
           scalar_rtol: float | None) -> Tolerance:
    """The checks the command-line options ask for: ``--rtol`` alone (default 1e-5) unless
    ``--fp8``/``--min-snr``/``--scalar-rtol`` are given; then those, and ``--rtol`` too only
    when it is given."""
    if not fp8 and min_snr_db is None and scalar_rtol is None:
        return Tolerance(DEFAULT_RTOL if rtol is None else rtol)
    return Tolerance(
        rtol,
        min_snr_db if min_snr_db is not None else (FP8_MIN_SNR_DB if fp8 else None),
        scalar_rtol if scalar_rtol is not None else (FP8_SCALAR_RTOL if fp8 else None))
