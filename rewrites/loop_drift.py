"""Loop carries whose data a constant factor moves on every trip: rescaled once per trip.

A product with a constant keeps the constant's power of two in the scale and the rest in
the data (0.99 is 1.98 * 2^-1, ``rule_constant``). Once, that is harmless. In a loop that
carries ``y = 0.99 * y`` it multiplies the data by 1.98 on every trip, past f32's range
in 130 trips and f16's in 17: 300 trips of it (``fori_loop``) came back NaN, in f32 mode
too, where the rewrite is otherwise exact, and 100 trips of ``y * 0.9`` came back inf in
f16. (A momentum whose gradient is zero decays the same way in a ``fori_loop`` of steps.)

A walk over each ``while`` body gives every value on a path from a carried block argument
the base-2 logarithm of the factor its data has picked up on the way: a product or
quotient with a splat constant adds the constant's data (the constant over the power of
two its scale takes), a product of two such values adds both, a sum or pick of two such
values take the larger, a sum with or a pick of another value keeps it, and ops that only
move, retype or negate data keep it. A product with a loop-invariant value of unknown data
(an argument's decay, ``exp(-t / 100)`` of an invariant ``t`` computed in the body) adds
half a binade, as far as a runtime scale leaves its data from 1: 40 trips of ``y * s`` with
``s = 1.4`` moved the data by up to 2^20, inf in f16. The other addend bounds the drift
only where the sum's scale follows it: not under ``common-scale=first``, where it follows
the first operand, nor where the addend is a zero fill, whose scale is any
(``0.9 * m + 0``, a momentum whose gradient is masked off, came back NaN in f32 mode after
300 trips). The walk ends at anything else: a product with a value from the data, a dot, a
nonlinear op. A carry that comes back with a factor other than 1 drifts; unless the loop's
trip count is known and small enough to keep the factor within the data type's margin (a
scan over a model's layers), the op that makes its returned value is rescaled from its
amax, once per trip.
"""

from __future__ import annotations

import math

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import defining_op, is_scalable_type, ops_named, terminator
from scalify_hlo.rewrites.loop_invariants import invariant_arguments, invariant_body_ops
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.program_constants import program_splat
from scalify_hlo.rewrites.scope import RESCALE_ATTR
from scalify_hlo.scale import pow2_exponent_of_magnitudes

# Ops whose float result has the data of their float operand: the factor passes unchanged.
_KEEPS = ops_with(Trait.LAYOUT_ONLY) | {"stablehlo.negate"}
_SUMS = frozenset({"stablehlo.add", "stablehlo.subtract"})
# Pure ops whose results are loop-invariant where their operands are (``exp(-t / 100)``
# computed in the body from an invariant ``t``).
_INVARIANT_OPS = ops_with(Trait.HOISTABLE) | ops_with(Trait.LAYOUT_ONLY) | {
    "stablehlo.constant", "stablehlo.iota"}
# log2 of the data drift a loop may accumulate over its known trips without a rescale: f16
# data holds 2^-14 .. 2^16 at full precision; the f32-range types far more.
MARGIN_BITS = {"f16": 8.0, "bf16": 64.0, "f32": 64.0}
_TINY = 1e-9  # a factor of exactly 1 (a power-of-two constant) leaves log2 at 0
# log2 of the data factor of a product with a loop-invariant value of unknown data: a
# runtime scale rounds to the nearest power of two, leaving the data within 2^(+-1/2).
UNKNOWN_BITS = 0.5


def _constant_factor(value: ir.Value, data_dtype: str, unit_shifts: bool) -> float | None:
    """log2 of the data of a splat constant, as ``rule_constant`` splits it; None for any
    other value (and for 0, inf and NaN, which do not move data by a factor)."""
    constant = program_splat(value)
    if constant is None or constant == 0 or not math.isfinite(constant):
        return None
    magnitude = abs(constant)
    exp = pow2_exponent_of_magnitudes(magnitude, magnitude, data_dtype) if unit_shifts else 0
    return math.log2(magnitude) - exp


def _larger(a: float, b: float) -> float:
    return a if abs(a) >= abs(b) else b


