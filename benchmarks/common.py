"""Helpers shared by the benchmark scripts: loading the sample models, timing, reporting.

Benchmarks are scripts, not a package: each one puts this folder on ``sys.path`` (Python
does that for ``python benchmarks/NAME.py``) and imports ``common``. Nothing in the library
imports from here.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def load_models() -> ModuleType:
    """``testdata/models.py`` by path (testdata/ is not a package, and must not become one
    just for the benchmarks)."""
    spec = importlib.util.spec_from_file_location("models", ROOT / "testdata" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated calls, after warm-up (compilation and first-touch
    allocation excluded). The median is the figure to quote: it ignores the occasional
    scheduler hiccup that a mean would fold in."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    warmup: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> Timing:
    """Time ``fn()``; ``fn`` must block until its work is done (``block_until_ready``)."""
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing(statistics.median(samples), min(samples), max(samples), repeats, warmup)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the seconds it took, for one-off steps (export, rewrite, compile)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def environment() -> dict[str, Any]:
    """What a reader needs to reproduce a number: versions, backend and device."""
    import jax
    import jaxlib

    device = jax.devices()[0]
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "platform": device.platform,
        "device_kind": getattr(device, "device_kind", ""),
        "compute_capability": getattr(device, "compute_capability", None),
        "host": platform.machine(),
    }


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with columns padded to their widest cell."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
