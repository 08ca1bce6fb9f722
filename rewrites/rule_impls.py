"""How each family of StableHLO ops is rewritten on (data, scale) pairs.

Every function here has the signature ``rule(scope, op)``: it reads the op's operands from
the scope's value map, emits the rewritten ops and binds the op's results. The table that
assigns a rule to each op name is ``rules.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import (
    Emitter,
    attributes_of,
    defining_op,
    dtype_name,
    element_type,
    is_scalable_type,
    numpy_dtype,
    read_dense,
    shape_of,
    splat_constant_value,
    splat_scalar,
)
from scalify_hlo.rewrites.regions import (
    clone_region_retyped,
    is_additive,
    is_assignment,
    is_homogeneous,
)
from scalify_hlo.rewrites.scope import RESCALE_ATTR, Scaled, Scope
from scalify_hlo.scale import (
    ONE,
    Scale,
    pow2_exponent_of_array,
    pow2_exponent_of_magnitudes,
    sqrt_size_exponent,
)

# custom_call targets that only move or annotate data (sharding, layout): scale-transparent.
LAYOUT_ONLY_CUSTOM_CALLS = {
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
    "MoveToHost", "MoveToDevice", "LayoutConstraint",
}


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
    if regions:
        for old_region, new_region in zip(op.regions, new.regions, strict=True):
            clone_region_retyped(old_region, new_region, data_type)
    return new


def bind_results(scope: Scope, op: ir.Operation, new: ir.Operation, scale: Scale,
                 any_scale: bool = False) -> None:
    """Float results get ``scale``; other results map one to one."""
    olds, types = scope.results_of(op)
    is_scalable = scope.state.types.is_scalable
    for old, t, value in zip(olds, types, new.results, strict=True):
        scope.set(old, Scaled(value, scale, any_scale) if is_scalable(t) else value)


def all_any_scale(scope: Scope, op: ir.Operation) -> bool:
    """Whether every float operand is scale-free (only 0, +-inf, NaN), and there is one."""
    floats = [scope.scaled(v) for v in op.operands if scope.is_scaled(v)]
    return bool(floats) and all(f.any_scale for f in floats)


def _float_operands(scope: Scope, olds: list[ir.Value]) -> tuple[list[int], list[Scaled]]:
    """Positions and (data, scale) of the float operands: each read once, in order, for
    both ``all_any_scale`` and ``operands_at_common_scale`` (which read them again)."""
    indices = float_operand_indices(scope, olds)
    return indices, [scope.scaled(olds[i]) for i in indices]


def _at_common_scale(
    scope: Scope, olds: list[ir.Value], indices: list[int], floats: list[Scaled],
    constants_follow: bool = False, merge: bool = False,
) -> tuple[list[ir.Value], Scale]:
    """``operands_at_common_scale`` from operands already read (``_float_operands``)."""
    operands: list[ir.Value | None] = [None] * len(olds)
    scale = ONE
    if indices:
        datas, scale = scope.to_common_scale(floats, constants_follow, merge)
        for i, data in zip(indices, datas, strict=True):
            operands[i] = data
    if len(indices) < len(olds):
        for i, old in enumerate(olds):
            if operands[i] is None:
                operands[i] = scope.plain(old)
    return operands, scale


def operands_at_common_scale(
    scope: Scope, op: ir.Operation, indices: list[int] | None = None,
    constants_follow: bool = False, merge: bool = False,
) -> tuple[list[ir.Value], Scale]:
    """New operands with the float ones (or those at ``indices``) at one common scale."""
    olds = list(op.operands)  # ``op.operands`` builds a new list object on every access
    indices = float_operand_indices(scope, olds) if indices is None else indices
    return _at_common_scale(scope, olds, indices, [scope.scaled(olds[i]) for i in indices],
                            constants_follow, merge)


def _same_scale(scope: Scope, op: ir.Operation, constants_follow: bool = False,
                merge: bool = False) -> None:
    """``all_any_scale``, ``operands_at_common_scale`` and the op at that scale, with the
    operands read once."""
    olds = list(op.operands)
    indices, floats = _float_operands(scope, olds)
    if not floats:  # floats made from other types (abs of a complex): no scale to carry
        rule_unscaled(scope, op)
        return
    any_scale = all(f.any_scale for f in floats)
    operands, scale = _at_common_scale(scope, olds, indices, floats, constants_follow, merge)
    bind_results(scope, op, emit_like(scope, op, operands), scale, any_scale)


# ----- families -------------------------------------------------------------------------
def rule_unscaled(scope: Scope, op: ir.Operation, report: str | None = None,
                  scale: Scale = ONE) -> None:
    """Run the op on unscaled operands in the original types; re-encode float results at 1
    (or at the static ``scale``).

    Used for nonlinear functions (by design) and for ops without a rule (reported).
    """
    touches_floats = any(scope.is_scaled(v) for v in op.operands) or any(
        is_scalable_type(r.type) for r in op.results)
    if report is not None and touches_floats:
        scope.state.report_fallback(op, report)
    operands = [scope.plain(old) for old in op.operands]
    captures = _captured_values(scope, op)  # computed before the clone, so they dominate it
    clone = op.clone(ip=scope.emit.ip)
    if RESCALE_ATTR in clone.attributes:
        del clone.attributes[RESCALE_ATTR]
    for index, operand in enumerate(operands):
        clone.operands[index] = operand
    _remap_captures(clone, captures)
    for old, new in zip(op.results, clone.results, strict=True):
        scope.set(old, scope.encode(new, scale) if is_scalable_type(old.type) else new)


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
                captures[operand] = scope.plain(operand)
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


def rule_nonlinear(scope: Scope, op: ir.Operation) -> None:
    rule_unscaled(scope, op)


def rule_fallback(scope: Scope, op: ir.Operation) -> None:
    rule_unscaled(scope, op, report="has no scale rule")


def rule_same_scale(scope: Scope, op: ir.Operation) -> None:
    """Linear-in-scale ops: float operands at one common scale, results at that scale."""
    _same_scale(scope, op)


def rule_additive(scope: Scope, op: ir.Operation) -> None:
    """add, subtract: as same-scale. A runtime + constant add whose result later products
    raise to a power (a series' ``y = x/2 - 2``, ``drift.py``) is then rescaled (amax):
    whatever moved its data off unit (the constant dominating under common-scale=first, an
    argument's data far from 1) would be multiplied by every step of the series."""
    _same_scale(scope, op)
    if op in scope.state.compounding:
        scope.rescale_results(op, "amax:nearest")


def rule_merge(scope: Scope, op: ir.Operation) -> None:
    """Ops that put pieces of their operands together without arithmetic between them
    (concatenate, max, pad): a common scale between the operands' (see Scope.common_scale)."""
    _same_scale(scope, op, merge=True)


# ----- ops whose result is one of their operands (select, max, min, clamp) and compare --
# Their answer must not depend on how far apart the operands' scales are: the decision is
# taken in a type that holds both operands, and the result keeps the picked values.
def _distinct_scales(floats: Sequence[Scaled]) -> int:
    scales: list[Scale] = []
    for value in floats:
        if not value.any_scale and value.scale not in scales:
            scales.append(value.scale)
    return len(scales)


def _fits_at_max(scope: Scope, floats: Sequence[Scaled]) -> bool:
    """Whether the largest scale keeps every operand's unit data normal in the data type
    (a static spread within the type's headroom, 2^14 for f16): today's cheap path."""
    spread = scope.static_spread(floats)
    return spread is not None and spread <= -scope.min_normal_exponent()


def _wide_element(scope: Scope) -> ir.Type:
    """The type that holds two operands far apart: the data type when it has f32's range,
    else f32."""
    return scope.current_data_dtype() if scope.is_wide_range() else scope.state.types.f32


def rule_compare(scope: Scope, op: ir.Operation) -> None:
    """compare: operands at the midpoint of their exponents in a type that holds both (f32
    for f16 data), so the boolean is the unscaled program's at any spread up to 2^250."""
    olds = list(op.operands)
    indices, floats = _float_operands(scope, olds)
    if not floats or _distinct_scales(floats) <= 1 or (
            scope.is_wide_range() and _fits_at_max(scope, floats)):
        _same_scale(scope, op, merge=True)
        return
    datas = scope.in_type(floats, scope.midpoint(floats), _wide_element(scope))
    operands = _non_floats(scope, olds, indices)
    for i, data in zip(indices, datas, strict=True):
        operands[i] = data
    new = scope.emit.op(op.name, operands, scope.results_of(op)[1], _attributes(op))
    bind_results(scope, op, new, ONE)


def _non_floats(scope: Scope, olds: list[ir.Value], indices: list[int]) -> list[ir.Value]:
    """The new values of the operands that are not at ``indices`` (placeholders there)."""
    skip = set(indices)
    return [olds[i] if i in skip else scope.plain(v) for i, v in enumerate(olds)]


def _attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    attributes = attributes_of(op)
    attributes.pop(RESCALE_ATTR, None)
    return attributes


def _uniform_predicate(scope: Scope, op: ir.Operation) -> ir.Value | None:
    """The rank-0 predicate of a select whose predicate is one value for every element (a
    rank-0 predicate, or a broadcast of one): its result is one branch as a whole."""
    pred = op.operands[0]
    while True:
        if ir.RankedTensorType(pred.type).rank == 0:
            return scope.plain(pred)
        owner = pred.owner
        if isinstance(owner, ir.Block) or owner.operation.name != "stablehlo.broadcast_in_dim":
            return None
        pred = owner.operation.operands[0]


def _pick_whole_branch(scope: Scope, op: ir.Operation, pred: ir.Value) -> None:
    """select on one predicate for all elements: the picked branch's data and exponent as
    they are, exact at any spread."""
    olds = list(op.operands)
    branches = [scope.scaled(v) for v in olds[1:]]
    datas = [b.data for b in branches]
    result_type = scope.data_type(scope.results_of(op)[1][0])
    data = scope.emit.op(op.name, [scope.plain(olds[0]), *datas], [result_type],
                         _attributes(op)).result
    exponent = scope.emit.op("stablehlo.select", [pred, *(
        scope.exponent(b.scale) for b in branches)], [scope.exponent_type()]).result
    scope.set(op.results[0], Scaled(data, Scale.dynamic(exponent),
                                    all(b.any_scale for b in branches)))


def _pick_and_normalize(scope: Scope, op: ir.Operation) -> None:
    """Operands whose scales are unrelated (two runtime scales): the op in a type that holds
    both (f32 for f16 data) at the midpoint of the exponents, exact at any spread, then the
    result's own amax sets its scale. A result taken from one operand keeps its values (the
    largest scale flushed the other's to 0 in f16), and a loop-carried
    ``select(enabled, new, old)`` keeps a scale that follows its values instead of drifting
    by the ratio of the two every trip (igamma's series and continued fraction: NaN after a
    few trips). One reduction, only where no scale relation is known at rewrite time."""
    olds = list(op.operands)
    indices, floats = _float_operands(scope, olds)
    wide = _wide_element(scope)
    midpoint = scope.midpoint(floats)
    operands = _non_floats(scope, olds, indices)
    for i, data in zip(indices, scope.in_type(floats, midpoint, wide), strict=True):
        operands[i] = data
    new = emit_like(scope, op, operands,
                    lambda t: scope.state.types.with_element_type(t, wide))
    found = scope.rescale(Scaled(new.results[0], midpoint), "amax:nearest")
    data = scope.emit.convert(found.data, scope.current_data_dtype())
    scope.set(op.results[0], Scaled(data, found.scale))


# Exponent-directed pick: the result's scale from the picked elements' own exponents (i32).
_NO_EXPONENT = -(1 << 30)  # below every element exponent: an element that sets no scale
_FACTOR_SPAN = 300  # |shift| beyond which every f32 data value is 0 or inf anyway


def _int_splat(scope: Scope, value: int, t: ir.Type) -> ir.Value:
    """An i32 constant of tensor type ``t`` (rank 0 or a broadcast of one)."""
    return scope.emit.broadcast_scalar(scope.emit.int_scalar(value), t)


def _int_compare(scope: Scope, direction: str, a: ir.Value, b: ir.Value,
                 t: ir.Type) -> ir.Value:
    types = scope.state.types
    i1 = types.attribute("i1", lambda: ir.IntegerType.get_signless(1))
    attributes = {
        "comparison_direction": ir.Attribute.parse(
            f"#stablehlo<comparison_direction {direction}>"),
        "compare_type": ir.Attribute.parse("#stablehlo<comparison_type SIGNED>"),
    }
    return scope.emit.op("stablehlo.compare", [a, b], [types.with_element_type(t, i1)],
                         attributes).result


def _element_exponents(scope: Scope, wide: ir.Value, scale: Scale,
                       shape_i32: ir.Type) -> tuple[ir.Value, ir.Value]:
    """Per element of f32 data ``wide`` at ``scale``: the biased exponent of its bits plus
    the scale's exponent (the value's binade, in i32: no overflow at any spread), and
    whether the element is a normal number (0, subnormals, inf and NaN set no scale)."""
    emit = scope.emit
    bits = emit.unary("stablehlo.bitcast_convert", wide, shape_i32)
    biased = emit.binary("stablehlo.and", emit.binary(
        "stablehlo.shift_right_logical", bits, _int_splat(scope, 23, shape_i32)),
        _int_splat(scope, 255, shape_i32))
    normal = emit.binary("stablehlo.and",
                         _int_compare(scope, "GT", biased, _int_splat(scope, 0, shape_i32),
                                      shape_i32),
                         _int_compare(scope, "LT", biased, _int_splat(scope, 255, shape_i32),
                                      shape_i32))
    binade = emit.binary("stablehlo.add", biased,
                         emit.broadcast_scalar(scope.exponent(scale), shape_i32))
    return binade, normal


def _shifted_exactly(scope: Scope, wide: ir.Value, shift: ir.Value) -> ir.Value:
    """``wide * 2^shift`` (f32 data, rank-0 i32 ``shift``) in three normal factors of one
    sign: a value that fits after the shift never overflows or flushes on the way, one that
    does not becomes the inf or 0 it is, and no factor is 0 or inf (no 0 * inf NaN)."""
    emit, i32 = scope.emit, scope.exponent_type()
    rest = emit.clamp_exponent(shift, -_FACTOR_SPAN, _FACTOR_SPAN)
    for _ in range(3):
        step = emit.clamp_exponent(rest)
        wide = emit.times_factor(wide, emit.pow2_of_exponent(step))
        rest = emit.binary("stablehlo.subtract", rest, step, i32)
    return wide


def _select_by_exponent(scope: Scope, op: ir.Operation) -> None:
    """select of branches whose scales are unrelated (two runtime scales, or static ones too
    far apart for the data type): the result's scale comes from the picked elements' own
    binades, read from their bits and summed with their scale's exponent in i32, and one
    integer max over the tensor; only then is each branch's data brought to that scale. The
    picked values stay exactly what they are at any spread (bessel_i0e's discarded
    Clenshaw branch is 2^400 from the picked one); the discarded branch may flush or
    overflow, the select drops it."""
    emit = scope.emit
    olds = list(op.operands)
    pred = scope.plain(olds[0])
    branches = [scope.scaled(v) for v in olds[1:]]
    types = scope.state.types
    f32 = types.f32
    wides = [emit.convert(b.data, f32) for b in branches]
    wide_type = types.with_element_type(scope.results_of(op)[1][0], f32)
    shape_i32 = types.with_element_type(wide_type, types.i32)
    sentinel = _int_splat(scope, _NO_EXPONENT, shape_i32)
    picks = []
    for branch, wide in zip(branches, wides, strict=True):
        if branch.any_scale:  # 0, inf, NaN: fit any scale, set none
            picks.append(sentinel)
            continue
        binade, normal = _element_exponents(scope, wide, branch.scale, shape_i32)
        picks.append(emit.op("stablehlo.select", [normal, binade, sentinel],
                             [shape_i32]).result)
    picked = emit.op("stablehlo.select", [pred, *picks], [shape_i32]).result
    top = _reduce_int_max(scope, picked)
    i32 = scope.exponent_type()
    found = _int_compare(scope, "GT", top, emit.int_scalar(_NO_EXPONENT), i32)
    # the largest picked element's data lands in [1, 2); none (all 0, inf or NaN): midpoint
    exponent = emit.op("stablehlo.select", [found, emit.binary(
        "stablehlo.subtract", top, emit.int_scalar(127), i32),
        scope.exponent(scope.midpoint(branches))], [i32]).result
    datas = [wide if branch.any_scale else _shifted_exactly(scope, wide, emit.binary(
        "stablehlo.subtract", scope.exponent(branch.scale), exponent, i32))
        for branch, wide in zip(branches, wides, strict=True)]
    data = emit.op("stablehlo.select", [pred, *datas], [wide_type], _attributes(op)).result
    scope.set(op.results[0], Scaled(emit.convert(data, scope.current_data_dtype()),
                                    Scale.dynamic(exponent)))


def _reduce_int_max(scope: Scope, x: ir.Value) -> ir.Value:
    """The maximum of an i32 tensor as a rank-0 i32 (``_NO_EXPONENT`` for none)."""
    emit, i32 = scope.emit, scope.exponent_type()
    rank = len(ir.RankedTensorType(x.type).shape)
    if rank == 0:
        return x
    reduce = emit.op("stablehlo.reduce", [x, emit.int_scalar(_NO_EXPONENT)], [i32],
                     {"dimensions": ir.DenseI64ArrayAttr.get(list(range(rank)))}, regions=1)
    block = reduce.regions[0].blocks.append(i32, i32)
    inner = Emitter(ir.InsertionPoint(block), emit.loc, types=scope.state.types)
    inner.op("stablehlo.return", [inner.binary("stablehlo.maximum", *block.arguments)], [])
    return reduce.results[0]


def _pick_unrelated(scope: Scope, op: ir.Operation) -> None:
    """An op that picks one operand per element, operands' scales unrelated."""
    if op.name == "stablehlo.select":
        _select_by_exponent(scope, op)
    else:
        _pick_and_normalize(scope, op)


def _choose(scope: Scope, op: ir.Operation) -> None:
    """select, max, min, clamp: the result is elementwise one of the operands."""
    olds = list(op.operands)
    _, floats = _float_operands(scope, olds)
    if not floats or _distinct_scales(floats) <= 1:
        _same_scale(scope, op, constants_follow=True, merge=True)
        return
    if op.name == "stablehlo.select":
        pred = _uniform_predicate(scope, op)
        if pred is not None:
            _pick_whole_branch(scope, op, pred)
            return
    runtime = [v for v in floats if not v.any_scale and not v.scale.is_static]
    if _distinct_scales(runtime) > 1 and scope.static_spread(runtime) is None:
        _pick_unrelated(scope, op)
        return
    if scope.is_wide_range():  # the midpoint holds both (see Scope.midpoint)
        if _fits_at_max(scope, floats):
            _same_scale(scope, op, merge=True)
        else:
            midpoint = scope.midpoint(floats)
            _bind_at(scope, op, floats, [scope.rescale_data(v, midpoint) for v in floats],
                     midpoint)
        return
    if _fits_at_max(scope, floats) or runtime:
        # One runtime scale: constants follow it (down to where they stay in range).
        _same_scale(scope, op, constants_follow=True, merge=True)
        return
    _pick_unrelated(scope, op)  # static scales too far apart for f16


def _bind_at(scope: Scope, op: ir.Operation, floats: list[Scaled], datas: list[ir.Value],
             scale: Scale) -> None:
    olds = list(op.operands)
    indices = float_operand_indices(scope, olds)
    operands = _non_floats(scope, olds, indices)
    for i, data in zip(indices, datas, strict=True):
        operands[i] = data
    bind_results(scope, op, emit_like(scope, op, operands), scale,
                 all(f.any_scale for f in floats))


def rule_select(scope: Scope, op: ir.Operation) -> None:
    """select: no arithmetic between the branches. One runtime scale: a constant branch (a
    mask's -1e9) takes the runtime branch's scale; in f16 a far-out sentinel saturates to
    the format's largest finite value (``Scope.rescale_constant``), which keeps its sign and
    order, instead of pushing the data below the format's range, and a constant inside the
    format's range (1.0) follows only down to where it still fits
    (``Scope._constant_floor``). Branches far apart: see ``_choose``."""
    _choose(scope, op)


def rule_choose(scope: Scope, op: ir.Operation) -> None:
    """max, min, clamp: as select (``_choose``)."""
    _choose(scope, op)


def rule_scale_invariant(scope: Scope, op: ir.Operation) -> None:
    """``f(c*x) = f(x)`` (sign, atan2): common scale in, scale 1 out."""
    operands, _ = operands_at_common_scale(scope, op)
    bind_results(scope, op, emit_like(scope, op, operands), ONE)


def rule_with_region(scope: Scope, op: ir.Operation) -> None:
    """Sort, scatter and friends: like ``rule_same_scale`` when the regions commute with
    scaling, otherwise run unscaled and report why."""
    if all(is_homogeneous(r) for r in op.regions):
        rule_same_scale(scope, op)
    else:
        rule_unscaled(scope, op, report="has a region that does not commute with scaling")


def rule_scatter(scope: Scope, op: ir.Operation) -> None:
    region = op.regions[0]
    if is_assignment(region) or is_homogeneous(region):
        rule_same_scale(scope, op)
    else:
        rule_unscaled(scope, op, report="has an update region that does not commute with scaling")


def _rounds_in_data_type(scope: Scope, old: ir.Value) -> bool:
    """Whether ``old`` is a splat constant whose data the current data type rounds (0.99 is
    0.99023 in f16, 0.98828 in bf16; a power of two or 0.75 is exact)."""
    value = splat_constant_value(old)
    if value is None or value == 0 or not math.isfinite(value):
        return False
    found = scope.scaled(old)
    if not found.scale.is_static:
        return False
    with np.errstate(over="ignore", under="ignore"):
        split = np.float64(value) / 2.0 ** found.scale.exp
        return float(split.astype(numpy_dtype(scope.current_data_dtype()))) != float(split)


def _exact_constant_product(scope: Scope, op: ir.Operation) -> bool:
    """A product or quotient of a value and a constant that 16-bit data rounds runs in f32
    and rounds once: with the constant rounded first, every product is off the same way (a
    moving average's 0.99 in f16 biases every running statistic by 0.3% after 40 steps, by
    2.4% at its fixed point; bf16's by 3% and 15%), where one rounding of the exact product
    is unbiased. Products of two constants are left to the constant folder."""
    if scope.current_data_dtype() == scope.state.types.f32:
        return False
    constants = [splat_constant_value(v) is not None for v in op.operands]
    return not all(constants) and any(
        _rounds_in_data_type(scope, v) for v, c in zip(op.operands, constants, strict=True) if c)


def _product(scope: Scope, op: ir.Operation, scale_of: Callable[[Scale, Scale], Scale]) -> None:
    """multiply/divide: the same op on data, the scales combined by ``scale_of``."""
    if not _exact_constant_product(scope, op):
        a, b = (scope.scaled(v) for v in op.operands)
        bind_results(scope, op, emit_like(scope, op, [a.data, b.data]),
                     scale_of(a.scale, b.scale))
        return
    state, narrow = scope.state, scope.current_data_dtype()
    state.current_dtype = state.types.f32  # scaled() makes the constant again in f32
    try:
        a, b = (scope.scaled(v) for v in op.operands)
        wide = emit_like(scope, op, [a.data, b.data]).results[0]
    finally:
        state.current_dtype = narrow
    data = scope.emit.convert(wide, narrow)
    scope.set(scope.results_of(op)[0][0], Scaled(data, scale_of(a.scale, b.scale)))
    state.context.bump("scalify.exact-constant-products")


def rule_multiply(scope: Scope, op: ir.Operation) -> None:
    _product(scope, op, Scale.times)


def rule_divide(scope: Scope, op: ir.Operation) -> None:
    _product(scope, op, Scale.over)


def rule_square(scope: Scope, op: ir.Operation) -> None:
    a = scope.scaled(op.operands[0])
    bind_results(scope, op, emit_like(scope, op, [a.data]), a.scale.times(a.scale))


def _contracting_size(op: ir.Operation) -> int:
    if op.name == "stablehlo.dot_general":
        numbers = str(op.attributes["dot_dimension_numbers"])
        dims = _int_list_after(numbers, "lhs_contracting_dimensions")
        shape = shape_of(op.operands[0])
        return math.prod(shape[d] for d in dims)
    # convolution: every kernel dimension but the output feature one is contracted.
    numbers = str(op.attributes["dimension_numbers"])
    kernel_spec = numbers.split("x", 1)[1].split("->")[0]
    labels = kernel_spec.strip().strip("[]").split(",")
    out_index = [lbl.strip() for lbl in labels].index("o")
    kernel_shape = shape_of(op.operands[1])
    return math.prod(s for i, s in enumerate(kernel_shape) if i != out_index)


def _int_list_after(text: str, key: str) -> list[int]:
    start = text.find(key)
    if start < 0:
        return []
    body = text[text.index("[", start) + 1:text.index("]", start)]
    return [int(x) for x in body.split(",") if x.strip()]


def rule_dot(scope: Scope, op: ir.Operation) -> None:
    """Unit scaling: ``dot(a_d, b_d) * 2^-k`` with ``2^k ~ sqrt(K)``; scale ``sa*sb*2^k``."""
    a, b = (scope.scaled(v) for v in op.operands[:2])
    new = emit_like(scope, op, [a.data, b.data])
    k = sqrt_size_exponent(_contracting_size(op))
    data = scope.emit.scale_tensor_static(new.results[0], -k)
    scope.set(op.results[0], Scaled(data, a.scale.times(b.scale).shifted(k)))


def _reduced_size(op: ir.Operation) -> int:
    if op.name == "stablehlo.reduce":
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        shape = shape_of(op.operands[0])
        return math.prod(shape[d] for d in dims)
    return math.prod(ir.DenseI64ArrayAttr(op.attributes["window_dimensions"]))


def rule_reduce(scope: Scope, op: ir.Operation) -> None:
    """reduce / reduce_window: one common scale for inputs and inits; a sum over N elements
    moves ``2^k ~ sqrt(N)`` from data to scale."""
    region = op.regions[0]
    if not is_homogeneous(region):
        rule_unscaled(scope, op, report="has a reducer that does not commute with scaling")
        return
    operands, scale = operands_at_common_scale(scope, op)
    types = scope.state.types
    data_dtype, f32 = scope.current_data_dtype(), types.f32
    additive = is_additive(region)
    if additive and data_dtype != f32:
        # Sum f16/bf16 data in f32, as JAX sums f16 and as the f32 original does: a sum of
        # N same-sign values of unit scale passes f16's 65504 from N ~ 65k on.
        def accumulator_type(t: ir.Type) -> ir.Type:
            return types.with_element_type(t, f32) if types.is_scalable(t) else t

        operands = [_widened(scope, v) if types.is_scalable(v.type) else v for v in operands]
        new = emit_like(scope, op, operands, accumulator_type)
    else:
        new = emit_like(scope, op, operands)
    k = sqrt_size_exponent(_reduced_size(op)) if additive else 0
    olds, result_types = scope.results_of(op)
    for old, t, value in zip(olds, result_types, new.results, strict=True):
        if types.is_scalable(t):
            data = scope.emit.convert(scope.emit.scale_tensor_static(value, -k), data_dtype)
            scope.set(old, Scaled(data, scale.shifted(k)))
        else:
            scope.set(old, value)


def _widened(scope: Scope, value: ir.Value) -> ir.Value:
    """``value`` in f32: a splat constant (a reduction's init) made again, else converted."""
    types = scope.state.types
    splat = splat_constant_value(value)
    if splat is not None:
        return scope.emit.splat(splat, types.with_element_type(value.type, types.f32))
    return scope.emit.convert(value, types.f32)


def rule_select_and_scatter(scope: Scope, op: ir.Operation) -> None:
    """The operand keeps its scale (only compared with itself); source and init share one."""
    if not all(is_homogeneous(r) for r in op.regions):
        rule_unscaled(scope, op, report="has a region that does not commute with scaling")
        return
    operand, source, init = op.operands
    datas, scale = scope.to_common_scale([scope.scaled(source), scope.scaled(init)])
    new = emit_like(scope, op, [scope.scaled(operand).data, *datas])
    bind_results(scope, op, new, scale)


def rule_sqrt(scope: Scope, op: ir.Operation) -> None:
    """sqrt / rsqrt: halve the scale's exponent, moving a factor 2 into the data if odd."""
    x = scope.scaled(op.operands[0])
    sign = 1 if op.name == "stablehlo.sqrt" else -1
    emit = scope.emit
    if x.scale.is_static:
        odd = x.scale.exp % 2
        data = emit.scale_tensor_static(x.data, odd)
        result_scale = Scale(sign * (x.scale.exp - odd) // 2)
    else:
        # runtime: s' = 2^floor(e / 2) for s = 2^e, and the 1 or 2 left over goes into the data.
        exponent = scope.exponent(x.scale)
        i32 = scope.exponent_type()
        half = emit.binary("stablehlo.shift_right_arithmetic", exponent, emit.int_scalar(1),
                           i32)
        odd = emit.binary("stablehlo.subtract", exponent,
                          emit.binary("stablehlo.add", half, half, i32), i32)
        data = emit.times_factor(x.data, emit.pow2_of_exponent(odd))
        result_scale = Scale.dynamic(half)
        if sign < 0:
            result_scale = Scale().over(result_scale)
    new = emit_like(scope, op, [data])
    bind_results(scope, op, new, result_scale)


def rule_constant(scope: Scope, op: ir.Operation) -> None:
    """Split at rewrite time: a power-of-two scale from the largest finite magnitude."""
    results, types = scope.results_of(op)
    result, result_type = results[0], types[0]
    if not scope.state.types.is_scalable(result_type):
        rule_unscaled(scope, op)
        return
    attr = op.attributes["value"]
    scalar = splat_scalar(attr)  # a splat is never materialized at its full shape
    data_type = scope.data_type(result_type)
    if scalar is not None:
        exp, any_scale = _split_scalar(scalar, dtype_name(scope.current_data_dtype()))
        data = scope.emit.splat(scalar / 2.0 ** exp, data_type)
        scope.set(result, Scaled(data, Scale(exp), any_scale))
        return
    values = read_dense(attr).astype(np.float64)
    exp = pow2_exponent_of_array(values, dtype_name(scope.current_data_dtype()))
    any_scale = bool(np.all((values == 0) | ~np.isfinite(values)))
    data = scope.emit.constant(_divided(values, exp), data_type)
    scope.set(result, Scaled(data, Scale(exp), any_scale))


def _split_scalar(value: float, data_dtype: str) -> tuple[int, bool]:
    """``pow2_exponent_of_array`` and the any-scale test of one value, without numpy (most
    constants are splats, and numpy's per-call cost is most of a small constant's rewrite);
    0 for 0, inf and NaN, which fit any scale."""
    magnitude = abs(value)
    if magnitude == 0 or not math.isfinite(magnitude):
        return 0, True
    return pow2_exponent_of_magnitudes(magnitude, magnitude, data_dtype), False


def _divided(values: np.ndarray, exp: int) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return values / 2.0 ** exp


def rule_producer(scope: Scope, op: ir.Operation) -> None:
    """Ops without float operands that make floats (iota): the result at scale 1, or at the
    power of two that keeps an iota's largest value (its length - 1) in the data type."""
    result = op.results[0]
    if op.name != "stablehlo.iota" or not is_scalable_type(result.type):
        rule_unscaled(scope, op)
        return
    t = ir.RankedTensorType(result.type)
    largest = t.shape[ir.IntegerAttr(op.attributes["iota_dimension"]).value] - 1
    # largest / 2^exp < 2^max_exp: the data type holds every value
    exp = (math.frexp(largest)[1] - scope.max_exponent()
           if scope.passes_data_range(largest, t.element_type) else 0)
    rule_unscaled(scope, op, scale=Scale(exp))


def _largest_magnitude(t: ir.Type) -> float:
    """The largest magnitude an unscaled element type can hold: an integer's (|-2^(w-1)| for
    signed ones), f64's (beyond every data type's); 0 for any other type."""
    if isinstance(t, ir.IntegerType):
        return float(2 ** t.width - 1 if t.is_unsigned else 2 ** (t.width - 1))
    return math.inf if isinstance(t, ir.F64Type) else 0.0


def rule_convert(scope: Scope, op: ir.Operation) -> None:
    source, result = op.operands[0], op.results[0]
    if not scope.is_scaled(source) and is_scalable_type(result.type) and \
            scope.passes_data_range(_largest_magnitude(element_type(source)),
                                    element_type(result)):
        converted = scope.emit.convert(scope.plain(source), element_type(result))
        scope.set(result, scope.encode_in_range(converted))
        return
    if not scope.is_scaled(source) or not is_scalable_type(result.type):
        rule_unscaled(scope, op)  # int/bool/f64 -> float at scale 1, float -> int unscaled
        return
    x = scope.scaled(source)
    target = element_type(result)
    data_dtype = scope.current_data_dtype()
    if target == data_dtype or str(target) == "f32" or target == element_type(source):
        scope.set(result, x)
        return
    # Narrowing (e.g. f32 -> bf16): round the unscaled value as the original does, keep the
    # scale: exact, including the target's overflow and underflow.
    emit = scope.emit
    rounded = emit.convert(emit.convert(scope.unscaled(source), target), ir.F32Type.get())
    data = emit.convert(scope.apply_exactly(rounded, Scale().over(x.scale)), data_dtype)
    scope.set(result, Scaled(data, x.scale))


def rule_custom_call(scope: Scope, op: ir.Operation) -> None:
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    if target in LAYOUT_ONLY_CUSTOM_CALLS and len(op.operands) == 1:
        rule_same_scale(scope, op)
    else:
        rule_unscaled(scope, op, report=f"(target '{target}') has no scale rule")


def rule_optimization_barrier(scope: Scope, op: ir.Operation) -> None:
    """Data goes through the barrier; scales stay symbolic beside it."""
    operands = [scope.scaled(v).data if scope.is_scaled(v) else scope.plain(v)
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
    below f16's range (gradients of scanned layers at 2^-20 flushed to 0)."""
    olds = list(op.operands)
    invariant = _invariant_carries(op)
    unset = [not fixed and _enters_unset(scope, old)
             for old, fixed in zip(olds, invariant, strict=True)]
    operands = scope.flatten(olds, unset=unset)
    types = [v.type for v in operands]
    new = scope.emit.op(op.name, operands, types, attributes_of(op), regions=2)
    for old_region, new_region, returns_flat in zip(op.regions, new.regions, (False, True),
                                                    strict=True):
        old_block = old_region.blocks[0]
        block = new_region.blocks.append(*types)
        child = scope.child(block)
        arguments = list(old_block.arguments)
        child.bind_flat(arguments, list(block.arguments))
        _keep_outer_scales(child, olds, arguments, invariant)
        _mark_unset(child, arguments, unset)
        terminator = child.rewrite_block(old_block)
        values = child.flatten(list(terminator.operands)) if returns_flat else [
            child.plain(v) for v in terminator.operands]
        child.emit.at(terminator.location).op("stablehlo.return", values, [])
    results = list(op.results)
    scope.bind_flat(results, list(new.results))
    _keep_outer_scales(scope, olds, results, invariant)
    _mark_unset(scope, results, unset)


def _invariant_carries(op: ir.Operation) -> list[bool]:
    """Per loop operand, whether the body returns it unchanged (its block argument)."""
    body = op.regions[1].blocks[0]
    returned = list(body.operations[len(body.operations) - 1].operands)
    return [value == argument for value, argument in zip(returned, body.arguments,
                                                         strict=True)]


def _keep_outer_scales(scope: Scope, olds: list[ir.Value], bound: list[ir.Value],
                       invariant: list[bool]) -> None:
    """Loop-invariant carries (a scan's weights, a mask hoisted out of the body) keep the
    operand's scale inside the loop and after it: a constant stays static, so that a select
    with it lets it follow the other operand (``constants_follow``: the -1e9 of a causal
    mask saturates to -inf instead of setting a scale that flushes the logits to 0), and
    zeros stay at any scale."""
    for old, value, fixed in zip(olds, bound, invariant, strict=True):
        outer = scope.lookup(old) if fixed else None
        if isinstance(outer, Scaled):
            data = scope.get(value)
            assert isinstance(data, Scaled)
            scope.set(value, Scaled(data.data, outer.scale, outer.any_scale))


def _enters_unset(scope: Scope, old: ir.Value) -> bool:
    """Whether a loop operand's scale enters the loop unset: zeros, or a value whose scale
    may already be unset (an outer loop's carry), under ``common-scale=max`` (the maximum
    ignores an unset exponent; other rules keep the zeros at scale 1)."""
    if scope.state.common_scale_rule != "max":
        return False
    found = scope.get(old)
    if not isinstance(found, Scaled):
        return False
    return (found.any_scale and _is_zero_fill(old)) or scope.state.maybe_unset(found.scale)


# Ops that make a zero-filled tensor of a zero-filled operand.
_ZERO_KEEPING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape",
                           "stablehlo.convert", "stablehlo.transpose", "stablehlo.copy"})


def _is_zero_fill(old: ir.Value) -> bool:
    """A splat 0 constant of the original program, or a layout op of one."""
    op = defining_op(old)
    while op is not None and op.name in _ZERO_KEEPING:
        op = defining_op(op.operands[0])
    if op is None or op.name != "stablehlo.constant":
        return False
    return splat_scalar(op.attributes["value"]) == 0.0


def _mark_unset(scope: Scope, olds: list[ir.Value], unset: list[bool]) -> None:
    """Note the scales of ``olds`` (just bound to loop values) whose exponent may be unset."""
    for old, flagged in zip(olds, unset, strict=True):
        if flagged:
            found = scope.get(old)
            assert isinstance(found, Scaled)
            scope.state.unset_factors.add(found.scale.factors[0][0])


def rule_case(scope: Scope, op: ir.Operation) -> None:
    """Every branch returns (data, scale) pairs; the results carry runtime scales."""
    index = scope.plain(op.operands[0])
    types = scope.flat_types(list(op.results))
    new = scope.emit.op(op.name, [index], types, attributes_of(op), regions=len(op.regions))
    for old_region, new_region in zip(op.regions, new.regions, strict=True):
        block = new_region.blocks.append()
        child = scope.child(block)
        terminator = child.rewrite_block(old_region.blocks[0])
        child.emit.at(terminator.location).op(
            "stablehlo.return", child.flatten(list(terminator.operands)), [])
    scope.bind_flat(list(op.results), list(new.results))
