"""benchmarks/tpu.py's bundle count: libtpu's log says how many VLIW bundles each program
it compiled has; the benchmark reads the last one after each compile."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import import_benchmark

_LINE = "I1202 11:01:52.4 5765 deepsea.cc:1] final program bundle count: {} note this count\n"


def test_the_last_count_of_the_log_is_the_last_programs(tmp_path: Path) -> None:
    tpu = import_benchmark("tpu")
    log = tmp_path / "tpu_driver.vm.root.log.INFO.20261202-110138.5730"
    log.write_text("start\n" + _LINE.format("103,852") + "other\n" + _LINE.format("142,293"))
    (tmp_path / "tpu_driver.INFO").symlink_to(log.name)  # libtpu's link: read once
    assert tpu.last_bundle_count(tmp_path) == 142293


def test_no_log_or_no_count_gives_none(tmp_path: Path) -> None:
    tpu = import_benchmark("tpu")
    assert tpu.last_bundle_count(None) is None
    assert tpu.last_bundle_count(tmp_path) is None
    (tmp_path / "tpu_driver.vm.root.log.INFO.1").write_text("no count here\n")
    assert tpu.last_bundle_count(tmp_path) is None
