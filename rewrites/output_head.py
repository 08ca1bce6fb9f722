"""The output head: the dots that produce a training step's loss, which stay out of FP8.

Why: the dot that computes a classifier's logits (or a language model's vocabulary
projection) is the one FP8 hurts most for what it saves. Its output feeds the softmax and
the loss directly, with no later layer to average the rounding out, and its gradient dot
seeds every other gradient with the E5M2 rounding of the loss's derivative. Recipes that
train in FP8 at scale keep it in the higher precision (DeepSeek-V3, Megatron's
Transformer Engine recipes). On the Flax MNIST CNN of ``benchmarks/models.py`` the default
policy's loss over steps 91-100 went from +1.98% of jax.jit's to -0.05% (64 seeds).

The head, found on the data flow of the scalified step:

* a *forward* dot (not under JAX's ``transpose(...)``) whose result reaches a rank-0
  floating result of the entry function (the loss) through forward ops only, without
  passing another dot or convolution. Integer and boolean values are not followed: scale
  exponents are i32, so the rescale statistics a dot's result feeds (whose exponents reach
  every later tensor, the loss too) do not make every dot a head.
* the *backward* dots that take one of a head dot's operands (through layout ops): the
  weight's gradient and the gradient into the layer below.

A program without a rank-0 floating result (an inference step) has no head; nor has one
without JAX name-stack locations (forward and backward cannot be told apart there). Calls
are not followed into their callee (every policy inlines them first).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.name_stack import is_backward
from scalify_hlo.rewrites.emitter import defining_op, is_ranked_tensor, shape_of, terminator
from scalify_hlo.rewrites.op_table import CONTROL_FLOW_OPS, Trait, ops_with

# Ops that cross a layer: the loss reached through one of them belongs to the later layer.
_LAYER_OPS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
_LAYOUT_OPS = ops_with(Trait.LAYOUT_ONLY)


def _is_float(value: ir.Value) -> bool:
    t = value.type
    return is_ranked_tensor(t) and isinstance(ir.RankedTensorType(t).element_type,
                                              ir.FloatType)


def _returned(region: ir.Region, index: int) -> list[ir.Value]:
    """Value ``index`` of the region's return, if it has one."""
    if not len(region.blocks):
        return []
    ret = terminator(region.blocks[0])
    return [ret.operands[index]] if index < len(ret.operands) else []


def _sources(value: ir.Value) -> tuple[list[ir.Value], ir.Operation | None]:
    """The float values ``value`` is computed from in the forward pass, or the dot it is
    the result of (where the walk stops); nothing for a backward op or a function argument."""
    op = defining_op(value)
    if op is None:  # a block argument: a loop body's carry, or the function's argument
        parent = value.owner.owner
        parent = parent.operation if isinstance(parent, ir.OpView) else parent
        if parent.name != "stablehlo.while" or value.owner != parent.regions[1].blocks[0]:
            return [], None
        index = ir.BlockArgument(value).arg_number
        return [parent.operands[index], *_returned(parent.regions[1], index)], None
    if is_backward(op.location):
        return [], None
    if op.name in _LAYER_OPS:
        return [], op
    if op.name in CONTROL_FLOW_OPS:  # result i is its regions' returned value i
        index = ir.OpResult(value).result_number
        regions = list(op.regions)[1:] if op.name == "stablehlo.while" else list(op.regions)
        return [v for region in regions for v in _returned(region, index)], None
    return [v for v in op.operands if _is_float(v)], None


def loss_dots(entry: ir.Operation) -> list[ir.Operation]:
    """The forward dots whose result reaches a rank-0 float result of ``entry`` through
    forward ops that are not dots or convolutions: one walk back from those results (each
    value once, linear in the step)."""
    returned = terminator(entry.regions[0].blocks[0])
    pending = [v for v in returned.operands if _is_float(v) and not shape_of(v)]
    seen: set[ir.Value] = set()
    dots: list[ir.Operation] = []
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        sources, dot = _sources(value)
        if dot is not None and not any(dot == d for d in dots):
            dots.append(dot)
        pending.extend(v for v in sources if v not in seen)
    return dots


def _root(value: ir.Value) -> ir.Value:
    """The value behind layout ops (a transposed or converted weight is the weight)."""
    for _ in range(64):
        op = defining_op(value)
        if op is None or op.name not in _LAYOUT_OPS:
            return value
        value = op.operands[0]
    return value


def output_head(dots: list[ir.Operation], entry: ir.Operation) -> list[ir.Operation]:
    """The dots among ``dots`` that form ``entry``'s output head (see the module docstring),
    in the order given."""
    heads = loss_dots(entry)
    if not heads:
        return []
    operands = {_root(v) for d in heads for v in d.operands}
    return [d for d in dots if any(d == h for h in heads) or (
        is_backward(d.location) and any(_root(v) in operands for v in d.operands))]
