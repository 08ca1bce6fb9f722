"""Session settings for the suite: XLA:CPU generates code with LLVM at -O0.

The suite compiles hundreds of rewritten steps on XLA:CPU and runs each a few times on tiny
inputs, so LLVM's optimization of the generated kernels is most of its time and buys nothing
back. The flag changes no HLO pass (the optimized HLO the count tests read is the same) and no
arithmetic (XLA:CPU compiles without fast-math at every level). Set here, before any test
starts jax's CPU backend, and by ``helpers.simulated_devices_flags`` for the subprocesses
that set their own flags.
"""

from __future__ import annotations

import os

from tests.helpers import TEST_XLA_FLAGS

if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
