"""Rules of control flow: while and case carry (data, scale) pairs through block arguments,
yields and results; an optimization barrier passes the data and keeps scales symbolic.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.flat_pairs import flat_positions
from scalify_hlo.rewrites.emitter import attributes_of, is_scalable_type, terminator
from scalify_hlo.rewrites.program_constants import is_zero_fill
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.sliced_stacks import initial_exponents, stack_carries


def rule_optimization_barrier(scope: Scope, op: ir.Operation) -> None:
    """Data goes through the barrier; scales stay symbolic beside it."""
    operands = [scope.scaled(v).data if scope.is_scaled(v) else scope.in_original_type(v)
                for v in op.operands]
    new = scope.emit.op(op.name, operands, [v.type for v in operands], attributes_of(op))
    for old, value, new_value in zip(op.operands, op.results, new.results, strict=True):
        found = scope.get(old)
        scope.set(value, Scaled(new_value, found.scale) if isinstance(found, Scaled)
                  else new_value)


def rule_while(scope: Scope, op: ir.Operation) -> None:
    """Carry (data, scale) pairs: a loop-carried scale is a loop-carried value.

    A carry that enters as zeros (a scan's stacked outputs, the accumulated gradient of
    its weights) enters with the unset exponent under ``common-scale=max``: zeros hold at
    any scale, but a loop-carried scale is one value, and at scale 1 the carry's maximum
    with the first small value added or written into it would push that value's data
    below f16's range (gradients of scanned layers at 2^-20 flushed to 0). A carry whose
    scale may be unset already (another loop's result: a scan's final carry that starts the
    next scan, an encoder's state handed to a decoder) enters with its own exponent, unset
    only where it is, and is marked as one that may be."""
    olds = list(op.operands)
    invariant = _invariant_carries(op)
    stacks = stack_carries(scope, op)
    entering = [None if fixed or index in stacks else _enters_unset(scope, old)
                for index, (old, fixed) in enumerate(zip(olds, invariant, strict=True))]
    unset = [how is not None for how in entering]
    operands = scope.flatten(olds, unset=[how == "zeros" for how in entering], stacks=stacks)
    operands = _with_stack_exponents(scope, olds, operands, stacks)
    operands = _in_carry_types(scope, op, operands)
    types = [v.type for v in operands]
    new = scope.emit.op(op.name, operands, types, attributes_of(op), regions=2)
    for old_region, new_region, returns_flat in zip(op.regions, new.regions, (False, True),
                                                    strict=True):
        old_block = old_region.blocks[0]
        block = new_region.blocks.append(*types)
        child = scope.child(block)
        arguments = list(old_block.arguments)
        child.bind_flat(arguments, list(block.arguments), stacks=stacks)
        _keep_outer_scales(child, olds, arguments, invariant, stacks)
        _mark_unset(child, arguments, unset)
        old_return = child.rewrite_block(old_block)
        values = child.flatten(list(old_return.operands), stacks=stacks) if returns_flat else [
            child.in_original_type(v) for v in old_return.operands]
        child.emit.at(old_return.location).op("stablehlo.return", values, [])
    results = list(op.results)
    scope.bind_flat(results, list(new.results), stacks=stacks)
    _keep_outer_scales(scope, olds, results, invariant, stacks)
    _mark_unset(scope, results, unset)


def _with_stack_exponents(scope: Scope, olds: list[ir.Value], operands: list[ir.Value],
                          stacks: dict[int, int]) -> list[ir.Value]:
    """The flat operands with a zero-filled stack's scale replaced by its vector of
    exponents (a stack that is one already flattened as one)."""
    if not stacks:
        return operands
    scaled = [is_scalable_type(old.type) for old in olds]
    for index, position in enumerate(flat_positions(scaled)):
        if index in stacks and scope.stack_of(olds[index]) is None:
            operands[position + 1] = initial_exponents(scope, olds[index], stacks[index])
    return operands


def _in_carry_types(scope: Scope, op: ir.Operation, flat: list[ir.Value]) -> list[ir.Value]:
    """Each carry's data in its own data type, which its block arguments and returned
    value have: one value may start two carries of different classes (``(x, 0, x)``, a
    float counter kept in f32 and a value decayed in bf16), and a loop's types are its
    operands'."""
    arguments = list(op.regions[1].blocks[0].arguments)
    scaled = [is_scalable_type(argument.type) for argument in arguments]
    flat = list(flat)
    for argument, is_scaled, position in zip(arguments, scaled, flat_positions(scaled),
                                             strict=True):
        if is_scaled:
            element = scope.state.types.element(scope.data_type_of(argument))
            flat[position] = scope.emit.convert(flat[position], element)
    return flat


def _invariant_carries(op: ir.Operation) -> list[bool]:
    """Per loop operand, whether the body returns it unchanged (its block argument)."""
    body = op.regions[1].blocks[0]
    returned = list(terminator(body).operands)
    return [value == argument for value, argument in zip(returned, body.arguments,
                                                         strict=True)]


def _keep_outer_scales(scope: Scope, olds: list[ir.Value], bound: list[ir.Value],
                       invariant: list[bool], stacks: dict[int, int]) -> None:
    """Loop-invariant carries (a scan's weights, a mask hoisted out of the body) keep the
    operand's scale inside the loop and after it: a constant stays static, so that a select
    with it lets it follow the other operand (``constants_follow``: the -1e9 of a causal
    mask saturates to -inf instead of setting a scale that flushes the logits to 0), and
    zeros stay at any scale."""
    for index, (old, value, fixed) in enumerate(zip(olds, bound, invariant, strict=True)):
        outer = scope.lookup(old) if fixed and index not in stacks else None
        if isinstance(outer, Scaled):
            data = scope.get(value)
            assert isinstance(data, Scaled)
            scope.set(value, Scaled(data.data, outer.scale, outer.any_scale))


def _enters_unset(scope: Scope, old: ir.Value) -> str | None:
    """How a loop operand's scale may enter the loop unset, under ``common-scale=max`` (the
    maximum ignores an unset exponent; other rules keep the zeros at scale 1): "zeros" (it
    enters with the unset exponent), "maybe" (its exponent may be unset already: an outer
    loop's carry, another loop's result; it enters as it is) or None."""
    if scope.state.common_scale_rule != "max":
        return None
    found = scope.get(old)
    if not isinstance(found, Scaled):
        return None
    if found.any_scale and is_zero_fill(old):
        return "zeros"
    return "maybe" if scope.state.maybe_unset(found.scale) else None


def _mark_unset(scope: Scope, olds: list[ir.Value], unset: list[bool]) -> None:
    """Note the scales of ``olds`` (just bound to loop values) whose exponent may be unset."""
    for old, flagged in zip(olds, unset, strict=True):
        if flagged:
            found = scope.get(old)
            assert isinstance(found, Scaled)
            scope.state.unset_factors.add(found.scale.factors[0][0])


def rule_case(scope: Scope, op: ir.Operation) -> None:
    """Every branch returns (data, scale) pairs; the results carry runtime scales."""
    index = scope.in_original_type(op.operands[0])
    types = scope.flat_types(list(op.results))
    new = scope.emit.op(op.name, [index], types, attributes_of(op), regions=len(op.regions))
    for old_region, new_region in zip(op.regions, new.regions, strict=True):
        block = new_region.blocks.append()
        child = scope.child(block)
        old_return = child.rewrite_block(old_region.blocks[0])
        child.emit.at(old_return.location).op(
            "stablehlo.return", child.flatten(list(old_return.operands)), [])
    scope.bind_flat(list(op.results), list(new.results))
