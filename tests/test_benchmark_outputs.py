"""A benchmark's ``--quick`` smoke run writes its JSON (and figure) to the temporary
directory, never over the published results under docs/; a full run writes there, and
``--out`` names any path."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, import_benchmark

RESULTS = REPO_ROOT / "docs" / "results"
BENCHMARKS = {"memory": "memory.json", "overhead": "overhead.json",
              "program_growth": "program_growth.json",
              "runtime_overhead": "runtime_overhead.json", "user_scales": "user_scales.json",
              "rewrite_cost": "rewrite_cost.json", "tpu": "tpu.json"}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_quick_runs_leave_the_published_results_alone(name: str, tmp_path: Path) -> None:
    benchmark = import_benchmark(name)
    quick = benchmark.parse_args(["--quick"])
    assert quick.out.parent == Path(tempfile.gettempdir()), quick.out
    assert quick.out.name.endswith(BENCHMARKS[name])
    assert benchmark.parse_args([]).out == RESULTS / BENCHMARKS[name]
    named = tmp_path / "mine.json"
    assert benchmark.parse_args(["--quick", "--out", str(named)]).out == named


def test_quick_rewrite_cost_plots_to_the_temporary_directory() -> None:
    rewrite_cost = import_benchmark("rewrite_cost")
    assert rewrite_cost.parse_args(["--quick"]).figure.parent == Path(tempfile.gettempdir())
    assert rewrite_cost.parse_args([]).figure == rewrite_cost.FIGURE
