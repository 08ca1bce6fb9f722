"""Which values of the original program take only a few values, all known at rewrite time.

An attention mask's bias (``where(mask, 0, -1e9)``, ``(1 - mask) * finfo(f32).min``, a
causal mask folded into a dense constant) is a tensor of zeros and sentinels whatever the
mask holds at run time: the predicate only picks among constants. The analysis follows
constants through the ops that only move or convert them, through selects (either branch)
and through elementwise arithmetic between two such values; a boolean converted to float is
0 or 1. It is syntactic and conservative: a value it cannot place has no known set.

Where the values are not known, their *step* may be: a float made from integers is an
integer, so HF's ``(1 - mask.astype(f32)) * finfo(f32).min`` of an int32 mask is a multiple
of ``finfo(f32).min`` whatever the mask holds: 0 or a sentinel (``step``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import distinct_values
from scalify_hlo.rewrites.emitter import defining_op
from scalify_hlo.rewrites.program_constants import invariant_operand

_LIMIT = 4  # more distinct values than this is no mask: the set is unknown
_LARGEST_READ = 1 << 22  # elements of a dense constant read to find its values
_DEPTH = 16
_SAME_VALUES = frozenset({
    "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose",
    "stablehlo.slice", "stablehlo.reverse", "stablehlo.convert"})
_BINARY: dict[str, Callable[[float, float], float]] = {
    "stablehlo.add": lambda a, b: a + b,
    "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b,
    "stablehlo.maximum": max,
    "stablehlo.minimum": min,
}

ValueSet = frozenset[float]


def value_set(value: ir.Value, memo: dict[ir.Value, ValueSet | None]) -> ValueSet | None:
    """The values every element of ``value`` is one of (at most ``_LIMIT``), None where
    unknown; ``memo`` keeps each value's answer for the rest of a rewrite."""
    return _walked(value, _DEPTH, memo, _classify)


def _walked(value: ir.Value, depth: int, memo: dict[ir.Value, Any],
            classify: Callable[[ir.Operation, ir.Value, Callable[[ir.Value], Any]], Any]) -> Any:
    """What ``classify`` finds for ``value`` (None: unknown), each value classified once:
    a loop's invariant carry as its operand, ``classify`` given its op and a way to read
    an operand's answer one level deeper. A cycle through a loop reads as unknown."""
    if value in memo:
        return memo[value]
    memo[value] = None
    found = None
    if depth > 0:
        op = defining_op(value)

        def recurse(operand: ir.Value) -> Any:
            return _walked(operand, depth - 1, memo, classify)

        if op is not None:
            found = classify(op, value, recurse)
        else:
            carried = invariant_operand(value)
            found = None if carried is None else recurse(carried)
    memo[value] = found
    return found


def _classify(op: ir.Operation, value: ir.Value,
              recurse: Callable[[ir.Value], ValueSet | None]) -> ValueSet | None:
    name, operands = op.name, list(op.operands)
    if name == "stablehlo.constant":
        return _constant_values(op)
    if name == "stablehlo.convert" and _is_boolean(operands[0]):
        return frozenset({0.0, 1.0})
    if name in _SAME_VALUES:
        return _rounded(recurse(operands[0]), value)
    if name == "stablehlo.negate":
        inner = recurse(operands[0])
        return None if inner is None else frozenset(-v for v in inner)
    if name == "stablehlo.select":
        branches = [recurse(v) for v in operands[1:]]
        return None if None in branches else _bounded(branches[0] | branches[1])
    combine = _BINARY.get(name)
    if combine is None:
        return None
    a, b = (recurse(v) for v in operands)
    if a is None or b is None:
        return None
    return _rounded(_bounded(frozenset(combine(x, y) for x in a for y in b)), value)


def _constant_values(op: ir.Operation) -> ValueSet | None:
    try:
        t = ir.ShapedType(op.results[0].type)
        if not t.has_static_shape or int(np.prod(t.shape)) > _LARGEST_READ:
            return None
        values = np.unique(distinct_values(op.attributes["value"]))
    except (KeyError, TypeError, ValueError):  # complex, dense_resource, opaque
        return None
    return _bounded(frozenset(float(v) for v in values)) if values.size <= _LIMIT else None


def _is_boolean(value: ir.Value) -> bool:
    element = ir.ShapedType(value.type).element_type
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1


def _bounded(values: ValueSet) -> ValueSet | None:
    return values if len(values) <= _LIMIT else None


def _rounded(values: ValueSet | None, result: ir.Value) -> ValueSet | None:
    """``values`` as the result's float type holds them (f32 arithmetic rounds: 1e9 + 1 is
    1e9); integers and other types as they are."""
    if values is None:
        return None
    element = str(ir.ShapedType(result.type).element_type)
    dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
             "f64": np.float64}.get(element)
    if dtype is None:
        return values
    with np.errstate(over="ignore", invalid="ignore"):
        return _bounded(frozenset(float(dtype(v)) for v in values))


def step(value: ir.Value, memo: dict[ir.Value, float | None]) -> float | None:
    """The largest known q > 0 such that every element of ``value`` is an integer multiple
    of q (so 0 or at least q in magnitude): 1 for a float made from integers, |c| for a
    constant c, inf for zeros; None where unknown."""
    return _walked(value, _DEPTH, memo, _classify_step)


def _classify_step(op: ir.Operation, value: ir.Value,
                   recurse: Callable[[ir.Value], float | None]) -> float | None:
    name, operands = op.name, list(op.operands)
    if name == "stablehlo.constant":
        values = _constant_values(op)
        return None if values is None else _step_of(values)
    if name == "stablehlo.convert":
        source = ir.ShapedType(operands[0].type).element_type
        if isinstance(source, ir.IntegerType):
            return 1.0
        return recurse(operands[0]) if _same_float(source, value) else None
    if name in _SAME_VALUES or name == "stablehlo.negate":
        return recurse(operands[0])
    if name == "stablehlo.multiply":
        a, b = (recurse(v) for v in operands)
        return None if a is None or b is None else a * b
    if name in _BINARY or name == "stablehlo.select":
        steps = [recurse(v) for v in operands[-2:]]
        return None if None in steps else _common_step(*steps)
    return None


def _step_of(values: ValueSet) -> float | None:
    """The largest q of which every value is an integer multiple: its smallest nonzero
    magnitude when that divides the others, 1 for integers, inf for zeros alone."""
    nonzero = [abs(v) for v in values if v != 0.0]
    if not nonzero:
        return math.inf
    if any(math.isinf(v) or math.isnan(v) for v in nonzero):
        return None
    smallest = min(nonzero)
    if all((v / smallest).is_integer() for v in nonzero):
        return smallest
    return 1.0 if all(v.is_integer() for v in nonzero) else None


def _common_step(a: float, b: float) -> float | None:
    """The step of a sum, difference, max, min or select of multiples of a and of b: the
    smaller when it divides the larger (inf, zeros, divides everything)."""
    small, large = min(a, b), max(a, b)
    if math.isinf(large) or (large / small).is_integer():
        return small
    return None


def _same_float(source: ir.Type, result: ir.Value) -> bool:
    """A float-to-float convert that keeps every value (f32 to f32, or to a wider type)."""
    widths = {"bf16": 16, "f16": 16, "f32": 32, "f64": 64}
    target = str(ir.ShapedType(result.type).element_type)
    return str(source) == target or (str(source) in ("f16", "bf16")
                                     and widths.get(target, 0) >= 32)
