"""Which values of the original program are scalars, and so keep f32 data with 16-bit data.

A step's rank-0 floats are its schedules and corrections: Adam's ``1 - 0.999^t``, a warmup's
``step / 1000``, a loss and the norms it is clipped by. They cost nothing to hold in f32,
and 16-bit data breaks them: bf16 rounds 0.999 to 1.0, so Adam's second-moment correction
was ``1 - 1 = 0`` and an update applied outside the gradient's function (optax's ``update``
jitted on its own, Flax's ``apply_gradients``) came back 0 where the original moves every
weight by the learning rate; f16 holds 0.999 as 0.99902, 2.3% off the correction. So every
rank-0 float the step computes, takes or returns holds f32 data, as the original computes
it, and an op that reads or makes one and makes no float tensor computes in f32
(``ScalifyState.op_dtype``: a full reduction sums in f32). An op that makes a float tensor
from one (its broadcast) reads it converted to the data type, so the tensor's kernels stay
16-bit.

The values are those of the blocks scalify walks: the function's and those of its loops and
branches, whose block arguments and results must agree with what they carry (all rank-0
values are in the class, so they do). A reducer's region is not walked: its arguments are
the reduction's element type.

A scalar made by a nonlinear op (``x * exp(-t / 50)``, ``x * 0.98 ** t``,
``x * sigmoid(-t / 50)``), or by products, quotients, sums, differences and picks of one,
can sit anywhere in f32's range: 4e-9 at t = 1000, which a raw convert to f16 makes 0.
So is a pick beside a nonzero constant (``max(norm, 1e-6)``), which an f16 step's f32 op
makes at the midpoint of the two scales, its data half their spread from 1. Those alone are
read rescaled by their amax where a 16-bit op reads them (``unbounded_scalars``): every
rank-0 value read so made runtime scales of the scalars that clips and guards compare at
static scales.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Types, terminator
from scalify_hlo.rewrites.op_table import (
    CONTROL_FLOW_OPS,
    Family,
    Trait,
    has_trait,
    ops_in_family,
)
from scalify_hlo.rewrites.program_constants import program_constant, program_splat


def _is_scalar(t: ir.Type, types: Types) -> bool:
    return types.is_scalable(t) and ir.RankedTensorType(t).rank == 0


def computes_in_f32(op: ir.Operation, types: Types) -> bool:
    """Whether an op that touches a scalar computes in f32: it makes no float tensor and is
    not a loop or branch (whose values keep their own types: a scan's carries)."""
    return op.name not in CONTROL_FLOW_OPS and all(
        not types.is_scalable(value.type) or ir.RankedTensorType(value.type).rank == 0
        for value in op.results)


def scalar_values(func: ir.Operation, types: Types) -> set[ir.Value]:
    """The rank-0 float values of ``func``: its arguments, the results of its ops, and
    those of the blocks of its loops and branches (their arguments included)."""
    found: set[ir.Value] = set()
    pending = [block for region in func.regions for block in region.blocks]
    while pending:
        block = pending.pop()
        found.update(value for value in block.arguments if _is_scalar(value.type, types))
        for op in block.operations:
            op = op.operation
            found.update(value for value in op.results if _is_scalar(value.type, types))
            if op.name in CONTROL_FLOW_OPS:
                pending += [inner for region in op.regions for inner in region.blocks]
    return found


# Ops whose rank-0 result can leave 16-bit range from an operand inside it: the nonlinear
# ops, whose results are stored at a scale chosen without their values (exp(-20) is 2e-9,
# tanh(1e-9) 1e-9, log(1 + 1e-9) 1e-9), but those whose results keep their operand's range
# (floor, round) and those that make no data (bits, random numbers).
_UNBOUNDED_MAKERS = frozenset(
    name for name in ops_in_family(Family.NONLINEAR)
    if not has_trait(name, Trait.OPERAND_BOUNDED)
    and name not in ("stablehlo.bitcast_convert", "stablehlo.is_finite", "stablehlo.rng",
                     "stablehlo.rng_bit_generator"))
# The ops that carry such a result on: a product or quotient of one can be as far out, so
# can a sum (1 + exp(20)), a difference (1 - 0.999999 ** t is 1e-6 at t = 1) and a pick
# (max(exp(-t / 40), 1e-12), where(t > 5, exp(-t / 40), 1)).
_UNBOUNDED_CARRIERS = frozenset({"stablehlo.multiply", "stablehlo.divide", "stablehlo.negate",
                                 "stablehlo.abs", "stablehlo.convert", "stablehlo.reshape",
                                 "stablehlo.add", "stablehlo.subtract", "stablehlo.select",
                                 "stablehlo.maximum", "stablehlo.minimum"})
# Picks whose rank-0 result can leave 16-bit range beside a nonzero constant of the program:
# an f16 step's f32 pick of a runtime and a static scale takes their midpoint, where the data
# sits half their spread from 1 (``max(norm, 1e-6)`` of a norm near 2^19: data 2^19, and the
# reciprocal's 2^-19, converted raw, was an f16 subnormal, so ``x / max(norm, 1e-6)`` of x at
# 2^16 kept 2 bits).
_PICKS = frozenset({"stablehlo.maximum", "stablehlo.minimum", "stablehlo.select",
                    "stablehlo.clamp"})
# Ops whose results are what one of their regions returns.
_BRANCHES = frozenset(ops_in_family(Family.CASE))


def _pick_beside_a_constant(op: ir.Operation, scalars: set[ir.Value]) -> bool:
    """A pick among rank-0 floats of which some are nonzero constants and some are not."""
    if op.name not in _PICKS:
        return False
    picked = [value for value in op.operands if value in scalars]
    constant = [program_constant(value) is not None and program_splat(value) != 0.0
                for value in picked]
    return any(constant) and not all(constant)


def unbounded_scalars(func: ir.Operation, scalars: set[ir.Value]) -> set[ir.Value]:
    """The scalars (of ``scalar_values``) made by a nonlinear op that can take them out of
    16-bit range, by a carrier op that reads one, or returned by a branch of a ``case``
    that returns one there, in block order (an operand is defined before its user)."""
    found: set[ir.Value] = set()
    for region in func.regions:
        for block in region.blocks:
            _walk_unbounded(block, scalars, found)
    return found


def _walk_unbounded(block: ir.Block, scalars: set[ir.Value], found: set[ir.Value]) -> None:
    for op in block.operations:
        op = op.operation
        if op.name in CONTROL_FLOW_OPS:
            for region in op.regions:
                for inner in region.blocks:
                    _walk_unbounded(inner, scalars, found)
            if op.name in _BRANCHES:  # a result is what one of its branches returns
                returned = [terminator(region.blocks[0]).operands for region in op.regions]
                found.update(result for position, result in enumerate(op.results)
                             if result in scalars
                             and any(values[position] in found for values in returned))
            continue
        if len(op.results) != 1 or op.results[0] not in scalars:
            continue
        if op.name in _UNBOUNDED_MAKERS or _pick_beside_a_constant(op, scalars) or (
                op.name in _UNBOUNDED_CARRIERS
                and any(value in found for value in op.operands)):
            found.add(op.results[0])
