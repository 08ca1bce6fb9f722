"""``TargetCompileResult``: what an ahead-of-time compile for a target chip says about a step.

Shared by the target compile modules (TPU here; a GPU one may fill the same fields), so a
benchmark can put the figures of both side by side. Every figure is the compiler's own
estimate or count: nothing here ran on the chip.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TargetCompileResult:
    """One compile of one module for one target topology.

    estimated_cycles: the sum of XLA's per-kernel cost model (``estimated_cycles`` in each
        kernel's backend config), loop bodies multiplied by their trip count where the HLO
        knows it (``known_trip_count``); ``unweighted_loops`` counts the loops it does not
        know (their bodies counted once).
    fusions: fusion instructions in the optimized HLO (every computation, loop bodies once).
    collectives: collective ops by opcode (``-start``/``-done`` pairs counted once, scalar
        ones also under ``<opcode> (scalar)``), in every computation.
    argument_bytes / output_bytes / temp_bytes / alias_bytes: ``memory_analysis()``.
    compile_s: wall-clock seconds of the compile (this machine's CPU, not the chip).
    """

    target: str
    device_kind: str
    estimated_cycles: int
    unweighted_loops: int
    fusions: int
    collectives: dict[str, int] = field(default_factory=dict)
    argument_bytes: int = 0
    output_bytes: int = 0
    temp_bytes: int = 0
    alias_bytes: int = 0
    compile_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
