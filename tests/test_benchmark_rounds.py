"""The benchmarks' compile rounds: a compile-time verdict pairs each module's compile with
the original's of the same round, so that the load of a shared machine moves both alike
(one compile each read GPT-2-small's folded H100 step at 1.31x the original where four
interleaved rounds gave 1.17x to 1.34x)."""

from __future__ import annotations

from tests.helpers import REPO_ROOT, import_benchmark

PIPELINES = {"f32": "inline,scalify{data-dtype=f32},simplify"}


def test_a_compile_ratio_is_the_median_of_the_rounds_ratios() -> None:
    common = import_benchmark("common")
    mine = {"compile_s": 3.0, "compile_rounds_s": [2.0, 3.0, 9.0]}
    base = {"compile_s": 2.0, "compile_rounds_s": [2.0, 2.0, 2.0]}
    assert common.compile_ratio(mine, base) == 1.5
    # One compile each, or rounds that do not pair: the ratio of the seconds.
    assert common.compile_ratio({"compile_s": 3.0}, base) == 1.5
    assert common.compile_ratio(mine, {"compile_s": 2.0, "compile_rounds_s": [1.0]}) == 1.5


def test_rounds_compile_every_module_once_each_and_keep_the_median() -> None:
    common = import_benchmark("common")
    text = (REPO_ROOT / "testdata" / "steps" / "mlp_step.mlir").read_text()
    rows = list(common.compiled_modules(text, PIPELINES, h100=False, rounds=3))
    assert [row["module"] for row in rows] == ["original", "f32"]
    for row in rows:
        assert row["h100"] is None
        seconds = row["cpu"]["compile_rounds_s"]
        assert len(seconds) == 3
        assert row["cpu"]["compile_s"] == sorted(seconds)[1]
        assert row["cpu"]["instructions"] > 0
