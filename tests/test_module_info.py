"""``module_info``: names, the recorded original signature, and which arguments hold squares.

Random inputs (``run``/``compare --seed``) draw ``|x|`` for squares: unit-normal values for
Adam's second moment make ``sqrt(nu)`` NaN in the original step too.
"""

from __future__ import annotations

import pytest

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.module_info import module_info
from scalify_hlo.signature import EntrySignature, TensorSpec

ADAM_LIKE = """
func.func public @main(%nu: tensor<4xf32> loc("state"), %g: tensor<4xf32> loc("g"),
                       %t: tensor<f32> loc("t")) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.999> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %0 = stablehlo.multiply %b, %nu : tensor<4xf32>
  %1 = stablehlo.multiply %g, %g : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  %bt = stablehlo.broadcast_in_dim %t, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.divide %2, %bt : tensor<4xf32>
  %4 = stablehlo.sqrt %3 : tensor<4xf32>
  return %4 : tensor<4xf32>
}
"""

# Where a value stops being provably non-negative: subtract, a multiply by a tensor, the
# divisor of a divide.
NOT_SQUARES = """
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>)
    -> tensor<4xf32> {
  %0 = stablehlo.subtract %a, %b : tensor<4xf32>
  %1 = stablehlo.multiply %0, %c : tensor<4xf32>
  %2 = stablehlo.divide %1, %c : tensor<4xf32>
  %3 = stablehlo.sqrt %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""

THROUGH_CALL = """
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf16>
  %1 = func.call @root(%y, %0) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf16>
  %2 = stablehlo.convert %1 : (tensor<4xf16>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @root(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf16> {
  %r = stablehlo.reshape %b : (tensor<4xf16>) -> tensor<2x2xf16>
  %0 = stablehlo.rsqrt %r : tensor<2x2xf16>
  %1 = stablehlo.reshape %0 : (tensor<2x2xf16>) -> tensor<4xf16>
  return %1 : tensor<4xf16>
}
"""

BY_NAME = """
func.func public @main(%a: tensor<4xf32> loc("opt_state[0].nu['w']"),
                       %b: tensor<4xf32> loc("opt_state[0].mu['w']"),
                       %c: tensor<4xf32> loc("params['nu_scale']")) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
"""


@pytest.mark.parametrize(("text", "squares"), [
    (ADAM_LIKE, {0}),  # through multiply and divide by scalars and an add, into sqrt
    (NOT_SQUARES, set()),
    (THROUGH_CALL, {0}),  # through convert, a call and reshape, into rsqrt
    (BY_NAME, {0}),  # the name says nu; nu_scale does not
], ids=["adam", "not-squares", "through-call", "by-name"])
def test_square_inputs(text: str, squares: set[int]) -> None:
    assert module_info(text).square_inputs == squares


def test_names_and_original_survive_the_rewrite_without_locations() -> None:
    result = rewrite_module_source(ADAM_LIKE, "scalify{data-dtype=f16}")
    assert result.error is None and result.output is not None
    text = result.output.decode()
    assert 'loc("' not in text  # printed without debug info
    info = module_info(text)
    assert info.input_names == ("state.data", "state.scale", "g.data", "g.scale", "t.data",
                                "t.scale")
    assert info.original == EntrySignature(
        (TensorSpec((4,), "f32"), TensorSpec((4,), "f32"), TensorSpec((), "f32")),
        (TensorSpec((4,), "f32"),))


def test_plain_module_records_no_original() -> None:
    info = module_info(ADAM_LIKE)
    assert info.original is None
    assert info.input_names == ("state", "g", "t")
    assert info.result_names == (None,)
