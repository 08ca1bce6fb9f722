"""What every rule shares: the op re-emitted on new operands, results bound at a scale,
operands brought to a common scale, and the unscaled fallback (the op cloned on
unscaled operands in the original types).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import MIN_NORMAL_EXP, attributes_of, is_scalable_type
from scalify_hlo.rewrites.op_table import Family, ops_in_family
from scalify_hlo.rewrites.regions import clone_region_retyped
from scalify_hlo.rewrites.scope import RESCALE_ATTR, Scaled, Scope
from scalify_hlo.scale import ONE, Scale

_COLLECTIVES = frozenset(ops_in_family(Family.COLLECTIVE))


# ----- helpers --------------------------------------------------------------------------
def float_operand_indices(scope: Scope, operands: Sequence[ir.Value]) -> list[int]:
    return [i for i, v in enumerate(operands) if scope.is_scaled(v)]


def emit_like(scope: Scope, op: ir.Operation, operands: list[ir.Value],
              data_type: Callable[[ir.Type], ir.Type] | None = None) -> ir.Operation:
    """The same op on new operands, results and regions retyped to the data dtype (or by
    ``data_type``)."""
    attributes = attributes_of(op)
    attributes.pop(RESCALE_ATTR, None)
    regions = len(op.regions)
    data_type = data_type or scope.data_type
    new = scope.emit.op(op.name, operands, [data_type(t) for t in scope.results_of(op)[1]],
                        attributes, regions=regions)
    # A reduction rounds each partial sum as a 16-bit original does; a collective's region
    # stays plain (XLA runs only simple reducers across devices: its result is rounded once).
    round_inside = scope.state.rounds_as_original and op.name not in _COLLECTIVES
    if regions:
        for old_region, new_region in zip(op.regions, new.regions, strict=True):
            clone_region_retyped(old_region, new_region, data_type, round_inside)
    return new


def bind_results(scope: Scope, op: ir.Operation, new: ir.Operation, scale: Scale,
                 any_scale: bool = False) -> None:
    """Float results get ``scale``; other results map one to one."""
    olds, types = scope.results_of(op)
    is_scalable = scope.state.types.is_scalable
    for old, t, value in zip(olds, types, new.results, strict=True):
        scope.set(old, Scaled(value, scale, any_scale) if is_scalable(t) else value)


def float_operands(scope: Scope, olds: list[ir.Value]) -> tuple[list[int], list[Scaled]]:
    """Positions and (data, scale) of the float operands: each read once, in order,
    for both the any-scale test and ``operands_at_common_scale`` (which reads them again)."""
    indices = float_operand_indices(scope, olds)
    return indices, [scope.scaled(olds[i]) for i in indices]


def _at_common_scale(
    scope: Scope, olds: list[ir.Value], indices: list[int], floats: list[Scaled],
    constants_follow: bool = False, merge: bool = False, above_constants: bool = False,
) -> tuple[list[ir.Value], Scale]:
    """``operands_at_common_scale`` from operands already read (``float_operands``)."""
    operands: list[ir.Value | None] = [None] * len(olds)
    scale = ONE
    if indices:
        datas, scale = scope.to_common_scale(floats, constants_follow, merge, above_constants)
        for i, data in zip(indices, datas, strict=True):
            operands[i] = data
    if len(indices) < len(olds):
        for i, old in enumerate(olds):
            if operands[i] is None:
                operands[i] = scope.in_original_type(old)
    return operands, scale


def operands_at_common_scale(
    scope: Scope, op: ir.Operation, indices: list[int] | None = None,
    constants_follow: bool = False, merge: bool = False, above_constants: bool = False,
) -> tuple[list[ir.Value], Scale]:
    """New operands with the float ones (or those at ``indices``) at one common scale."""
    olds = list(op.operands)  # ``op.operands`` builds a new list object on every access
    indices = float_operand_indices(scope, olds) if indices is None else indices
    return _at_common_scale(scope, olds, indices, [scope.scaled(olds[i]) for i in indices],
                            constants_follow, merge, above_constants)


def same_scale(scope: Scope, op: ir.Operation, constants_follow: bool = False,
               merge: bool = False, above_constants: bool = False) -> None:
    """Whether every float operand is any-scale, ``operands_at_common_scale`` and the op at
    that scale, with the operands read once."""
    olds = list(op.operands)
    indices, floats = float_operands(scope, olds)
    if not floats:  # floats made from other types (abs of a complex): no scale to carry
        rule_unscaled(scope, op)
        return
    any_scale = all(f.any_scale for f in floats)
    operands, scale = _at_common_scale(scope, olds, indices, floats, constants_follow, merge,
                                     above_constants)
    bind_results(scope, op, emit_like(scope, op, operands), scale, any_scale)


# ----- families -------------------------------------------------------------------------
def rule_unscaled(scope: Scope, op: ir.Operation, report: str | None = None,
                  scale: Scale = ONE, measured: bool = False) -> None:
    """Run the op on unscaled operands in the original types; re-encode float results at
    ``scale`` (1 by default), or at the scale their largest magnitude needs, ``scale`` at
    the least (``measured``).

    Used for nonlinear functions (by design) and for ops without a rule (reported). With
    f16 data the float results of the latter are measured, at any scale: at scale 1 a
    legacy ``dot`` of values near 4000 overflowed, a product reduce of them too, and a batch
    norm of values near 2^-24 flushed, where the original holds all three. Measured, their
    largest magnitude comes to unit scale, as a rescale point's does: brought to the top of
    f16's range it left a later product no headroom (``jnp.linalg.pinv``: the dot of the
    SVD's factors, each near 2^14 in f16 data, was inf).
    """
    touches_floats = any(scope.is_scaled(v) for v in op.operands) or any(
        is_scalable_type(r.type) for r in op.results)
    top = None
    if report is not None and touches_floats:
        scope.state.report_fallback(op, report)
        if not scope.is_wide_range():  # results of any magnitude: measured, at any scale
            scale, measured, top = Scale(MIN_NORMAL_EXP), True, 0
    operands = [scope.in_original_type(old) for old in op.operands]
    captures = _captured_values(scope, op)  # computed before the clone, so they dominate it
    clone = op.clone(ip=scope.emit.ip)
    if RESCALE_ATTR in clone.attributes:
        del clone.attributes[RESCALE_ATTR]
    for index, operand in enumerate(operands):
        clone.operands[index] = operand
    _remap_captures(clone, captures)
    for old, new in zip(op.results, clone.results, strict=True):
        if not is_scalable_type(old.type):
            scope.set(old, new)
        else:
            scope.set(old, scope.encode_in_range(new, scale, finite_only=True, top=top)
                      if measured else scope.encode(new, scale))


def _nested_ops(op: ir.Operation) -> list[ir.Operation]:
    nested: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner != op:
            nested.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return nested


def _captured_values(scope: Scope, op: ir.Operation) -> dict[ir.Value, ir.Value]:
    """New values (in the original types) for values that the op's regions use from outside."""
    captures: dict[ir.Value, ir.Value] = {}
    for inner in _nested_ops(op):
        for operand in inner.operands:
            if operand not in captures and scope.lookup(operand) is not None:
                captures[operand] = scope.in_original_type(operand)
    return captures


def _remap_captures(clone: ir.Operation, captures: dict[ir.Value, ir.Value]) -> None:
    """Point values that nested regions of a clone capture from outside at their new values."""
    if not captures:
        return
    for inner in _nested_ops(clone):
        for index, operand in enumerate(inner.operands):
            replacement = captures.get(operand)
            if replacement is not None:
                inner.operands[index] = replacement
