"""Session settings for the suite: XLA:CPU generates code with LLVM at -O0.

The suite compiles hundreds of rewritten steps on XLA:CPU and runs each a few times on tiny
inputs, so LLVM's optimization of the generated kernels is most of its time and buys nothing
back (the 2-layer GPT's default step compiles in 13.6 s instead of 22.2 s). The flag changes
no HLO pass: the optimized HLO the count tests read is byte-identical (that step in f32 mode
and in the default policy), and every exactness test passes at both levels. Set here, before
any test starts jax's CPU backend, and by ``helpers.simulated_devices_flags`` for the
subprocesses that set their own flags.
"""

from __future__ import annotations

import os

from tests.helpers import TEST_XLA_FLAGS

if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
