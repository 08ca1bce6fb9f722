"""``benchmarks/sharded.py`` refuses a batch the 8 devices cannot split with argparse's
one-line error, before it builds any step (the measurement itself is the benchmark)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "sharded.py"


@pytest.mark.parametrize("batch", ["12", "0"])
def test_batch_not_split_by_the_devices_is_refused(batch: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--batch", batch, "--no-doc"],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert "--batch must be a positive multiple of 8" in done.stderr
    assert "Traceback" not in done.stderr
