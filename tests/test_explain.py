"""``scalify-hlo explain`` and the passes' records: how each value is scaled, per op family
and per source line, read from the records the passes keep when asked (never from printed
IR), with the rewrite itself unchanged by keeping them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scalify_hlo import module_io
from scalify_hlo.api import rewrite_module_source
from scalify_hlo.cli.main import cli
from scalify_hlo.explain import Explanation, split_location
from scalify_hlo.rewrites import Record
from tests.helpers import GOLDEN, MLP_STEP, REPO_ROOT, run_cli

FALLBACK = GOLDEN / "scalify" / "fallback.mlir"
F32 = "inline,scalify{data-dtype=f32},simplify"

# A square added to another value (Adam's second moment): f16 data keeps it wide (f32).
SQUARE = """\
func.func public @main(%g: tensor<4xf32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.add %nu, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""

BIAS_CORRECTION = """\
func.func public @main(%t: tensor<i32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<f32>
  %0 = stablehlo.convert %t : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.power %b, %0 : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.multiply %nu, %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""

NOISE_SCHEDULE = """\
func.func public @main(%t: tensor<i32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %ab = stablehlo.constant dense<[0.9999, 0.999, 0.99, 0.9]> : tensor<4xf32>
  %0 = stablehlo.dynamic_slice %ab, %t, sizes = [2] : (tensor<4xf32>, tensor<i32>) -> tensor<2xf32>
  %1 = stablehlo.sqrt %0 : tensor<2xf32>
  %2 = stablehlo.multiply %1, %x : tensor<2xf32>
  return %2 : tensor<2xf32>
}
"""


def explain(*args: str) -> str:
    """``scalify-hlo explain ARGS`` in process; its stdout (it must succeed)."""
    result = CliRunner().invoke(cli, ["explain", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def first_chunk(path: Path) -> str:
    return module_io.split_input(path.read_text())[0].text


def op_line(text: str, op: str = "stablehlo.cholesky") -> int:
    """The 1-based line of the first ``%x = op`` in ``text``."""
    lines = text.splitlines()
    return 1 + next(i for i, line in enumerate(lines)
                    if line.lstrip().startswith("%") and f"= {op} " in line)


@pytest.fixture(scope="module")
def mlp_json() -> dict:
    return json.loads(explain(str(MLP_STEP), "--format", "json"))


# ----- the tables ---------------------------------------------------------------------------
def test_mlp_step_lists_fp8_dots_with_their_formats(mlp_json: dict) -> None:
    """Forward dots take E4M3 on both sides; backward ones an E5M2 gradient (and never
    E5M2 x E5M2), each at the user's source line under JAX's name stack. The output head
    (the last layer's dot and its two gradient dots) is listed as staying in f16."""
    dots = [r for r in mlp_json["records"] if r["kind"] == "fp8"]
    assert len(dots) == 5  # 2 forward, 3 backward (the first layer's input gets no gradient)
    forward = [r for r in dots if "transpose(" not in r["stack"]]
    backward = [r for r in dots if "transpose(" in r["stack"]]
    assert {r["detail"] for r in forward} == {"f8E4M3FN x f8E4M3FN"} and len(forward) == 2
    assert {r["detail"] for r in backward} == {"f8E5M2 x f8E4M3FN"}
    head = [r for r in mlp_json["records"] if r["kind"] == "not-fp8"]
    assert [("transpose(" in r["stack"], r["detail"]) for r in head] == [
        (False, "stays in f16: the output head"), (True, "stays in f16: the output head"),
        (True, "stays in f16: the output head")]
    assert all(r["source"].endswith("testdata/models.py:75") for r in dots + head)
    assert all(r["family"] == "dot" and r["op"] == "stablehlo.dot_general" for r in dots)
    dot_row = next(row for row in mlp_json["families"] if row["family"] == "dot")
    assert dot_row["ops"] == 8 and dot_row["kinds"]["fp8"] == 5
    assert dot_row["kinds"]["not-fp8"] == 3


def test_mlp_step_lists_rescale_points(mlp_json: dict) -> None:
    """The default policy rescales the backward pass's dots and sums by their amax; SGD's update
    runs on unscaled values (``update`` records), its results and the loss taking their
    scales from their statistics at the return, which no rescale point marks."""
    rescaled = [r for r in mlp_json["records"] if r["kind"] == "rescale"]
    assert rescaled and all("transpose(" in r["stack"] for r in rescaled)
    assert {r["detail"] for r in rescaled} == {"amax:nearest"}
    assert "stablehlo.dot_general" in {r["op"] for r in rescaled}
    assert {r["op"] for r in rescaled} <= {"stablehlo.dot_general", "stablehlo.reduce"}
    updates = [r for r in mlp_json["records"] if r["kind"] == "update"]
    assert {r["op"] for r in updates} >= {"stablehlo.multiply", "stablehlo.subtract"}


def test_every_scaled_op_has_one_scale_record(mlp_json: dict) -> None:
    """static, runtime or fallback: one per op with a float result, so the family table's
    op counts add up."""
    once = [r for r in mlp_json["records"]
            if r["kind"] in ("static", "runtime", "update", "fallback")]
    ops = [row["ops"] for row in mlp_json["families"] if row["family"] != "return"]
    assert sum(ops) == len(once)  # the return is listed for its rescales, not as a scaled op
    assert {r["kind"] for r in once} == {"static", "runtime", "update"}
    constants = [r for r in once if r["op"] == "stablehlo.constant"]
    assert constants and {r["kind"] for r in constants} == {"static", "update"}


def test_per_line_table_tells_forward_from_backward(mlp_json: dict) -> None:
    rows = [row for row in mlp_json["lines"] if row["source"].endswith("models.py:75")]
    stacks = {row["stack"] for row in rows}
    assert stacks == {"jit(step)/jvp()", "jit(step)/transpose(jvp())"}
    forward = next(row for row in rows if row["stack"] == "jit(step)/jvp()")
    assert forward["ops"]["stablehlo.dot_general"] == 3
    kinds = {entry["kind"] for entry in forward["scaling"]}
    assert kinds == {"runtime", "fp8", "not-fp8"}  # the last layer's dot: the output head


def test_text_output_has_both_tables() -> None:
    text = explain(str(MLP_STEP))
    family_table, line_table = text.split("\n\n")
    assert family_table.splitlines()[1].split() == ["family", "ops", "static", "runtime",
                                                    "update", "rescale", "fp8", "not-fp8",
                                                    "wide"]
    assert any(line.split()[:1] == ["dot"] for line in family_table.splitlines())
    assert "total" in family_table
    forward = next(line for line in line_table.splitlines()
                   if "models.py:75" in line and "jit(step)/jvp()" in line)
    assert "dot_general x3" in forward and "fp8 2 (f8E4M3FN x f8E4M3FN)" in forward
    assert "not-fp8 1 (stays in f16: the output head)" in forward


def test_fallback_is_listed_with_its_reason(tmp_path: Path) -> None:
    module = tmp_path / "fallback.mlir"
    module.write_text(first_chunk(FALLBACK))
    data = json.loads(explain(str(module), "--pipeline", "scalify{data-dtype=f32}",
                              "--format", "json"))
    fallback = [r for r in data["records"] if r["kind"] == "fallback"]
    assert [(r["op"], r["family"], r["detail"]) for r in fallback] == [
        ("stablehlo.cholesky", "no rule", "has no scale rule")]
    # No debug locations: the source line is the op's line in the input file.
    assert fallback[0]["source"] == f"{module}:{op_line(first_chunk(FALLBACK))}"
    assert any("running it unscaled" in w for w in data["warnings"])


# A module, its data type, and the wide ops explain lists with why each computes wide.
_WIDE_CASES = {
    # f16 data keeps a square and what it is added to in f32 (square-dtype=auto).
    "square": (SQUARE, "f16", {"stablehlo.multiply": "f32 data (square-dtype)",
                               "stablehlo.add": "f32 data (square-dtype)"}),
    # bf16 data keeps rank-0 values in f32 (scalar_values.py); the broadcast is bf16.
    "rank0": (BIAS_CORRECTION, "bf16", {"stablehlo.constant": "f32 data (rank 0)",
                                        "stablehlo.convert": "f32 data (rank 0)",
                                        "stablehlo.power": "f32 data (rank 0)"}),
    # A lookup in a constant schedule and its sqrt stay f32 (schedule_values.py); the
    # product with the data is f16.
    "schedule": (NOISE_SCHEDULE, "f16", {"stablehlo.constant": "f32 data (schedule)",
                                         "stablehlo.dynamic_slice": "f32 data (schedule)",
                                         "stablehlo.sqrt": "f32 data (schedule)"}),
}


@pytest.mark.parametrize("case", sorted(_WIDE_CASES))
def test_ops_kept_wide_are_listed_with_their_class(tmp_path: Path, case: str) -> None:
    text, dtype, expected = _WIDE_CASES[case]
    module = tmp_path / f"{case}.mlir"
    module.write_text(text)
    data = json.loads(explain(str(module), "--pipeline", f"scalify{{data-dtype={dtype}}}",
                              "--format", "json"))
    wide = {r["op"]: r["detail"] for r in data["records"] if r["kind"] == "wide"}
    assert wide == expected


def test_fp8_pipeline_without_scalify_counts_dots(tmp_path: Path) -> None:
    """Without scalify no op gets a scale record; a dot still counts as one op."""
    data = json.loads(explain(str(MLP_STEP), "--pipeline", "inline,fp8-dots{output-head=fp8}",
                              "--format", "json"))
    assert {r["kind"] for r in data["records"]} == {"fp8"}
    assert data["families"] == [{"family": "dot", "ops": 8, "kinds": {"fp8": 8}}]


def test_output_file_and_stdin(tmp_path: Path) -> None:
    out = tmp_path / "explained.json"
    result = CliRunner().invoke(cli, ["explain", "-", "--format", "json", "-o", str(out)],
                                input=SQUARE, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["records"]
    assert result.stdout == ""


# ----- errors: one line ---------------------------------------------------------------------
@pytest.mark.parametrize(("make_args", "needle"), [
    (lambda d: ["missing.mlir"], "cannot read 'missing.mlir'"),
    (lambda d: [str(FALLBACK)], "redefinition of symbol"),  # several modules in one file
    (lambda d: [str(MLP_STEP), "--pipeline", "inline,bogus"], "unknown pass 'bogus'"),
], ids=["missing", "many-modules", "bad-pipeline"])
def test_errors_are_one_line(tmp_path: Path, make_args, needle: str) -> None:
    result = run_cli("explain", *make_args(tmp_path), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("explain", MLP_STEP, "--format", "yaml", cwd=tmp_path)
    assert result.returncode == 2 and "yaml" in result.stderr
    assert "Traceback" not in result.stderr


# ----- the records --------------------------------------------------------------------------
def test_records_are_kept_only_when_asked_and_change_nothing() -> None:
    """The rewrite's output is the same with and without records; without, none are kept."""
    text = MLP_STEP.read_text()
    plain = rewrite_module_source(text, debug_info=True)
    recorded = rewrite_module_source(text, debug_info=True, records=True)
    assert plain.context.records is None
    assert recorded.context.records and recorded.output == plain.output
    assert recorded.context.stats == plain.context.stats


def test_records_of_a_chunk_point_at_the_file_line() -> None:
    chunk = module_io.split_input(FALLBACK.read_text())[0]
    result = rewrite_module_source(chunk.text, "scalify{data-dtype=f32}",
                                   filename="golden.mlir", line_offset=chunk.first_line,
                                   records=True)
    (record,) = result.context.records
    assert split_location(record.location)[0] == f"golden.mlir:{op_line(FALLBACK.read_text())}"


@pytest.mark.parametrize(("location", "source", "stack"), [
    ('loc("jit(f)/jvp()/dot_general"(callsite("loss"("/a/m.py":75:16 to :30) at '
     '"step"("/a/m.py":81:2))))', "/a/m.py:75", "jit(f)/jvp()/dot_general"),
    # an inlined op: its own name under the call's name stack
    ('loc(callsite("max" at "jit(f)/jvp()/jit(relu)"(callsite("loss"("m.py":77:20 to 3:4) '
     'at "step"("m.py":81:22)))))', "m.py:77", "jit(f)/jvp()/jit(relu)/max"),
    ('loc(callsite(unknown at "jit(f)/mul"("m.py":5:1)))', "m.py:5", "jit(f)/mul"),
    ('loc(fused<"x">["a.py":1:2, "jit(f)/add"("b.py":3:4)])', "a.py:1", "jit(f)/add"),
    ('loc("-":12:3)', "-:12", ""),
    ('loc(unknown)', "", ""),
    ('loc("with \\"quote\\""("q.py":9:1))', "q.py:9", 'with "quote"'),
    ("not a location", "", "not a location"),
])
def test_split_location(location: str, source: str, stack: str) -> None:
    assert split_location(location) == (source, stack)


def test_source_line_skips_scalify_hlos_own_frames() -> None:
    """A constant of a compile_scaled step has no line in the user's function: its source is
    the user's call to compile_scaled, not scaled_step.py's call to JAX."""
    own = REPO_ROOT / "scalify_hlo" / "scaled_step.py"
    location = (f'loc("jit(f)"(callsite("export"("{own}":114:11) at '
                f'"<module>"("/u/train.py":37:7))))')
    assert split_location(location) == ("/u/train.py:37", "jit(f)")
    assert split_location(f'loc("jit(f)"("{own}":114:11))') == (f"{own}:114", "jit(f)")


def test_empty_records_say_so() -> None:
    assert Explanation([]).to_text().startswith("no records")
    one = Explanation([Record("stablehlo.add", 'loc("f.py":3:1)', "runtime", "1 factor")])
    assert json.loads(one.render("json"))["lines"] == [{
        "source": "f.py:3", "stack": "", "ops": {"stablehlo.add": 1},
        "scaling": [{"kind": "runtime", "detail": "1 factor", "count": 1}]}]
