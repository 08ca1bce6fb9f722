"""Rules of ops whose result is elementwise one of their operands (select, max, min, clamp)
and of compare: the answer must not depend on how far apart the operands' scales are.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import attributes_of
from scalify_hlo.rewrites.program_constants import program_constant
from scalify_hlo.rewrites.rule_support import (
    bind_results,
    emit_like,
    float_operand_indices,
    float_operands,
    same_scale,
)
from scalify_hlo.rewrites.rules_bounds import (
    clamp_at_bounds,
    guard_signs,
    keep_off_zero,
    same_scale_guarded,
    shifted_exactly,
    taken_only_past,
)
from scalify_hlo.rewrites.scope import RESCALE_ATTR, Scaled, Scope
from scalify_hlo.scale import ONE, Scale


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
    """Whether the largest scale keeps every operand's data normal in the data type (a
    static spread within ``reach_below_largest``: 2^14 for f16, 2^63 in f32 and bf16 data):
    today's cheap path; beyond it the operands do not all go to the largest (``_choose``)."""
    spread = scope.static_spread(floats)
    return spread is not None and spread <= scope.reach_below_largest()


def _wide_element(scope: Scope) -> ir.Type:
    """The type that holds two operands far apart: the data type when it has f32's range,
    else f32."""
    return scope.current_data_dtype() if scope.is_wide_range() else scope.state.types.f32


