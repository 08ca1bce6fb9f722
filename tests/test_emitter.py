"""The op builder's integer forms and scalar packing: what the passes that pack exponents
and mask statistics (scale epochs, the statistics fence, group-statistics) build on."""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo import module_io, runner
from scalify_hlo.rewrites.emitter import Emitter, terminator

SKELETON = """
func.func public @main(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>) -> tensor<i32> {
  return %a : tensor<i32>
}
"""


def _build(body) -> str:
    """SKELETON's function with ``body(emit, arguments)``'s value as its result."""
    with module_io.ir_context():
        module = module_io.parse_module(SKELETON)
        block = module.body.operations[0].regions[0].blocks[0]
        ret = terminator(block)
        emit = Emitter(ir.InsertionPoint(ret), ret.location)
        ret.operands[0] = body(emit, list(block.arguments))
        module_io.verify(module)
        return module_io.module_to_text(module)


def test_vector_of_and_element_round_trip() -> None:
    text = _build(lambda emit, args: emit.element(emit.vector_of(args), 1))
    assert "stablehlo.concatenate" in text and "stablehlo.slice" in text
    out = runner.run_module(text, [np.int32(5), np.int32(-7), np.int32(9)])
    assert int(out[0]) == -7


def test_element_of_a_vector_of_one_is_a_reshape() -> None:
    text = _build(lambda emit, args: emit.element(emit.vector_of(args[2:]), 0))
    assert "stablehlo.slice" not in text and "stablehlo.concatenate" not in text
    assert int(runner.run_module(text, [np.int32(1), np.int32(2), np.int32(3)])[0]) == 3


def test_a_lone_scalar_is_taken_twice_when_asked() -> None:
    text = _build(lambda emit, args: emit.element(emit.vector_of(args[:1], at_least_two=True),
                                                  1))
    assert "tensor<2xi32>" in text
    assert int(runner.run_module(text, [np.int32(4), np.int32(0), np.int32(0)])[0]) == 4


def test_integer_constants_and_signed_compares() -> None:
    """A non-splat and a splat i32 constant, compared as signed integers (-1 < 0: an
    unsigned compare would say otherwise)."""

    def body(emit: Emitter, args: list[ir.Value]) -> ir.Value:
        vector = ir.RankedTensorType.get([3], emit.types.i32)
        values = emit.constant(np.array([-1, 0, 2]), vector)
        zeros = emit.constant(np.zeros(3), vector)
        below = emit.compare("LT", values, zeros)
        picked = emit.op("stablehlo.select", [below, values, zeros], [vector]).result
        return emit.element(picked, 0)

    text = _build(body)
    assert "dense<[-1, 0, 2]> : tensor<3xi32>" in text
    assert "dense<0> : tensor<3xi32>" in text
    assert ", SIGNED :" in text
    assert int(runner.run_module(text, [np.int32(0)] * 3)[0]) == -1


def test_float_compares_stay_float() -> None:
    def body(emit: Emitter, args: list[ir.Value]) -> ir.Value:
        one = emit.scalar_f32(1.0)
        two = emit.scalar_f32(2.0)
        return emit.op("stablehlo.select", [emit.compare("LT", one, two), args[0], args[1]],
                       [args[0].type]).result

    text = _build(body)
    assert ", FLOAT :" in text
    assert int(runner.run_module(text, [np.int32(1), np.int32(2), np.int32(3)])[0]) == 1
