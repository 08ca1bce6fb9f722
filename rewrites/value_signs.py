"""Which values of the original program are never positive, read from the ops that make them.

A nonlinear op runs on the unscaled value and its result is stored at scale 1; with f16 data
that holds ``exp(x)`` only up to x = 11 (65504). Most exps in a step cannot get there: a
softmax's ``exp(x - max(x))`` and the exact GELU's derivative ``exp(-z^2)`` are at most 1,
because their operand is never positive. The others have their largest magnitude measured
(``rule_impls.rule_nonlinear``). The analysis is syntactic and conservative: a value it
cannot place (an argument, a loop carry, an op it does not know) has no known sign.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import defining_op
from scalify_hlo.rewrites.op_table import Trait, ops_with

_LAYOUT = ops_with(Trait.LAYOUT_ONLY)
# Ops whose result is >= 0 for any operand.
_NONNEGATIVE_OPS = frozenset({
    "stablehlo.abs", "chlo.square", "stablehlo.exponential", "stablehlo.sqrt",
    "stablehlo.rsqrt", "stablehlo.logistic"})
_READ_OPERANDS = frozenset({
    "stablehlo.negate", "stablehlo.add", "stablehlo.select", "stablehlo.multiply",
    "stablehlo.divide", "stablehlo.minimum", "stablehlo.maximum", "stablehlo.subtract"})
_DEPTH = 24  # a chain this long is no pattern the analysis is for
# Sign classes: a bit each for "every element >= 0" and "every element <= 0" (NaN aside).
_NONNEGATIVE, _NONPOSITIVE = 1, 2


def is_nonpositive(value: ir.Value) -> bool:
    """Whether every element of ``value`` is <= 0 (or NaN) by construction."""
    return bool(_signs(value, _DEPTH, {}) & _NONPOSITIVE)


def is_nonnegative(value: ir.Value) -> bool:
    """Whether every element of ``value`` is >= 0 (or NaN) by construction."""
    return bool(_signs(value, _DEPTH, {}) & _NONNEGATIVE)


def _signs(value: ir.Value, depth: int, memo: dict[ir.Value, int]) -> int:
    """The sign classes ``value`` is known to be in, each value classified once (``memo``):
    a product reads both classes of each operand, which without it is exponential in the
    depth of a chain of products (40 of them under an exp took 63 s)."""
    found = memo.get(value)
    if found is None:
        memo[value] = 0  # a cycle through a region reads as unknown
        found = memo[value] = _classify(value, depth, memo)
    return found


def _classify(value: ir.Value, depth: int, memo: dict[ir.Value, int]) -> int:
    constant = splat_constant_value(value)
    if constant is not None:
        return (_NONNEGATIVE if constant >= 0 else 0) | (_NONPOSITIVE if constant <= 0 else 0)
    op = defining_op(value)
    if op is None or depth == 0:
        return 0
    name, operands, depth = op.name, list(op.operands), depth - 1
    if name in _NONNEGATIVE_OPS or (name == "stablehlo.multiply"
                                    and operands[0] == operands[1]):
        return _NONNEGATIVE
    if name not in _READ_OPERANDS and name not in _LAYOUT:
        return 0
    signs = [_signs(v, depth, memo) for v in operands[-2:]]
    if name in _LAYOUT:
        return signs[-1] if len(operands) == 1 else 0
    if name == "stablehlo.negate":
        return ((signs[0] & _NONNEGATIVE) << 1) | ((signs[0] & _NONPOSITIVE) >> 1)
    if name in ("stablehlo.add", "stablehlo.select"):
        return signs[0] & signs[1]
    if name in ("stablehlo.multiply", "stablehlo.divide"):
        a, b = signs
        same = (a & b) != 0  # both >= 0 or both <= 0
        crossed = bool(a & _NONNEGATIVE and b & _NONPOSITIVE) or bool(
            a & _NONPOSITIVE and b & _NONNEGATIVE)
        return (_NONNEGATIVE if same else 0) | (_NONPOSITIVE if crossed else 0)
    if name in ("stablehlo.minimum", "stablehlo.maximum"):
        anyone, everyone = signs[0] | signs[1], signs[0] & signs[1]
        if name == "stablehlo.minimum":
            return (anyone & _NONPOSITIVE) | (everyone & _NONNEGATIVE)
        return (anyone & _NONNEGATIVE) | (everyone & _NONPOSITIVE)
    if name == "stablehlo.subtract":
        if _below_its_maximum(*operands):
            return _NONPOSITIVE
        a, b = signs
        return ((_NONPOSITIVE if a & _NONPOSITIVE and b & _NONNEGATIVE else 0)
                | (_NONNEGATIVE if a & _NONNEGATIVE and b & _NONPOSITIVE else 0))
    return 0


def _below_its_maximum(x: ir.Value, subtrahend: ir.Value) -> bool:
    """Whether ``subtrahend`` is ``x``'s maximum over some axes, broadcast back along them (a
    softmax's ``x - max(x)``): whatever the reduction's initial value, the difference is <= 0.
    Each kept axis must come back in its place (a maximum broadcast along other axes compares
    elements with other rows' maxima)."""
    traced = _reduce_dims(subtrahend, _DEPTH)
    if traced is None:
        return False
    sources, reduce = traced
    if reduce.operands[0] != x or len(reduce.operands) != 2:
        return False
    body = reduce.regions[0].blocks[0].operations
    if len(body) != 2 or body[0].operation.name != "stablehlo.maximum" or not all(
            isinstance(v.owner, ir.Block) for v in body[0].operation.operands):
        return False
    return keeps_rows(sources, list(ir.RankedTensorType(x.type).shape), reduce)


def keeps_rows(sources: list[int | None], shape: list[int], reduce: ir.Operation) -> bool:
    """Whether a reduction's result, read by a value of ``shape`` along ``sources`` (per
    axis, the result's axis it reads, as ``reduce_dims`` gives them), meets each element of
    the reduction's operand (of ``shape`` too) with that element's own row: each kept axis
    in its place, constant along the reduced ones."""
    reduced = set(ir.DenseI64ArrayAttr(reduce.attributes["dimensions"]))
    kept = [d for d in range(len(shape)) if d not in reduced]
    if len(sources) != len(shape):
        return False
    for axis, source in enumerate(sources):
        if shape[axis] == 1:
            continue
        if axis in reduced and source is not None:
            return False
        if axis not in reduced and (source is None or kept[source] != axis):
            return False
    return True


def _reduce_dims(value: ir.Value, depth: int) -> tuple[list[int | None], ir.Operation] | None:
    """For each axis of ``value``, made from a reduction's result by broadcasts, reshapes
    that add or drop unit axes, converts and maxima with anything (which only raise it),
    the result's axis it reads (None: an axis it is constant along); with the reduction.
    None where it is made otherwise."""
    op = defining_op(value)
    if op is None or depth == 0:
        return None
    shape = ir.RankedTensorType(value.type).shape
    if op.name == "stablehlo.reduce":
        return list(range(len(shape))), op
    if op.name == "stablehlo.maximum":  # max(m, c) >= m: jnp.max's ``initial`` (-inf)
        for operand in op.operands:
            traced = _reduce_dims(operand, depth - 1)
            if traced is not None:
                return traced
        return None
    if op.name not in ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"):
        return None
    source = op.operands[0]
    traced = _reduce_dims(source, depth - 1)
    if traced is None:
        return None
    if op.name == "stablehlo.convert":
        return traced
    inner, reduce = traced
    sources = layout_axes(op, inner)
    return None if sources is None else (sources, reduce)


def layout_axes(op: ir.Operation, inner: list[int | None]) -> list[int | None] | None:
    """For each axis of the result of ``op`` (a ``broadcast_in_dim``, or a ``reshape`` that
    adds or drops unit axes), what its operand's axis reads (``inner``, per operand axis; None
    along an axis it is constant on); None for a reshape that merges or splits axes."""
    source_shape = ir.RankedTensorType(op.operands[0].type).shape
    shape = ir.RankedTensorType(op.results[0].type).shape
    sources: list[int | None] = [None] * len(shape)
    if op.name == "stablehlo.broadcast_in_dim":
        for axis, to in enumerate(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])):
            if source_shape[axis] == shape[to]:
                sources[to] = inner[axis]
        return sources
    non_unit_in = [a for a, n in enumerate(source_shape) if n != 1]
    non_unit_out = [a for a, n in enumerate(shape) if n != 1]
    if [source_shape[a] for a in non_unit_in] != [shape[a] for a in non_unit_out]:
        return None
    for a, b in zip(non_unit_in, non_unit_out, strict=True):
        sources[b] = inner[a]
    return sources
