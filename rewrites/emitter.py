"""Small builders for the StableHLO ops that rewrites emit, at one insertion point and location.

Ops are created generically (``ir.Operation.create``) so one helper serves every elementwise op
and no rewrite depends on the exact signatures of generated Python op classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.signature import FLOAT_DTYPES

SCALED_ELEMENT_TYPES = ("f16", "bf16", "f32")
# The exponents of normal f32 powers of two: what one multiply by a runtime 2^e can reach.
MIN_NORMAL_EXP, MAX_NORMAL_EXP = -126, 127
# The powers of two a constant of each data type holds exactly (f16 subnormals included: XLA
# keeps them; f32 and bf16 ones may be flushed), so one multiply's reach.
_NORMAL_EXPONENTS = {"f32": (-126, 127), "bf16": (-126, 127), "f16": (-24, 15)}


def element_type(value_or_type: ir.Value | ir.Type) -> ir.Type:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    if isinstance(t, ir.ShapedType):  # the bindings hand back concrete (downcast) types
        return t.element_type
    return ir.ShapedType(t).element_type


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    attributes = op.attributes  # one map object: ``op.attributes`` builds a new one each time
    return {name: attributes[name] for name in attributes}


def float_type(name: str) -> ir.Type:
    return {
        "f16": ir.F16Type.get,
        "bf16": ir.BF16Type.get,
        "f32": ir.F32Type.get,
        "f64": ir.F64Type.get,
        "f8E4M3FN": ir.Float8E4M3FNType.get,
        "f8E5M2": ir.Float8E5M2Type.get,
    }[name]()


def numpy_dtype(t: ir.Type) -> np.dtype:
    return np.dtype(FLOAT_DTYPES[str(t)])


def is_ranked_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType)


_SCALED_ELEMENT_CLASSES = (ir.F16Type, ir.BF16Type, ir.F32Type)  # SCALED_ELEMENT_TYPES


def is_scalable_type(t: ir.Type) -> bool:
    """Tensors that carry a (data, scale) pair: ranked, of f16, bf16 or f32 elements.

    Checked on the bindings' concrete type classes: printing the element type to compare
    names costs more than the rest of this test, which runs for every value."""
    return isinstance(t, ir.RankedTensorType) and isinstance(t.element_type,
                                                              _SCALED_ELEMENT_CLASSES)


def with_element_type(t: ir.Type, element: ir.Type) -> ir.RankedTensorType:
    ranked = t if isinstance(t, ir.RankedTensorType) else ir.RankedTensorType(t)
    return ir.RankedTensorType.get(ranked.shape, element, ranked.encoding)


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def scalar_type(element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([], element)


def splat_scalar(attr: ir.Attribute) -> float | None:
    """The single value of a splat float/int dense attribute, without materializing it."""
    dense = ir.DenseElementsAttr(attr)
    if not dense.is_splat:
        return None
    value = dense.get_splat_value()
    if isinstance(value, ir.FloatAttr):
        return float(ir.FloatAttr(value).value)
    if isinstance(value, ir.IntegerAttr):
        return float(ir.IntegerAttr(value).value)
    return None


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines ``value``; None for a block argument."""
    owner = value.owner
    if not isinstance(owner, ir.OpView | ir.Operation):
        return None
    return owner.operation


def ops_named(root: ir.Operation, *names: str) -> list[ir.Operation]:
    """Every op named one of ``names`` nested in ``root`` (and ``root`` itself), in walk
    order: collected before a rewrite changes the IR under the walk."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def splat_constant_value(value: ir.Value) -> float | None:
    """The value of a splat constant, or of a broadcast of one; None otherwise."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name == "stablehlo.broadcast_in_dim":
        return splat_constant_value(op.operands[0])
    if op.name != "stablehlo.constant":
        return None
    try:
        return splat_scalar(op.attributes["value"])
    except (KeyError, ValueError, TypeError):
        return None


