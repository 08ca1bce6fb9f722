"""Small builders for the StableHLO ops that rewrites emit, at one insertion point and location.

Ops are created generically (``ir.Operation.create``) so one helper serves every elementwise op
and no rewrite depends on the exact signatures of generated Python op classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.dtypes import DATA_DTYPES, EXACT_POW2_EXPONENTS, EXPONENT_RANGES, FLOAT_DTYPES
from scalify_hlo.mlir_rewrite import walk_and_apply_patterns

# The exponents of normal f32 powers of two: what one multiply by a runtime 2^e can reach.
MIN_NORMAL_EXP, MAX_NORMAL_EXP = EXPONENT_RANGES["f32"]
# The bindings' type classes of the data dtypes (builtin types always come back downcast).
_DATA_TYPE_CLASSES = {"f16": ir.F16Type, "bf16": ir.BF16Type, "f32": ir.F32Type}
assert set(_DATA_TYPE_CLASSES) == set(DATA_DTYPES)
# The powers of two a constant of each data type holds exactly, so one multiply's reach.
_EXACT_POW2_EXPONENTS_BY_CLASS = {cls: EXACT_POW2_EXPONENTS[name]
                                  for name, cls in _DATA_TYPE_CLASSES.items()}


def element_type(value_or_type: ir.Value | ir.Type) -> ir.Type:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    if type(t) is ir.RankedTensorType or isinstance(t, ir.ShapedType):  # the bindings hand
        return t.element_type  # back concrete (downcast) types; the first test is cheapest
    return ir.ShapedType(t).element_type


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    return dict(op.attributes.items())  # one call, not a lookup per name


def float_type(name: str) -> ir.Type:
    return {
        "f16": ir.F16Type.get,
        "bf16": ir.BF16Type.get,
        "f32": ir.F32Type.get,
        "f64": ir.F64Type.get,
        "f8E4M3FN": ir.Float8E4M3FNType.get,
        "f8E5M2": ir.Float8E5M2Type.get,
    }[name]()


_FLOAT_NAMES = {cls: name for name, cls in _DATA_TYPE_CLASSES.items()}


def dtype_name(t: ir.Type) -> str:
    """``str(t)`` for an element type, without printing it for the data dtypes (printing a
    type costs more than a dozen other binding calls)."""
    return _FLOAT_NAMES.get(type(t)) or str(t)


def numpy_dtype(t: ir.Type) -> np.dtype:
    return np.dtype(FLOAT_DTYPES[str(t)])


def is_ranked_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType)


_SCALED_ELEMENT_CLASSES = frozenset(_DATA_TYPE_CLASSES.values())


def is_scalable_type(t: ir.Type) -> bool:
    """Tensors that carry a (data, scale) pair: ranked, of f16, bf16 or f32 elements.

    Checked on the bindings' concrete type classes (builtin types always come back
    downcast, so an exact class test is the isinstance test, at a fifth of its cost):
    printing the element type to compare names costs more still, and this runs for every
    value."""
    return type(t) is ir.RankedTensorType and type(t.element_type) in _SCALED_ELEMENT_CLASSES


def with_element_type(t: ir.Type, element: ir.Type) -> ir.RankedTensorType:
    ranked = t if type(t) is ir.RankedTensorType else ir.RankedTensorType(t)
    return ir.RankedTensorType.get(ranked.shape, element, ranked.encoding)


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def scalar_type(element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([], element)


def terminator(block: ir.Block) -> ir.Operation:
    """The last op of ``block`` (its return), read by index: iterating a large body's ops to
    reach it makes a binding object per op."""
    operations = block.operations
    return operations[len(operations) - 1].operation


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines ``value``; None for a block argument."""
    owner = value.owner  # a Block, or the op (as an OpView)
    if isinstance(owner, ir.Block):
        return None
    return owner.operation


