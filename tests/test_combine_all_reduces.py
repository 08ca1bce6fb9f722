"""combine-all-reduces on a whole step: a GPT ``shard_map`` step with ``psum`` of gradients,
compiled for 8 H100s without a GPU (the ``gpu-aot`` extra; skipped without it), issues its
gradient sums as the original does, not one after another (the pass's own cases are in
testdata/golden/combine-all-reduces; the numbers are in tests/test_sharded.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scalify_hlo import gpu_aot
from tests.helpers import REPO_ROOT, TESTDATA, simulated_devices_flags

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import sharded_setups as setups
from scalify_hlo import Policy, compile_scaled, gpu_aot
from scalify_hlo.targets.collectives import serial_collectives

step, args = setups.setup("shard_map", "gpt")
scaled = compile_scaled(step, *args, policy=Policy(data_dtype="float32", fp8_dots=False))
hlo = gpu_aot.compile_h100(scaled.lower(*scaled.scale_args(*args)).as_text()).hlo_text
starts = sum(" all-reduce-start(" in line or " all-reduce(" in line for line in hlo.splitlines())
print(json.dumps({"all_reduces": starts, "serial": serial_collectives(hlo)}))
"""


@pytest.mark.skipif(not gpu_aot.available(), reason="needs the gpu-aot extra")
def test_shard_map_gradient_sums_are_not_chained_on_h100() -> None:
    """f32 mode on 8 H100s: one all-reduce, as the original (before the pass XLA:GPU's
    fusion chained six, one after another)."""
    env = {**os.environ, "XLA_FLAGS": simulated_devices_flags(8), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(TESTDATA)], env=env,
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["all_reduces"] == 1 and found["serial"] == 1, found
