"""Library modules stay small enough to read in one sitting (issue 21: under 450 lines)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("scalify_hlo", "rewrites", "cli")
MAX_LINES = 450
MODULES = sorted(path for folder in LIBRARY for path in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_under_the_line_limit(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"