def _factor(op: ir.Operation, factors: dict[ir.Value, float], invariant: set[ir.Value],
            data_dtype: str, unit_shifts: bool) -> float | None:
    """log2 of the data factor of ``op``'s result, from its operands' (``factors``: the
    values on a path from a carried argument; ``invariant``: the body's loop-invariant
    values); None where the walk ends at ``op``."""
    name, operands = op.name, list(op.operands)
    on_path = [factors.get(v) for v in operands]
    if name in _KEEPS:
        return on_path[0]
    if name == "stablehlo.select" or name in _SUMS:
        found = [f for f in (on_path[1:] if name == "stablehlo.select" else on_path)
                 if f is not None]
        return _larger(*found) if len(found) == 2 else (found[0] if found else None)
    if name not in ("stablehlo.multiply", "stablehlo.divide"):
        return None
    first, second = on_path
    if first is not None and second is not None:
        return first + second if name == "stablehlo.multiply" else first - second
    if first is not None:
        constant = _other_factor(operands[1], invariant, data_dtype, unit_shifts)
        if constant is None:
            return None
        return first + constant if name == "stablehlo.multiply" else first - constant
    if second is not None and name == "stablehlo.multiply":
        constant = _other_factor(operands[0], invariant, data_dtype, unit_shifts)
        return None if constant is None else second + constant
    return None


def _other_factor(value: ir.Value, invariant: set[ir.Value], data_dtype: str,
                  unit_shifts: bool) -> float | None:
    """log2 of the data factor a product with ``value`` adds on every trip: a splat
    constant's (``_constant_factor``), or for a loop-invariant value of unknown data (a
    decay passed in, ``exp(-t / 100)`` of an invariant ``t``) ``UNKNOWN_BITS``: its data
    rounds to within half a binade of 1, so only the number of trips bounds the drift; None
    for any other value."""
    constant = _constant_factor(value, data_dtype, unit_shifts)
    if constant is not None:
        return constant
    return UNKNOWN_BITS if value in invariant else None


def static_trip_count(loop: ir.Operation) -> int | None:
    """The trip count of a counted loop (``i < N`` with ``i`` carried from a constant and
    stepped by 1, as JAX lowers ``scan`` and ``fori_loop``); None for any other loop."""
    cond = loop.regions[0].blocks[0]
    test = defining_op(terminator(cond).operands[0])
    if test is None or test.name != "stablehlo.compare":
        return None
    if str(test.attributes["comparison_direction"]) != "#stablehlo<comparison_direction LT>":
        return None
    counter, bound = test.operands
    if not isinstance(counter.owner, ir.Block) or counter.owner != cond:
        return None
    index = ir.BlockArgument(counter).arg_number
    limit = program_splat(bound)
    start = program_splat(loop.operands[index])
    body = loop.regions[1].blocks[0]
    step = defining_op(terminator(body).operands[index])
    if limit is None or start is None or step is None:
        return None
    if step.name != "stablehlo.add" or step.operands[0] != body.arguments[index] or \
            splat_constant_value(step.operands[1]) != 1:
        return None
    return max(int(limit - start), 0)


def drifting_returns(loop: ir.Operation, data_dtype: str,
                     unit_shifts: bool = True) -> list[ir.Operation]:
    """The ops of ``loop``'s body that make a float carry's returned value whose data a
    constant factor moves on every trip by more than the data type's margin allows."""
    body = loop.regions[1].blocks[0]
    returned = list(terminator(body).operands)
    factors: dict[ir.Value, float] = {
        arg: 0.0 for arg, out in zip(body.arguments, returned, strict=True)
        if out != arg and is_scalable_type(arg.type)}
    if not factors:
        return []
    invariant = set(invariant_arguments(loop)) | {
        result for op in invariant_body_ops(loop, lambda op: op.name in _INVARIANT_OPS)
        for result in op.results}
    for op in list(body.operations)[:-1]:
        op = op.operation
        if not any(v in factors for v in op.operands):
            continue
        factor = _factor(op, factors, invariant, data_dtype, unit_shifts)
        if factor is not None:
            for result in op.results:
                factors[result] = factor
    trips = static_trip_count(loop)
    margin = MARGIN_BITS.get(data_dtype, MARGIN_BITS["f16"])
    marked: dict[ir.Operation, None] = {}
    for arg, out in zip(body.arguments, returned, strict=True):
        factor = factors.get(out) if arg in factors else None
        maker = defining_op(out)
        if factor is None or abs(factor) <= _TINY or maker is None:
            continue
        if trips is not None and trips * abs(factor) <= margin:
            continue
        marked[maker] = None
    return list(marked)


def mark_drifting_carries(func: ir.Operation, data_dtype: str, unit_shifts: bool = True) -> int:
    """Mark the ops that make drifting carries of every loop of ``func`` (see the module
    docstring) to rescale their results (amax, nearest); returns how many were marked."""
    how = ir.StringAttr.get("amax:nearest")
    count = 0
    for loop in ops_named(func, "stablehlo.while"):
        for op in drifting_returns(loop, data_dtype, unit_shifts):
            if RESCALE_ATTR not in op.attributes:
                op.attributes[RESCALE_ATTR] = how
                count += 1
    return count
