"""What a rewrite did, as ``ScaledStep.report()`` hands it out: op counts, FP8 dots,
fallbacks, rescale points and the per-op records.
"""

from __future__ import annotations

import dataclasses

from scalify_hlo.errors import ScalifyError
from scalify_hlo.explain import FORMATS as EXPLAIN_FORMATS
from scalify_hlo.explain import Explanation
from scalify_hlo.module_io import OPS_COUNTED
from scalify_hlo.rewrites import Record


@dataclasses.dataclass
class Report:
    """What the rewrite did: op counts, FP8 dots, fallbacks and rescale points; and per op,
    how it is scaled (``records``, the tables of ``table()``, as ``scalify-hlo explain``)."""

    ops_before: dict[str, int]
    ops_after: dict[str, int]
    stats: dict[str, int]
    warnings: list[str]
    records: list[Record] = dataclasses.field(default_factory=list)
    pipeline: str = ""

    def explanation(self) -> Explanation:
        """The records as tables: ``families()`` and ``lines()`` as data."""
        return Explanation(self.records, self.pipeline, self.warnings)

    def table(self, fmt: str = "text") -> str:
        """Per op family, counts by kind; per source line, the ops and how they are scaled
        (``fmt``: ``text`` or ``json``, as ``scalify-hlo explain --format``)."""
        if fmt not in EXPLAIN_FORMATS:
            raise ScalifyError(f"unknown table format '{fmt}' (use one of "
                               f"{', '.join(EXPLAIN_FORMATS)})")
        return self.explanation().render(fmt)

    @property
    def fp8_dots(self) -> tuple[int, int]:
        return self.stats.get("fp8-dots.fp8", 0), self.stats.get("fp8-dots.dots", 0)

    @property
    def fallbacks(self) -> list[str]:
        return [w for w in self.warnings if "running it unscaled" in w]

    def __str__(self) -> str:
        before, after = sum(self.ops_before.values()), sum(self.ops_after.values())
        fp8, dots = self.fp8_dots
        lines = [
            f"{OPS_COUNTED}: {before} -> {after} ({after / max(before, 1):.2f}x)",
            f"fp8 dots: {fp8} / {dots}" + (f" ({head} in the output head stay in the data dtype)"
                                           if (head := self.stats.get("fp8-dots.output-head"))
                                           else ""),
            f"fallbacks (ops run unscaled): {len(self.fallbacks)}",
            f"rescale points: {self.stats.get('rescale.points', 0)}",
        ]
        lines += [f"  {w}" for w in self.warnings]
        return "\n".join(lines)
