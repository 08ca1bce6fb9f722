"""The output head: the dots that produce a training step's loss, which stay out of FP8.

Why: the dot that computes a classifier's logits (or a language model's vocabulary
projection) is the one FP8 hurts most for what it saves. Its output feeds the softmax and
the loss directly, with no later layer to average the rounding out, and its gradient dot
seeds every other gradient with the E5M2 rounding of the loss's derivative. Recipes that
train in FP8 at scale keep it in the higher precision (DeepSeek-V3, Megatron's
Transformer Engine recipes); on the Flax MNIST CNN, FP8 on only the hidden layer costs
+1.0% loss at step 100 where FP8 on both costs +2.4% (batch 128, f32 data, 8 seeds).

The head, found on the data flow of the scalified step:

* a *forward* dot (not under JAX's ``transpose(...)``) whose result reaches a rank-0
  floating result of the entry function (the loss) through forward ops only, without
  passing another dot or convolution. Integer and boolean values are not followed: scale
  exponents are i32, so the rescale statistics a dot's result feeds (whose exponents reach
  every later tensor, the loss too) do not make every dot a head.
* the *backward* dots that take one of a head dot's operands (through layout ops): the
  weight's gradient and the gradient into the layer below.

A program without a rank-0 floating result (an inference step) has no head; nor has one
without JAX name-stack locations (forward and backward cannot be told apart there).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.name_stack import is_backward
from scalify_hlo.rewrites.emitter import defining_op, is_ranked_tensor, shape_of
from scalify_hlo.rewrites.op_table import Trait, ops_with

# Ops that cross a layer: the loss reached through one of them belongs to the later layer.
_LAYER_OPS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
_LAYOUT_OPS = ops_with(Trait.LAYOUT_ONLY)
# Region-holding ops whose operand i is each region's argument i (a loop's carry, which
# reaches the loop's result i through the body's return; a zero-trip loop's operand reaches
# it directly, which the walk does not follow).
_CARRYING_OPS = frozenset({"stablehlo.while"})


def _is_float(value: ir.Value) -> bool:
    t = value.type
    return is_ranked_tensor(t) and isinstance(ir.RankedTensorType(t).element_type,
                                              ir.FloatType)


def _op(owner: object) -> ir.Operation:
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _next_values(use: ir.OpOperand, entry: ir.Operation) -> tuple[list[ir.Value], bool]:
    """Where the value used by ``use`` flows on in the forward pass, and whether the use
    returns it from ``entry`` as a rank-0 float (the loss)."""
    user = _op(use.owner)
    name = user.name
    if name in _LAYER_OPS or is_backward(user.location):
        return [], False
    if name == "func.return":
        value = user.operands[use.operand_number]
        if user.parent.operation == entry:
            return [], _is_float(value) and not shape_of(value)
        return [], False  # another function's: calls are inlined before scalify
    if name == "stablehlo.return":  # out of a region: into its op's result of that index
        parent = user.parent.operation
        results = list(parent.results)
        index = use.operand_number
        return ([results[index]] if index < len(results) else []), False
    if name in _CARRYING_OPS:
        index = use.operand_number
        return [region.blocks[0].arguments[index] for region in user.regions
                if len(region.blocks) and index < len(region.blocks[0].arguments)], False
    return [v for v in user.results if _is_float(v)], False


def reaches_loss(value: ir.Value, entry: ir.Operation) -> bool:
    """Whether ``value`` reaches a rank-0 float result of ``entry`` through forward ops that
    are not dots or convolutions."""
    seen: set[ir.Value] = set()
    frontier = [value]
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        for use in current.uses:
            following, returned = _next_values(use, entry)
            if returned:
                return True
            frontier.extend(v for v in following if v not in seen)
    return False


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
    forward = [d for d in dots if not is_backward(d.location)]
    heads = [d for d in forward if reaches_loss(d.results[0], entry)]
    if not heads:
        return []
    operands = {_root(v) for d in heads for v in d.operands}
    head_set = set(heads)
    return [d for d in dots if d in head_set or (
        is_backward(d.location) and any(_root(v) in operands for v in d.operands))]
