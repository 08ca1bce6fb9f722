"""Generated documentation stays in step with the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ops_md_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "generate_ops.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
