"""``docs/quickstart.md`` runs: its Python blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

QUICKSTART = REPO_ROOT / "docs" / "quickstart.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    return PYTHON_BLOCK.findall(text)


def test_quickstart_has_the_steps() -> None:
    blocks = python_blocks(QUICKSTART.read_text())
    assert len(blocks) >= 5
    code = "\n".join(blocks)
    for name in ("scalify_hlo.export", "compile_scaled", "scale_args", ".report()",
                 'stage("fp8-dots")', ".table()", ".save(", "load_scaled"):
        assert name in code, name
    assert "scalify-hlo rewrite" in QUICKSTART.read_text()
    assert "scalify-hlo explain" in QUICKSTART.read_text()


def test_quickstart_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the quickstart writes train_step.mlir
    namespace: dict[str, object] = {"__name__": "quickstart"}
    for index, block in enumerate(python_blocks(QUICKSTART.read_text())):
        try:
            exec(compile(block, f"{QUICKSTART.name}[block {index}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"python block {index} failed:\n{block}") from exc
    assert (tmp_path / "train_step.mlir").exists()
