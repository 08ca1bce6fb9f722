"""join-gradients on a whole step: a data-parallel GPT step (AdamW, batch over 8 devices),
default policy, compiled for 8 H100s without a GPU (the ``gpu-aot`` extra; skipped without
it), sums its gradients in as few all-reduces as the original, not one after another (the
pass's own cases are in testdata/golden/join-gradients; the marks and the bit-for-bit check
on simulated CPU devices are in tests/test_sharded.py)."""

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
import jax
sys.path.insert(0, sys.argv[1])
import sharded_setups as setups
from scalify_hlo import Policy, compile_scaled, gpu_aot
from scalify_hlo.targets.collectives import serial_collectives


def counts(text):
    hlo = gpu_aot.compile_h100(text).hlo_text
    starts = sum(" all-reduce-start(" in line or " all-reduce(" in line
                 for line in hlo.splitlines())
    return {"all_reduces": starts, "serial": serial_collectives(hlo)}


step, args = setups.setup("data_parallel", "gpt")
scaled = compile_scaled(step, *args, policy=Policy())
state = scaled.scale_args(*args)
out = scaled(*state)
state = (*out[:-1], *state[-2:])  # the program a training loop runs from its second call
print(json.dumps({"original": counts(jax.jit(step).lower(*args).as_text()),
                  "rewritten": counts(scaled.lower(*state).as_text()),
                  "joined": scaled.report().stats.get("simplify.gradients-joined", 0)}))
"""


@pytest.mark.skipif(not gpu_aot.available(), reason="needs the gpu-aot extra")
def test_data_parallel_gradient_sums_are_not_chained_on_h100() -> None:
    """At most the original's all-reduces plus two (the delayed statistics' maxima and the
    loss's sum), and no more of them one after another than the original (before the pass:
    6 all-reduces, 4 in a row, against the original's 2)."""
    env = {**os.environ, "XLA_FLAGS": simulated_devices_flags(8), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(TESTDATA)], env=env,
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    original, rewritten = found["original"], found["rewritten"]
    assert found["joined"] > 0, found
    assert rewritten["all_reduces"] <= original["all_reduces"] + 2, found
    assert rewritten["serial"] <= original["serial"], found
