"""FP8 casts of a partitioned step made once: a tensor cast for several dots (a weight for its
forward and its backward dot) is read by all of them through one optimization_barrier.

Why: ``fp8-dots`` casts each dot's operands, and CSE leaves one convert where a weight is cast
twice in the same format; XLA:GPU then copies that convert into each reader's fusion. The
backward dot's copy depends on nothing computed in the step, and XLA:GPU's multi-output
fusion joins it to another kernel that reads the same weight: the weight's optimizer update,
which waits for the weight's gradient all-reduce. The backward pass below that layer then
waits for that all-reduce, and the all-reduces of the layers before it can neither overlap
the backward pass nor combine with it (2-layer GPT, data parallel on 8 H100s, default
policy: 7 all-reduces, 5 on one chain; see docs/how-it-works.md). Behind a barrier the cast
is one kernel that runs before the forward dot, which the update depends on, so XLA cannot
join them (the same step: 6 all-reduces, 4 on one chain, 10 more kernels).

Only casts of tensors the function is given are fenced: arguments read through elementwise,
layout and slicing ops, scale factors aside (a weight, or one layer's slice of stacked
weights). Those are what an optimizer update also reads. A cast of an activation has no
such reader, and fenced it would keep an FP8 copy alive from the forward to the backward
pass (fencing every shared cast of that step made 6 more kernels on top, for no fewer
all-reduces). One device has no all-reduce to wait for, and there the joined kernel is one
kernel fewer: single-device modules are left alone. The values stay the same.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.dtypes import FP8_FORMATS
from scalify_hlo.rewrites.emitter import (
    Emitter,
    defining_op,
    element_type,
    is_scalar_broadcast,
    ops_named,
)
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register
from scalify_hlo.symbols import partition_count

# Ops a given tensor keeps its role through on its way to a cast.
_GIVEN_THROUGH = (ops_with(Trait.ELEMENTWISE) | ops_with(Trait.LAYOUT_ONLY)
                  | {"stablehlo.dynamic_slice"})
_GIVEN_DEPTH = 64  # ops looked through before a tensor counts as computed


def _is_splat(value: ir.Value) -> bool:
    """A rank-0 value or a broadcast of one: a scale factor, a constant or an index."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        return False
    if t.rank == 0 or is_scalar_broadcast(value):
        return True
    op = defining_op(value)
    return op is not None and op.name == "stablehlo.constant"


def _is_given(value: ir.Value) -> bool:
    """Whether ``value`` is made from block arguments by elementwise, layout and slicing ops
    alone (splats aside), not computed by the function (a dot, a reduction)."""
    stack, looked = [value], 0
    while stack:
        op = defining_op(stack.pop())
        if op is None:  # a block argument
            continue
        looked += 1
        if op.name not in _GIVEN_THROUGH or looked > _GIVEN_DEPTH:
            return False
        stack.extend(v for v in op.operands if not _is_splat(v))
    return True


def _shared_fp8_cast(op: ir.Operation) -> bool:
    """A convert of a given tensor to an FP8 format whose result more than one op reads."""
    if len(op.results) != 1 or str(element_type(op.results[0])) not in FP8_FORMATS:
        return False
    readers = {use.owner.operation for use in op.results[0].uses}
    return len(readers) > 1 and _is_given(op.operands[0])


def fence_shared_fp8_casts(module: ir.Module) -> int:
    """Put each FP8 cast of a given tensor that several ops read behind its own
    optimization_barrier, in a module partitioned over several devices; returns how many
    were fenced."""
    if partition_count(module) <= 1:
        return 0
    fenced = 0
    for op in ops_named(module.operation, "stablehlo.convert"):
        if not _shared_fp8_cast(op):
            continue
        cast = op.results[0]
        barrier = Emitter(ir.InsertionPoint(op), op.location).op(
            "stablehlo.optimization_barrier", [cast], [cast.type])
        op.move_before(barrier)
        cast.replace_all_uses_except(barrier.results[0], barrier)
        fenced += 1
    return fenced


@register("fence-fp8-casts",
          "In a partitioned module, read each FP8 cast of a given tensor (a weight) that "
          "several ops read through an optimization_barrier, so that XLA:GPU makes it once, "
          "before the forward dot, and cannot join it to the weight's optimizer update "
          "(part of simplify).")
class FenceFp8Casts(ModulePass):
    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("fence-fp8-casts.fenced", fence_shared_fp8_casts(module))
