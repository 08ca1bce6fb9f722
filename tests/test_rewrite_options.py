"""Options of a rewrite that change what it costs, not what it computes: ``--verify-each``,
op counting (``--stats``) and ``--emit bytecode``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.cli.main import cli
from scalify_hlo.module_io import BYTECODE_MAGIC, EmitFormat
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites import PASSES, ModulePass

MODULE = """
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %i: tensor<4xi32>)
    -> (tensor<8x4xf32>, tensor<4xi32>) {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
    : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %t = stablehlo.tanh %y : tensor<8x4xf32>
  return %t, %i : tensor<8x4xf32>, tensor<4xi32>
}
"""


@dataclass(frozen=True)
class _Break(ModulePass):
    name: ClassVar[str] = "test-break"
    description: ClassVar[str] = "breaks the module"

    def apply(self, module: Any, context: Any) -> None:
        """Return the i32 argument where main returns f32: a module the verifier rejects."""
        main = module.body.operations[0]
        block = main.regions[0].blocks[0]
        ret = block.operations[len(block.operations) - 1]
        ret.operands[0] = block.arguments[2]


@pytest.fixture
def breaking_pass(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(PASSES, _Break.name, _Break)
    return _Break.name


def test_pipeline_is_verified_once_at_the_end(breaking_pass: str) -> None:
    result = rewrite_module_source(MODULE, f"inline,{breaking_pass},inline")
    assert result.error is not None and result.error.startswith(
        "internal error: pipeline 'inline,test-break,inline' produced an invalid module "
        "(--verify-each names the pass): ")


def test_verify_each_names_the_pass(breaking_pass: str) -> None:
    result = rewrite_module_source(MODULE, f"inline,{breaking_pass},inline", verify_each=True)
    assert result.error is not None and result.error.startswith(
        "internal error: pass 'test-break' produced an invalid module: ")


def test_cli_verify_each(breaking_pass: str, tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(MODULE)
    runner = CliRunner()
    plain = runner.invoke(cli, ["rewrite", str(path), "--pipeline", breaking_pass])
    each = runner.invoke(cli, ["rewrite", str(path), "--pipeline", breaking_pass,
                               "--verify-each"])
    assert plain.exit_code == each.exit_code == 1
    assert "pipeline 'test-break' produced an invalid module (--verify-each" in plain.output
    assert "error: internal error: pass 'test-break' produced an invalid module" in each.output


def test_ops_are_counted_only_when_asked_for() -> None:
    plain = rewrite_module_source(MODULE, DEFAULT_PIPELINE)
    counted = rewrite_module_source(MODULE, DEFAULT_PIPELINE, count_ops=True)
    assert plain.ops_before == plain.ops_after == {}
    assert counted.ops_before["stablehlo.dot_general"] == 1
    assert sum(counted.ops_after.values()) > sum(counted.ops_before.values())
    assert counted.output == plain.output


def test_bytecode_of_the_default_rewrite_reads_back_as_the_same_module() -> None:
    text = rewrite_module_source(MODULE, DEFAULT_PIPELINE)
    bytecode = rewrite_module_source(MODULE, DEFAULT_PIPELINE, emit=EmitFormat.BYTECODE)
    assert bytecode.output is not None and bytecode.output.startswith(BYTECODE_MAGIC)
    read_back = rewrite_module_source(bytecode.output, "")  # the parser takes bytecode
    assert read_back.error is None and read_back.output == text.output