def ops_named(root: ir.Operation, *names: str) -> list[ir.Operation]:
    """Every op named one of ``names`` nested in ``root`` (and ``root`` itself), in walk
    order (post-order, as ``Operation.walk``): collected before a rewrite changes the IR.

    The walk runs in C++ through a pattern set rooted at ``names`` whose patterns never
    match, so Python sees only the ops asked for: ``Operation.walk`` makes a Python object
    and a callback per op, which on a large rewritten module costs 20x more when the ops
    asked for are few (the dots among 50k ops). The walk driver neither folds nor erases.
    """
    found: list[ir.Operation] = []

    def record(op: ir.OpView, _rewriter: object) -> bool:
        found.append(op.operation)
        return True  # "did not match": the IR is left as it is

    walk_and_apply_patterns(root, dict.fromkeys(names, record))  # root's regions only
    if root.name in names:
        found.append(root)
    return found


def is_scalar_broadcast(value: ir.Value) -> bool:
    """Whether ``value`` is a rank-0 value broadcast to a tensor (a scale factor)."""
    op = defining_op(value)
    return (op is not None and op.name == "stablehlo.broadcast_in_dim"
            and not ir.RankedTensorType(op.operands[0].type).shape)


class Types:
    """Types and attributes the emitters ask for over and over, made once per pass run.

    Getting a type or an attribute through the bindings costs a call into MLIR and a new
    Python object each time; a rewrite of a large step asks for the same few (f32, rank-0
    i32, ``dense<2.0>``...) tens of thousands of times. Kept per run, never per module
    import: types belong to one MLIR context, and a global cache would keep it alive.
    """

    def __init__(self) -> None:
        self.f32 = ir.F32Type.get()
        self.i32 = ir.IntegerType.get_signless(32)
        self.scalar_f32 = ir.RankedTensorType.get([], self.f32)
        self.scalar_i32 = ir.RankedTensorType.get([], self.i32)
        self._retyped: dict[tuple[ir.Type, ir.Type], ir.RankedTensorType] = {}
        self._scalable: dict[ir.Type, bool] = {}
        self._elements: dict[ir.Type, ir.Type] = {}
        self._splats: dict[tuple[ir.Type, float, float], ir.Attribute] = {}
        self._attributes: dict[object, ir.Attribute] = {}

    def with_element_type(self, t: ir.Type, element: ir.Type) -> ir.RankedTensorType:
        key = (t, element)
        found = self._retyped.get(key)
        if found is None:
            found = self._retyped[key] = with_element_type(t, element)
        return found

    def element(self, t: ir.Type) -> ir.Type:
        """``element_type(t)``, remembered per type (see ``is_scalable``)."""
        found = self._elements.get(t)
        if found is None:
            found = self._elements[t] = element_type(t)
        return found

    def is_scalable(self, t: ir.Type) -> bool:
        """``is_scalable_type``, remembered per type: reading the element type makes the
        bindings build (downcast) a new type object, the dearest part of the test."""
        found = self._scalable.get(t)
        if found is None:
            found = self._scalable[t] = is_scalable_type(t)
        return found

    def float_splat(self, value: float, t: ir.Type) -> ir.Attribute:
        """``dense<value> : t``; the sign is part of the key (0.0 == -0.0), a NaN never
        hits (nan != nan) and is simply made again."""
        key = (t, value, math.copysign(1.0, value))
        found = self._splats.get(key)
        if found is None:
            element = t.element_type if type(t) is ir.RankedTensorType else element_type(t)
            found = self._splats[key] = ir.DenseElementsAttr.get_splat(
                t, ir.FloatAttr.get(element, value))
        return found

    def attribute(self, key: object, make: Callable[[], ir.Attribute]) -> ir.Attribute:
        found = self._attributes.get(key)
        if found is None:
            found = self._attributes[key] = make()
        return found


_create = ir.Operation.create


