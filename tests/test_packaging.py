"""Python run from the repository root imports ``scalify_hlo`` from the source folder, which
shadows an installed package: the sub-packages that pyproject.toml maps from the top-level
folders (``rewrites/``, ``cli/``, ``examples/``) must still be found there.

Checked by hand after a plain ``pip install .`` into a fresh venv (too slow for the suite);
here without site-packages' path hooks (``-S``: no ``.pth`` file runs, so an editable install's
finder is not there to help) and the dependencies on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_IMPORT = ("import scalify_hlo.rewrites, scalify_hlo.cli.main, scalify_hlo.examples\n"
           "for m in (scalify_hlo.rewrites, scalify_hlo.cli.main, scalify_hlo.examples):\n"
           "    print(m.__file__)")


def test_mapped_sub_packages_import_from_the_repository_root() -> None:
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)))
    done = subprocess.run([sys.executable, "-S", "-c", _IMPORT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(ROOT / "rewrites" / "__init__.py"),
                                   str(ROOT / "cli" / "main.py"),
                                   str(ROOT / "examples" / "__init__.py")]
