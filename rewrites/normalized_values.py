"""Which products of the original program are normalized values, bounded whatever their
operand's scale: a layer norm's or an RMS norm's ``a * rsqrt(c * sum(a^2) + eps)``.

With f16 data, the product of a wide (square-dtype) value narrows to f16 by its amax: its
static scale says nothing about where its data sits (``walk._retype_results``). A norm's
output is the exception. Where the sum runs over the row that holds ``a_i``,
``a_i^2 <= sum(a^2)``, so ``|a_i * rsqrt(c * sum(a^2) + eps)| <= 1 / sqrt(c)`` for any
``c > 0`` and ``eps >= 0`` (``sqrt(n)`` for a mean over ``n`` elements), and its RMS over
the row is at most 1: narrowed at the static scale 1 it needs no statistic, and what
follows it (the norm's own scale and bias, the next dot's operand) starts from a static
scale. Measured on the GPT steps of ``testdata/models.py`` (d 256), default policy: H100
fusions 263 -> 245 (1 layer) and 454 -> 422 (2 layers); XLA:CPU, 2 layers, optimized HLO
instructions 53750 -> 52580.

Only with current statistics. Under delayed statistics (the GPU targets' policy) a norm's
narrowing applies the exponent the call before measured, and its amax joins the step's
last group of statistics; without it XLA:GPU recomputes the norm inside the backward pass's
kernels, more of them: H100 policy, 92 -> 100 fusions (1 layer), 147 -> 154 (2 layers),
872 -> 903 (GPT-2-small shape).

The match is structural, on the ops JAX emits for ``(x - m) * rsqrt(mean((x - m)^2) + eps)``
(and ``x * rsqrt(mean(x^2) + eps)``): ``a`` and the squared value are the same value or the
same ops on the same operands (JAX computes ``x - m`` twice), up to converts; the sum is a
reduce that adds from 0; between it and the rsqrt only products and quotients by positive
constants, adds of non-negative constants, converts, and reshapes and broadcasts that keep
each row's sum beside that row's elements. A variance computed as ``mean(x^2) - m^2``
(Flax's fast variance) is not matched: rounding can make it far smaller than the
elements' spread.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import defining_op, ops_named
from scalify_hlo.rewrites.moment_values import through_converts
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.regions import combiner
from scalify_hlo.rewrites.value_signs import keeps_rows, layout_axes

_CONVERT = "stablehlo.convert"
_LAYOUT = frozenset({"stablehlo.reshape", "stablehlo.broadcast_in_dim"})
_SAME_DEPTH = 4  # levels of ops compared when two values are computed twice
# Ops that give the same result for the same operands and attributes: pure elementwise
# arithmetic and layout (not an rng or a custom call).
_PURE = ops_with(Trait.HOISTABLE) | _LAYOUT | {"stablehlo.transpose", _CONVERT}


def normalized_products(func: ir.Operation) -> dict[ir.Operation, float]:
    """Each ``multiply`` of ``func`` whose result is a normalized value, with the bound on
    its magnitude (``1 / sqrt(c)``)."""
    found: dict[ir.Operation, float] = {}
    for op in ops_named(func, "stablehlo.multiply"):
        first, second = op.operands[0], op.operands[1]
        bound = _norm_bound(first, second)
        if bound is None:
            bound = _norm_bound(second, first)
        if bound is not None:
            found[op] = bound
    return found


def _norm_bound(value: ir.Value, factor: ir.Value) -> float | None:
    """``1 / sqrt(c)`` where ``factor`` is ``rsqrt(c * sum(value^2) + eps)`` over the rows
    of ``value``, broadcast back; None where it is not."""
    rsqrt, outer = _through_layout(factor)
    if rsqrt is None or rsqrt.name != "stablehlo.rsqrt":
        return None
    chain = _sum_of_squares(rsqrt.operands[0])
    if chain is None:
        return None
    reduce, coefficient, inner = chain
    squared = _squared_operand(reduce.operands[0])
    if squared is None or not _same_value(through_converts(squared), through_converts(value),
                                          _SAME_DEPTH):
        return None
    if not _meets_own_rows(value, reduce, [*reversed(inner), *reversed(outer)]):
        return None
    return coefficient ** -0.5


def _meets_own_rows(value: ir.Value, reduce: ir.Operation, layout: list[ir.Operation]) -> bool:
    """Whether ``reduce``'s result, through the ``layout`` ops (innermost first), reaches each
    element of ``value`` (the reduction's operand, up to converts) with its own row."""
    shape, reduced_shape = _shape(value), _shape(reduce.results[0])
    if shape is None or reduced_shape is None:
        return False
    sources: list[int | None] | None = list(range(len(reduced_shape)))
    for op in layout:
        if sources is None or _shape(op.operands[0]) is None or _shape(op.results[0]) is None:
            return False
        sources = layout_axes(op, sources)
    return sources is not None and keeps_rows(sources, shape, reduce)


def _shape(value: ir.Value) -> list[int] | None:
    """The static shape of a ranked tensor, None for any other type."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    return list(t.shape)


def _through_layout(value: ir.Value) -> tuple[ir.Operation | None, list[ir.Operation]]:
    """The op below the reshapes, broadcasts and converts that make ``value``, and those
    layout ops (outermost first)."""
    layout: list[ir.Operation] = []
    op = defining_op(value)
    while op is not None and (op.name in _LAYOUT or op.name == _CONVERT):
        if op.name in _LAYOUT:
            layout.append(op)
        op = defining_op(op.operands[0])
    return op, layout


def _sum_of_squares(value: ir.Value) -> tuple[ir.Operation, float, list[ir.Operation]] | None:
    """The reduce under ``c * sum + eps`` (``value``), ``c``, and the layout ops between
    the reduce and ``value`` (outermost first); None where ``value`` is anything else."""
    coefficient = 1.0
    layout: list[ir.Operation] = []
    op = defining_op(value)
    while op is not None:
        name = op.name
        if name in _LAYOUT:
            layout.append(op)
            op = defining_op(op.operands[0])
        elif name == _CONVERT:
            op = defining_op(op.operands[0])
        elif name in ("stablehlo.multiply", "stablehlo.divide", "stablehlo.add"):
            step = _constant_step(op)
            if step is None:
                return None
            operand, factor = step
            coefficient *= factor
            op = defining_op(operand)
        elif name == "stablehlo.reduce":
            if _is_sum(op) and coefficient > 0.0:
                return op, coefficient, layout
            return None
        else:
            return None
    return None


def _constant_step(op: ir.Operation) -> tuple[ir.Value, float] | None:
    """(the runtime operand, the factor it takes) of ``v * k`` or ``v / k`` with k > 0, or
    of ``v + eps`` with eps >= 0 (factor 1); None for any other binary op."""
    first, second = op.operands[0], op.operands[1]
    if op.name == "stablehlo.divide":
        k = splat_constant_value(second)
        return (first, 1.0 / k) if k is not None and k > 0.0 else None
    for operand, other in ((first, second), (second, first)):
        k = splat_constant_value(other)
        if k is None:
            continue
        if op.name == "stablehlo.multiply":
            return (operand, k) if k > 0.0 else None
        return (operand, 1.0) if k >= 0.0 else None
    return None


def _is_sum(reduce: ir.Operation) -> bool:
    return (len(reduce.operands) == 2 and len(reduce.results) == 1
            and combiner(reduce) == "stablehlo.add"
            and splat_constant_value(reduce.operands[1]) == 0.0)


def _squared_operand(value: ir.Value) -> ir.Value | None:
    """``a`` of ``square(a)`` or ``a * a`` (through converts)."""
    op = defining_op(through_converts(value))
    if op is None:
        return None
    if op.name == "chlo.square":
        return op.operands[0]
    if op.name == "stablehlo.multiply" and _same_value(op.operands[0], op.operands[1],
                                                       _SAME_DEPTH):
        return op.operands[0]
    return None


def _same_value(a: ir.Value, b: ir.Value, depth: int) -> bool:
    """Whether ``a`` and ``b`` are one value, or the results of the same pure op on the same
    operands (up to ``depth`` levels): JAX computes ``x - mean`` once per use."""
    if a == b:
        return True
    if depth == 0:
        return False
    op_a, op_b = defining_op(a), defining_op(b)
    if op_a is None or op_b is None or op_a.name != op_b.name or op_a.name not in _PURE:
        return False
    if len(op_a.results) != 1 or a.type != b.type:
        return False
    if len(op_a.operands) != len(op_b.operands) or _attributes(op_a) != _attributes(op_b):
        return False
    return all(_same_value(x, y, depth - 1)
               for x, y in zip(op_a.operands, op_b.operands, strict=True))


def _attributes(op: ir.Operation) -> dict[str, str]:
    attributes = op.attributes
    return {name: str(attributes[name]) for name in attributes}