def distinct_values(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense attribute, a splat as one element: enough for scale decisions."""
    scalar = splat_scalar(attr)
    if scalar is not None:
        return np.array([scalar], dtype=np.float64)
    return read_dense(attr).astype(np.float64)


def read_dense(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense elements attribute as a numpy array of the element's dtype."""
    dense = ir.DenseElementsAttr(attr)
    shaped = ir.ShapedType(dense.type)
    dtype = numpy_dtype(shaped.element_type)
    if dense.is_splat:
        scalar = np.array(ir.FloatAttr(dense.get_splat_value()).value, dtype=np.float64)
        return np.full(shaped.shape, scalar.astype(dtype), dtype=dtype)
    array = np.array(dense)
    if array.dtype == object or array.dtype != dtype:
        # bfloat16 comes back as raw storage; read through the attribute's buffer instead.
        array = np.frombuffer(memoryview(dense), dtype=dtype).reshape(shaped.shape)
    return array.copy()


class Emitter:
    """Creates ops before ``ip`` with location ``loc``.

    ``constants``, when given, caches the i32 scalar constants made at ``ip`` (the exponent
    arithmetic asks for 23, 127, -127... thousands of times in a large step): only for an
    insertion point that stays put, so that an earlier constant dominates every later use.
    """

    def __init__(self, ip: ir.InsertionPoint, loc: ir.Location,
                 constants: dict[int, ir.Value] | None = None) -> None:
        self.ip = ip
        self.loc = loc
        self.constants = constants

    def at(self, loc: ir.Location) -> Emitter:
        return Emitter(self.ip, loc, self.constants)

    def op(
        self,
        name: str,
        operands: Sequence[ir.Value],
        result_types: Sequence[ir.Type],
        attributes: dict[str, ir.Attribute] | None = None,
        regions: int = 0,
    ) -> ir.Operation:
        return ir.Operation.create(
            name,
            results=list(result_types),
            operands=list(operands),
            attributes=attributes or {},
            regions=regions,
            loc=self.loc,
            ip=self.ip,
        )

    def unary(self, name: str, x: ir.Value, result_type: ir.Type | None = None) -> ir.Value:
        return self.op(name, [x], [result_type or x.type]).result

    def binary(self, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.op(name, [a, b], [a.type]).result

    def constant(self, array: np.ndarray, t: ir.Type) -> ir.Value:
        element = ir.ShapedType(t).element_type
        array = np.asarray(array)
        if array.size and np.all(array == array.flat[0]) and not np.isnan(array.flat[0]):
            attr = ir.DenseElementsAttr.get_splat(
                t, ir.FloatAttr.get(element, float(array.flat[0])))
        elif array.size and np.all(np.isnan(array)):
            attr = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, float("nan")))
        else:
            attr = ir.DenseElementsAttr.get(
                np.ascontiguousarray(array.astype(numpy_dtype(element))), type=t)
        return self.op("stablehlo.constant", [], [t], {"value": attr}).result

    def splat(self, value: float, t: ir.Type) -> ir.Value:
        element = ir.ShapedType(t).element_type
        attr = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, value))
        return self.op("stablehlo.constant", [], [t], {"value": attr}).result

    def scalar_f32(self, value: float) -> ir.Value:
        return self.splat(value, scalar_type(ir.F32Type.get()))

    def convert(self, x: ir.Value, element: ir.Type) -> ir.Value:
        if element_type(x) == element:
            return x
        return self.unary("stablehlo.convert", x, with_element_type(x.type, element))

    def broadcast_scalar(self, scalar: ir.Value, t: ir.Type) -> ir.Value:
        """A rank-0 value broadcast to tensor type ``t`` (no-op for rank-0 ``t``)."""
        if not ir.RankedTensorType(t).shape:
            return scalar
        dims = ir.DenseI64ArrayAttr.get([])
        return self.op("stablehlo.broadcast_in_dim", [scalar], [t],
                       {"broadcast_dimensions": dims}).result

    def scale_tensor_static(self, x: ir.Value, exp: int) -> ir.Value:
        """``x * 2**exp``, exactly: one multiply per step of the element type's normal range
        (``2**-200`` is no f32 constant); nothing is emitted for ``exp == 0``."""
        if exp == 0:
            return x
        low, high = _NORMAL_EXPONENTS.get(str(element_type(x)), _NORMAL_EXPONENTS["f32"])
        while exp != 0:
            step = min(max(exp, low), high)
            x = self.binary("stablehlo.multiply", x, self.splat(2.0 ** step, x.type))
            exp -= step
        return x

    # ----- runtime scales as i32 exponents ---------------------------------------------------
    def int_scalar(self, value: int) -> ir.Value:
        """A rank-0 i32 constant, made once per insertion point when ``constants`` is set."""
        cache = self.constants
        found = None if cache is None else cache.get(value)
        if found is not None:
            return found
        t = scalar_type(ir.IntegerType.get_signless(32))
        attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, value))
        result = self.op("stablehlo.constant", [], [t], {"value": attr}).result
        if cache is not None:
            cache[value] = result
        return result

    def exponent_of_pow2(self, scale: ir.Value) -> ir.Value:
        """The exponent of a positive power-of-two rank-0 f32, read from its bits (a zero or
        subnormal reads as -127, an infinity as 128)."""
        i32 = scalar_type(ir.IntegerType.get_signless(32))
        bits = self.unary("stablehlo.bitcast_convert", scale, i32)
        biased = self.binary("stablehlo.shift_right_logical", bits, self.int_scalar(23))
        return self.binary("stablehlo.subtract", biased, self.int_scalar(127))

    def pow2_of_exponent(self, exp: ir.Value) -> ir.Value:
        """``2**exp`` as a rank-0 f32, built from its bits: ``exp`` must be in [-126, 127]."""
        biased = self.binary("stablehlo.add", exp, self.int_scalar(127))
        bits = self.binary("stablehlo.shift_left", biased, self.int_scalar(23))
        return self.unary("stablehlo.bitcast_convert", bits, scalar_type(ir.F32Type.get()))

    def clamp_exponent(self, exp: ir.Value, low: int = MIN_NORMAL_EXP,
                       high: int = MAX_NORMAL_EXP) -> ir.Value:
        return self.op("stablehlo.clamp", [self.int_scalar(low), exp, self.int_scalar(high)],
                       [exp.type]).result

    def times_factor(self, x: ir.Value, factor: ir.Value) -> ir.Value:
        """``x * factor`` for a rank-0 f32 ``factor``, computed in f32 (a factor 2^-30 is 0 in
        f16) and rounded once to x's element type."""
        wide = self.convert(x, ir.F32Type.get())
        wide = self.binary("stablehlo.multiply", wide, self.broadcast_scalar(factor, wide.type))
        return self.convert(wide, element_type(x))

    def pow2_round(self, x: ir.Value) -> ir.Value:
        """``x`` rounded to the nearest power of two (exact powers of two stay as they are):
        a reduce_precision to 0 mantissa bits, which also keeps 0, inf and NaN."""
        i32 = ir.IntegerType.get_signless(32)
        return self.op("stablehlo.reduce_precision", [x], [x.type], {
            "exponent_bits": ir.IntegerAttr.get(i32, 8),
            "mantissa_bits": ir.IntegerAttr.get(i32, 0),
        }).result

    def compare(self, direction: str, a: ir.Value, b: ir.Value) -> ir.Value:
        i1 = ir.IntegerType.get_signless(1)
        attributes = {
            "comparison_direction": ir.Attribute.parse(f"#stablehlo<comparison_direction "
                                                       f"{direction}>"),
            "compare_type": ir.Attribute.parse("#stablehlo<comparison_type FLOAT>"),
        }
        return self.op("stablehlo.compare", [a, b], [with_element_type(a.type, i1)],
                       attributes).result

    def reduce_all(self, x: ir.Value, combiner: str, init: float) -> ir.Value:
        """Reduce every dimension of ``x`` with an elementwise ``combiner`` to a rank-0 value."""
        element = element_type(x)
        scalar = scalar_type(element)
        rank = len(ir.RankedTensorType(x.type).shape)
        reduce = self.op("stablehlo.reduce", [x, self.splat(init, scalar)], [scalar],
                         {"dimensions": ir.DenseI64ArrayAttr.get(list(range(rank)))}, regions=1)
        block = reduce.regions[0].blocks.append(scalar, scalar)
        inner = Emitter(ir.InsertionPoint(block), self.loc)
        combined = inner.binary(combiner, block.arguments[0], block.arguments[1])
        inner.op("stablehlo.return", [combined], [])
        return reduce.results[0]