class Emitter:
    """Creates ops before ``ip`` with location ``loc``.

    ``constants``, when given, caches the i32 scalar constants made at ``ip`` (the exponent
    arithmetic asks for 23, 127, -127... thousands of times in a large step): only for an
    insertion point that stays put, so that an earlier constant dominates every later use.
    ``types``: the run's ``Types`` (a fresh one when not given).
    """

    __slots__ = ("ip", "loc", "constants", "types")

    def __init__(self, ip: ir.InsertionPoint, loc: ir.Location,
                 constants: dict[int, ir.Value] | None = None,
                 types: Types | None = None) -> None:
        self.ip = ip
        self.loc = loc
        self.constants = constants
        self.types = Types() if types is None else types

    def at(self, loc: ir.Location) -> Emitter:
        return Emitter(self.ip, loc, self.constants, self.types)

    def op(
        self,
        name: str,
        operands: Sequence[ir.Value],
        result_types: Sequence[ir.Type],
        attributes: dict[str, ir.Attribute] | None = None,
        regions: int = 0,
    ) -> ir.Operation:
        return _create(
            name,
            results=result_types if type(result_types) is list else list(result_types),
            operands=operands if type(operands) is list else list(operands),
            attributes=attributes or {},
            regions=regions,
            loc=self.loc,
            ip=self.ip,
        )

    def unary(self, name: str, x: ir.Value, result_type: ir.Type | None = None) -> ir.Value:
        return _create(name, results=[result_type or x.type], operands=[x], attributes={},
                       regions=0, loc=self.loc, ip=self.ip).result

    def binary(self, name: str, a: ir.Value, b: ir.Value,
               result_type: ir.Type | None = None) -> ir.Value:
        """``name(a, b)`` of ``a``'s type; ``result_type``: that type, when the caller knows
        it (asking a value for its type builds a new type object through the bindings)."""
        return _create(name, results=[result_type or a.type], operands=[a, b], attributes={},
                       regions=0, loc=self.loc, ip=self.ip).result

    def constant(self, array: np.ndarray, t: ir.Type) -> ir.Value:
        """A constant of tensor type ``t`` (float or integer elements) holding ``array``,
        as a splat where every element is the same."""
        element = ir.ShapedType(t).element_type
        array = np.asarray(array)
        if isinstance(element, ir.IntegerType):
            width = ir.IntegerType(element).width
            if array.size and np.all(array == array.flat[0]):
                attr = ir.DenseElementsAttr.get_splat(
                    t, ir.IntegerAttr.get(element, int(array.flat[0])))
            else:
                attr = ir.DenseElementsAttr.get(
                    np.ascontiguousarray(array.astype(f"int{width}")), type=t)
        elif array.size and np.all(array == array.flat[0]) and not np.isnan(array.flat[0]):
            attr = ir.DenseElementsAttr.get_splat(
                t, ir.FloatAttr.get(element, float(array.flat[0])))
        elif array.size and np.all(np.isnan(array)):
            attr = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, float("nan")))
        else:
            attr = ir.DenseElementsAttr.get(
                np.ascontiguousarray(array.astype(numpy_dtype(element))), type=t)
        return self.op("stablehlo.constant", [], [t], {"value": attr}).result

    def splat(self, value: float, t: ir.Type) -> ir.Value:
        return _create("stablehlo.constant", results=[t], operands=[],
                       attributes={"value": self.types.float_splat(value, t)}, regions=0,
                       loc=self.loc, ip=self.ip).result

    def scalar_f32(self, value: float) -> ir.Value:
        return self.splat(value, self.types.scalar_f32)

    def convert(self, x: ir.Value, element: ir.Type, t: ir.Type | None = None) -> ir.Value:
        """``x`` converted to ``element``; ``t``: x's type, when the caller has it."""
        if t is None:
            t = x.type
        if self.types.element(t) == element:
            return x
        return self.unary("stablehlo.convert", x, self.types.with_element_type(t, element))

    def broadcast_scalar(self, scalar: ir.Value, t: ir.Type) -> ir.Value:
        """A rank-0 value broadcast to tensor type ``t`` (no-op for rank-0 ``t``)."""
        if not (t if type(t) is ir.RankedTensorType else ir.RankedTensorType(t)).rank:
            return scalar
        dims = self.types.attribute("no-dims", lambda: ir.DenseI64ArrayAttr.get([]))
        return self.op("stablehlo.broadcast_in_dim", [scalar], [t],
                       {"broadcast_dimensions": dims}).result

    def scale_tensor_static(self, x: ir.Value, exp: int) -> ir.Value:
        """``x * 2**exp``, exactly: one multiply per step of the element type's normal range
        (``2**-200`` is no f32 constant); nothing is emitted for ``exp == 0``."""
        if exp == 0:
            return x
        t = x.type
        low, high = _EXACT_POW2_EXPONENTS_BY_CLASS.get(type(self.types.element(t)),
                                                       EXACT_POW2_EXPONENTS["f32"])
        while exp != 0:
            step = min(max(exp, low), high)
            x = self.binary("stablehlo.multiply", x, self.splat(2.0 ** step, t), t)
            exp -= step
        return x

    # ----- runtime scales as i32 exponents ---------------------------------------------------
    def int_scalar(self, value: int) -> ir.Value:
        """A rank-0 i32 constant, made once per insertion point when ``constants`` is set."""
        cache = self.constants
        found = None if cache is None else cache.get(value)
        if found is not None:
            return found
        t = self.types.scalar_i32
        attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(self.types.i32, value))
        result = self.op("stablehlo.constant", [], [t], {"value": attr}).result
        if cache is not None:
            cache[value] = result
        return result

    def exponent_of_pow2(self, scale: ir.Value) -> ir.Value:
        """The exponent of a positive power-of-two rank-0 f32, read from its bits (a zero or
        subnormal reads as -127, an infinity as 128)."""
        i32 = self.types.scalar_i32
        bits = self.unary("stablehlo.bitcast_convert", scale, i32)
        biased = self.binary("stablehlo.shift_right_logical", bits, self.int_scalar(23), i32)
        return self.binary("stablehlo.subtract", biased, self.int_scalar(127), i32)

    def pow2_of_exponent(self, exp: ir.Value) -> ir.Value:
        """``2**exp`` as a rank-0 f32, built from its bits: ``exp`` must be in [-126, 127]."""
        i32 = self.types.scalar_i32  # exponents are rank-0 i32 throughout
        biased = self.binary("stablehlo.add", exp, self.int_scalar(127), i32)
        bits = self.binary("stablehlo.shift_left", biased, self.int_scalar(23), i32)
        return self.unary("stablehlo.bitcast_convert", bits, self.types.scalar_f32)

    def clamp_exponent(self, exp: ir.Value, low: int = MIN_NORMAL_EXP,
                       high: int = MAX_NORMAL_EXP) -> ir.Value:
        return self.op("stablehlo.clamp", [self.int_scalar(low), exp, self.int_scalar(high)],
                       [self.types.scalar_i32]).result  # exponents are rank-0 i32

    def times_factor(self, x: ir.Value, factor: ir.Value,
                     saturate_at: float | None = None) -> ir.Value:
        """``x * factor`` for a rank-0 f32 ``factor``, computed in f32 (a factor 2^-30 is 0 in
        f16) and rounded once to x's element type; with ``saturate_at`` (the element type's
        largest finite value) a product beyond it is clamped to it instead of becoming inf."""
        t = x.type  # read once: each read builds a new type object
        element, f32 = self.types.element(t), self.types.f32
        if element == f32:
            wide, wide_type = x, t
        else:
            wide_type = self.types.with_element_type(t, f32)
            wide = self.unary("stablehlo.convert", x, wide_type)
        wide = self.binary("stablehlo.multiply", wide, self.broadcast_scalar(factor, wide_type),
                           wide_type)
        if saturate_at is not None:
            low, high = self.scalar_f32(-saturate_at), self.scalar_f32(saturate_at)
            wide = self.op("stablehlo.clamp", [low, wide, high], [wide_type]).result
        return wide if element == f32 else self.unary("stablehlo.convert", wide, t)

    def pow2_round(self, x: ir.Value) -> ir.Value:
        """``x`` rounded to the nearest power of two (exact powers of two stay as they are):
        a reduce_precision to 0 mantissa bits, which also keeps 0, inf and NaN."""
        return self.reduce_precision(x, 8, 0)

    def reduce_precision(self, x: ir.Value, exponent_bits: int, mantissa_bits: int) -> ir.Value:
        """``x`` rounded (to nearest even) to ``mantissa_bits`` and ``exponent_bits``."""
        i32 = self.types.i32

        def bits(count: int) -> ir.Attribute:
            return self.types.attribute(("i32", count), lambda: ir.IntegerAttr.get(i32, count))

        return self.op("stablehlo.reduce_precision", [x], [x.type], {
            "exponent_bits": bits(exponent_bits), "mantissa_bits": bits(mantissa_bits)}).result

    def compare(self, direction: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """``a <direction> b`` as i1 of ``a``'s shape: a FLOAT compare of floats, a SIGNED
        one of integers (i32 exponents, indices)."""
        types = self.types
        i1 = types.attribute("i1", lambda: ir.IntegerType.get_signless(1))
        kind = "SIGNED" if isinstance(types.element(a.type), ir.IntegerType) else "FLOAT"
        attributes = {
            "comparison_direction": types.attribute(
                ("direction", direction),
                lambda: ir.Attribute.parse(f"#stablehlo<comparison_direction {direction}>")),
            "compare_type": types.attribute(
                ("compare_type", kind),
                lambda: ir.Attribute.parse(f"#stablehlo<comparison_type {kind}>")),
        }
        return self.op("stablehlo.compare", [a, b], [types.with_element_type(a.type, i1)],
                       attributes).result

    def vector_of(self, scalars: Sequence[ir.Value], at_least_two: bool = False) -> ir.Value:
        """Rank-0 values of one element type as one vector; a lone one as ``tensor<1xT>``, or
        taken twice with ``at_least_two`` (XLA folds a slice of a vector of one back into its
        scalar)."""
        element = ir.RankedTensorType(scalars[0].type).element_type
        one = ir.RankedTensorType.get([1], element)
        parts = [self.unary("stablehlo.reshape", s, one) for s in scalars]
        if len(parts) == 1 and at_least_two:
            parts.append(parts[0])
        if len(parts) == 1:
            return parts[0]
        dimension = self.types.attribute(
            "dimension-0", lambda: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0))
        return self.op("stablehlo.concatenate", parts,
                       [ir.RankedTensorType.get([len(parts)], element)],
                       {"dimension": dimension}).result

    def slice(self, vector: ir.Value, start: int, stop: int) -> ir.Value:
        """``vector[start:stop]`` of a rank-1 vector (a static slice, stride 1)."""
        element = ir.RankedTensorType(vector.type).element_type
        return self.op("stablehlo.slice", [vector],
                       [ir.RankedTensorType.get([stop - start], element)], {
                           "start_indices": ir.DenseI64ArrayAttr.get([start]),
                           "limit_indices": ir.DenseI64ArrayAttr.get([stop]),
                           "strides": ir.DenseI64ArrayAttr.get([1])}).result

    def element(self, vector: ir.Value, index: int) -> ir.Value:
        """Element ``index`` of a vector as a rank-0 value: a static slice and a reshape (the
        reshape alone for a vector of one)."""
        vector_type = ir.RankedTensorType(vector.type)
        element = vector_type.element_type
        if vector_type.shape == [1]:
            return self.unary("stablehlo.reshape", vector, scalar_type(element))
        return self.unary("stablehlo.reshape", self.slice(vector, index, index + 1),
                          scalar_type(element))

    def reduce_all(self, x: ir.Value, combiner: str, init: float) -> ir.Value:
        """Reduce every dimension of ``x`` with an elementwise ``combiner`` to a rank-0 value
        (floats, or i32 exponents with an integer ``init``)."""
        element = element_type(x)
        scalar = scalar_type(element)
        rank = len(ir.RankedTensorType(x.type).shape)
        start = (self.int_scalar(int(init)) if element == self.types.i32
                 else self.splat(init, scalar))
        reduce = self.op("stablehlo.reduce", [x, start], [scalar],
                         {"dimensions": ir.DenseI64ArrayAttr.get(list(range(rank)))}, regions=1)
        block = reduce.regions[0].blocks.append(scalar, scalar)
        inner = Emitter(ir.InsertionPoint(block), self.loc, types=self.types)
        combined = inner.binary(combiner, block.arguments[0], block.arguments[1])
        inner.op("stablehlo.return", [combined], [])
        return reduce.results[0]