def rule_compare(scope: Scope, op: ir.Operation) -> None:
    """compare: operands at the midpoint of their exponents in a type that holds both (f32
    for f16 data), so the boolean is the unscaled program's at any spread up to 2^250."""
    olds = list(op.operands)
    indices, floats = float_operands(scope, olds)
    if not floats or _distinct_scales(floats) <= 1 or (
            scope.is_wide_range() and _fits_at_max(scope, floats)):
        same_scale(scope, op, merge=True)
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
    return [olds[i] if i in skip else scope.in_original_type(v) for i, v in enumerate(olds)]


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
            return scope.in_original_type(pred)
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
    data = scope.emit.op(op.name, [scope.in_original_type(olds[0]), *datas], [result_type],
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
    indices, floats = float_operands(scope, olds)
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
    pred = scope.in_original_type(olds[0])
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
    datas = [wide if branch.any_scale else shifted_exactly(scope, wide, emit.binary(
        "stablehlo.subtract", scope.exponent(branch.scale), exponent, i32))
        for branch, wide in zip(branches, wides, strict=True)]
    data = emit.op("stablehlo.select", [pred, *datas], [wide_type], _attributes(op)).result
    scope.set(op.results[0], Scaled(emit.convert(data, scope.current_data_dtype()),
                                    Scale.dynamic(exponent)))


def _reduce_int_max(scope: Scope, x: ir.Value) -> ir.Value:
    """The maximum of an i32 tensor as a rank-0 i32 (``_NO_EXPONENT`` for none)."""
    if not ir.RankedTensorType(x.type).rank:
        return x
    return scope.emit.reduce_all(x, "stablehlo.maximum", _NO_EXPONENT)


def _pick_unrelated(scope: Scope, op: ir.Operation) -> None:
    """An op that picks one operand per element, operands' scales unrelated."""
    if op.name == "stablehlo.select":
        _select_by_exponent(scope, op)
    else:
        _pick_and_normalize(scope, op)


def _choose(scope: Scope, op: ir.Operation) -> None:
    """select, max, min, clamp: the result is elementwise one of the operands."""
    olds = list(op.operands)
    _, floats = float_operands(scope, olds)
    if not scope.is_wide_range() and floats and clamp_at_bounds(scope, op):
        return
    if not floats or _distinct_scales(floats) <= 1:
        same_scale(scope, op, constants_follow=True, merge=True)
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
            same_scale(scope, op, merge=True)
        elif not scope.data_has_wide_range() or not _constants_follow(scope, op, floats):
            midpoint = scope.midpoint(floats)
            _bind_at(scope, op, floats, [scope.rescale_data(v, midpoint) for v in floats],
                     midpoint)
        return
    fits = _fits_at_max(scope, floats)
    if runtime or not fits:
        past = taken_only_past(op)
        if any(past) and _constants_follow(scope, op, floats, past):
            return  # max(x, -1e9) of x far below 1e9: the constant saturates at x's scale
    if fits or runtime:
        # One runtime scale: constants follow it (down to where they stay in range), a
        # guard's (max(x, eps)) kept off 0.
        signs = guard_signs(op) if runtime else []
        if signs:
            same_scale_guarded(scope, op, signs)
        else:
            same_scale(scope, op, constants_follow=True, merge=True)
        return
    if _constants_follow(scope, op, floats):
        return
    _pick_unrelated(scope, op)  # static scales too far apart for f16


def _constants_follow(scope: Scope, op: ir.Operation, floats: list[Scaled],
                      past: Sequence[bool] = ()) -> bool:
    """Static operands too far apart for f16 where the far ones are constants of the program
    (a mask's -1e9 against logits whose scale is static, as in a remat'd scan body): the
    constants follow the data's scale as they follow a runtime one (``constants_follow``),
    a sentinel saturating to the largest finite value, instead of picking by exponent,
    where the sentinel's 2^30 would set the scale and flush every logit to 0. In f32 and
    bf16 data the same, for data at a runtime scale too, instead of the midpoint, which moved
    the data half way each time: the two bounds of ``clip(sinh(x), -1e30, 1e30)`` took
    values near 2^-28 below f32's normal range (flushed to 0), and ``select_n`` of 1e-30,
    1e30 and x at 2^-40 took 1e30 to 2^70 and then 2^65 further, to inf. Constants the op
    takes only ``past`` the data (per operand, ``taken_only_past``) set no floor."""
    olds = list(op.operands)
    indices = float_operand_indices(scope, olds)
    constant = [program_constant(olds[i]) is not None for i in indices]
    data = [v for v, c in zip(floats, constant, strict=True) if not c and not v.any_scale]
    constants = [v for v, c in zip(floats, constant, strict=True) if c and not v.any_scale]
    if not data or not constants or not _fits_at_max(scope, data):
        return False
    floored = [v for v, c, i in zip(floats, constant, indices, strict=True)
               if c and not v.any_scale and not (past and past[i])]
    # raised to where the constants fit (at run time for a runtime scale: f32 and bf16 data)
    scale = scope.at_least(scope.common_scale(data, merge=True), scope.constant_floor(floored))
    ceiling = min(v.scale.exp for v in constants) - scope.min_normal_exponent()
    if scope.data_has_wide_range() and ceiling < scope.max_exponent():
        # and a constant below 2 kept normal: 1e-30 beside data at 2^40 was subnormal, 0
        scale = scope.at_most(scale, ceiling)
    datas = [scope.rescale_constant(v, scale) if c and not v.any_scale
             else scope.rescale_data(v, scale) for v, c in zip(floats, constant, strict=True)]
    signs = guard_signs(op)
    if signs:  # a guard's constant 2^15 or more below the data's static scale: kept off 0
        datas = keep_off_zero(scope, [signs[i] for i in float_operand_indices(scope, olds)],
                              datas)
    _bind_at(scope, op, floats, datas, scale)
    return True


def reduce_past_constant_inits(scope: Scope, op: ir.Operation) -> bool:
    """A max or min reduce of an f16 step whose inits are constants it takes only past the
    data (``taken_only_past``): they follow the data's scale, saturated in f16
    (``_constants_follow``), where the common scale's maximum put ``finfo(f32).min``'s 2^128
    on the data and every value came out 0 at any scale, an infinity NaN (``lax.reduce(x,
    finfo.min, max)``, a max pool's ``reduce_window`` so written). f32 and bf16 steps keep
    their data at ``common-scale=first``'s choice, where the init follows it already."""
    past = taken_only_past(op)
    if scope.data_has_wide_range() or not any(past):
        return False
    return _constants_follow(scope, op, float_operands(scope, list(op.operands))[1], past)


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
    (``Scope.constant_floor``). Branches far apart: see ``_choose``."""
    _choose(scope, op)


def rule_choose(scope: Scope, op: ir.Operation) -> None:
    """max, min, clamp: as select (``_choose``)."""
    _choose(scope, op)
