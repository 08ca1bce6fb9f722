"""Max, min and clamp against constants of the program in a narrow data type (f16): a bound
must not flush to 0 when it follows an operand's runtime scale far above it.

f16 data spans 2^40 at one scale. ``jnp.clip(g, -1, 1)`` of gradients at 2^30 brought -1
and 1 to 2^-30 of that scale, both 0, and the clip gave 0 where the original gives -1 or 1
(``optax.clip``, ``relu6``, a clip of a step's updates). Two rules:

* A clamp between constants (``stablehlo.clamp``, or ``jnp.clip``'s ``min(max(x, lo), hi)``,
  StableHLO's definition of clamp) has its result between its bounds, so it takes a scale
  the bounds fit at, and the operand is brought to that scale in f32, where a value far past
  a bound becomes inf (or a large number) and the clamp makes it the bound: exact at any
  spread. The inner ``max`` stays as it was (read only by the ``min``, it is dead code).
* A one-sided guard (``max(x, eps)`` with eps > 0, ``min(x, c)`` with c < 0, or the same
  as ``where(x < eps, eps, x)``) whose constant would flush becomes the data type's smallest
  subnormal of the constant's sign: the result keeps the bound the op promises
  (``max(x, eps) >= eps > 0``), and ``x / (max(x, eps) + x)`` of a zero is 0, not 0/0
  (values at 2^30, f16 data).
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import defining_op, numpy_dtype
from scalify_hlo.rewrites.program_constants import program_constant, program_splat
from scalify_hlo.rewrites.regions import combiner
from scalify_hlo.rewrites.rule_support import bind_results, emit_like, operands_at_common_scale
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.value_signs import is_nonnegative, is_nonpositive
from scalify_hlo.scale import Scale

_MAX, _MIN, _CLAMP = "stablehlo.maximum", "stablehlo.minimum", "stablehlo.clamp"
_FACTOR_SPAN = 300  # |shift| beyond which every f32 data value is 0 or inf anyway


# A select(v dir c, c, y) caps y from the side its comparison names (v on the left): where
# v > c it takes c, so it is at most c.
_SELECT_CAP = {"GT": _MIN, "GE": _MIN, "LT": _MAX, "LE": _MAX}
_SWAPPED = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}


def _direction(compare: ir.Operation) -> str | None:
    """A float compare's direction (GT...), None for a total-order compare (NaN ordered)."""
    if "compare_type" in compare.attributes and "FLOAT" not in str(
            compare.attributes["compare_type"]):
        return None
    return str(compare.attributes["comparison_direction"]).split()[-1].rstrip(">")


class _Cap(NamedTuple):
    """``kind(y, bound)`` (kind max or min) with a constant ``bound`` of the program; for a
    select, the value its compare reads (``compared``), else None."""

    kind: str
    y: ir.Value
    bound: ir.Value
    compared: ir.Value | None


def _cap(op: ir.Operation | None) -> _Cap | None:
    """``op`` as a cap: a max or a min, or ``select(v dir c, c, y)`` with bound c (compared
    v; the false branch is y, so a NaN passes as it does through a max or min)."""
    if op is None:
        return None
    olds = list(op.operands)
    if op.name in (_MAX, _MIN):
        for y, bound in (olds, olds[::-1]):
            if program_constant(bound) is not None and program_constant(y) is None:
                return _Cap(op.name, y, bound, None)
        return None
    if op.name != "stablehlo.select":
        return None
    pred, taken, y = olds
    compare = defining_op(pred)
    value = program_splat(taken)
    if compare is None or compare.name != "stablehlo.compare" or value is None or (
            program_constant(y) is not None):
        return None
    direction = _direction(compare)
    for v, c, d in ((*compare.operands, direction), (*list(compare.operands)[::-1],
                                                     _SWAPPED.get(direction or ""))):
        if d in _SELECT_CAP and program_splat(c) == value and program_constant(v) is None:
            return _Cap(_SELECT_CAP[d], y, taken, v)
    return None


_Bounds = tuple[ir.Value, ir.Value | None, ir.Value | None]


def constant_clamp(op: ir.Operation) -> _Bounds | None:
    """(x, lo, hi) of the original program when ``op`` clamps x between constants: a
    ``clamp`` with constant bounds, ``min(max(x, lo), hi)`` (StableHLO's definition of
    clamp, so any constants), or a cap of either side of a cap of the other (``_cap``:
    ``max(min(x, hi), lo)``, ``jax.nn.hard_tanh``'s ``where(x > hi, hi, where(x < lo, lo,
    x))``) with splats lo <= hi. A cap of a value whose sign bounds its other side
    (``min(1, c / norm)`` of a gradient clip: at least 0) is one with that bound None."""
    olds = list(op.operands)
    if op.name == _CLAMP:
        lo, x, hi = olds
        if program_constant(lo) is not None and program_constant(hi) is not None:
            return x, lo, hi
        return None
    outer = _cap(op)
    inner = None if outer is None else _cap(defining_op(outer.y))
    if outer is not None and inner is None:
        return _signed_cap(outer)
    if outer is None or inner is None or inner.kind == outer.kind:
        return None
    x = inner.y
    if (inner.compared is not None and inner.compared != x) or (
            outer.compared is not None and outer.compared != outer.y
            and outer.compared != x):
        return None  # a select that compares something else than what it caps
    lo, hi = (inner.bound, outer.bound) if outer.kind == _MIN else (outer.bound, inner.bound)
    if outer.kind == _MIN and outer.compared is None and inner.compared is None:
        return x, lo, hi  # min(max(x, lo), hi): clamp's definition
    low, high = program_splat(lo), program_splat(hi)
    return (x, lo, hi) if low is not None and high is not None and low <= high else None


def _signed_cap(cap: _Cap) -> _Bounds | None:
    """``min(y, hi)`` with splat hi > 0 of a y never negative (its result in [0, hi]), or
    ``max(y, lo)`` with lo < 0 of a y never positive, as (y, lo, hi) with the side that the
    sign bounds None."""
    if cap.compared is not None and cap.compared != cap.y:
        return None
    bound = program_splat(cap.bound)
    if bound is None or not bound == bound:  # NaN: no bound
        return None
    if cap.kind == _MIN and bound > 0 and is_nonnegative(cap.y):
        return cap.y, None, cap.bound
    if cap.kind == _MAX and bound < 0 and is_nonpositive(cap.y):
        return cap.y, cap.bound, None
    return None


def clamp_at_bounds(scope: Scope, op: ir.Operation) -> bool:
    """``op`` as a clamp at a scale its constant bounds fit (see the module docstring); False
    where it is no clamp between constants, or where the usual rule keeps the bounds (the
    operand's scale static and at or below that scale)."""
    found = constant_clamp(op)
    if found is None:
        return False
    x, lo, hi = (None if old is None else scope.scaled(old) for old in found)
    given = [b for b in (lo, hi) if b is not None]
    bounds = [b for b in given if not b.any_scale and b.scale.is_static]
    if x.any_scale or not bounds or len(bounds) < sum(not b.any_scale for b in given):
        return False
    headroom = -scope.min_normal_exponent()
    exps = [b.scale.exp for b in bounds]
    top, low = max(exps), min(exps)
    # the largest bound's data below 2^15 in f16, the smallest normal where the span allows
    cap = max(top - headroom, min(top, low + headroom))
    # as the constants of a choose follow a scale; a bound x reaches only by passing 0 (a
    # clip's -1 and 1) needs no floor: x's values far below it stay (saturated in _emit_clamp)
    _, lo_old, hi_old = found
    past = (lo_old is not None and is_nonpositive(lo_old),
            hi_old is not None and is_nonnegative(hi_old))
    floor = scope.constant_floor([b for b, p in zip((lo, hi), past, strict=True)
                                  if b is not None and not p and not b.any_scale])
    if x.scale.is_static:
        if x.scale.exp <= cap:
            return False
        scale = Scale(cap)
    else:
        emit, i32 = scope.emit, scope.exponent_type()
        exponent = scope.exponent(x.scale)
        if floor is not None:
            exponent = emit.binary("stablehlo.maximum", exponent, emit.int_scalar(floor), i32)
        scale = Scale.dynamic(emit.binary("stablehlo.minimum", exponent, emit.int_scalar(cap),
                                          i32))
    _emit_clamp(scope, op, x, lo, hi, scale, saturate=not scale.is_static and any(past))
    return True


def _emit_clamp(scope: Scope, op: ir.Operation, x: Scaled, lo: Scaled | None,
                hi: Scaled | None, scale: Scale, saturate: bool = False) -> None:
    """The clamp in f32 at ``scale``, then the data type: x's data is shifted in three normal
    factors (``shifted_exactly``), so a value past a bound is inf or a large number, never
    NaN, and the clamp makes it the bound (a max or min where one side has no bound). With
    ``saturate``, bounds past the data type's range at a runtime scale are its largest
    finite value, as a constant that follows a scale is (``Scope.rescale_constant``)."""
    emit, types, i32 = scope.emit, scope.state.types, scope.exponent_type()
    f32 = types.f32
    shift = emit.binary("stablehlo.subtract", scope.exponent(x.scale), scope.exponent(scale),
                        i32)
    wide = shifted_exactly(scope, emit.convert(x.data, f32), shift)
    given = [b for b in (lo, hi) if b is not None]
    wide_bounds = scope.in_type(given, scale, f32)
    if saturate:
        largest = float(ml_dtypes.finfo(numpy_dtype(scope.current_data_dtype())).max)
        wide_bounds = [emit.op(_CLAMP, [emit.splat(-largest, b.type), b,
                                        emit.splat(largest, b.type)], [b.type]).result
                       for b in wide_bounds]
    if lo is None or hi is None:
        clamped = emit.binary(_MIN if lo is None else _MAX, wide, wide_bounds[0], wide.type)
    else:
        clamped = emit.op(_CLAMP, [wide_bounds[0], wide, wide_bounds[1]], [wide.type]).result
    scope.set(op.results[0], Scaled(emit.convert(clamped, scope.current_data_dtype()), scale))


def shifted_exactly(scope: Scope, wide: ir.Value, shift: ir.Value) -> ir.Value:
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


def _choice_kinds(op: ir.Operation) -> list[str]:
    """Per operand: max or min where the op takes it as that side of a max or min (both
    operands of a max or min, a clamp's bounds, the inits of a max or min reduce, the
    branches of a select read only by such reduces), else ""."""
    olds = list(op.operands)
    if op.name in (_MAX, _MIN):
        return [op.name] * len(olds)
    if op.name == _CLAMP:
        return [_MAX, "", _MIN]
    if op.name == "stablehlo.select":
        kind = _reduced_only_by(op.results[0])
        return ["", kind, kind]
    kind = _reducer(op)
    if kind:
        half = len(olds) // 2
        return [""] * half + [kind] * (len(olds) - half)
    return [""] * len(olds)


def _reducer(op: ir.Operation) -> str:
    """max or min for a reduce or reduce_window whose body is ``return(max(arg0, arg1))``
    (or min), else ""."""
    if op.name not in ("stablehlo.reduce", "stablehlo.reduce_window"):
        return ""
    kind = combiner(op)
    return kind if kind in (_MAX, _MIN) else ""


def _reduced_only_by(value: ir.Value) -> str:
    """max or min where every reader of ``value`` is a reduce of that kind reading it as an
    input, else "". A masked max's ``where(mask, x, finfo.min)`` so read takes its sentinel
    only past the data as the reduce's init would: a finite value never lies below the
    sentinel saturated at the data's scale, so the reduce's result is the same."""
    kinds = set()
    for use in value.uses:
        reader = use.owner.operation
        kind = _reducer(reader)
        if not kind or use.operand_number >= len(reader.operands) // 2:
            return ""
        kinds.add(kind)
    return kinds.pop() if len(kinds) == 1 else ""


def taken_only_past(op: ir.Operation) -> list[bool]:
    """Per operand: whether it is a constant of the program that the op takes only where
    another operand passes it: a max's c <= 0 (``max(x, -1e9)``, a clip's lower bound, a
    max reduce's ``finfo.min`` init), a min's c >= 0. Data far below such a constant never
    passes it (only an infinity does), so the constant need not fit at the data's scale:
    saturated there, it keeps every finite value (``rules_pick._constants_follow``)."""
    past = []
    for kind, old in zip(_choice_kinds(op), op.operands, strict=True):
        past.append(bool(kind) and program_constant(old) is not None and (
            is_nonpositive(old) if kind == _MAX else is_nonnegative(old)))
    return past


def guard_signs(op: ir.Operation) -> list[int]:
    """Per operand of a max or min, or of a select that caps its false branch (``_cap``):
    +1 for a splat constant c > 0 that keeps the result at least c, -1 for c < 0 that keeps
    it at most c (a bound on the side of 0 that a flush would cross), else 0; empty where
    there is no such operand."""
    if op.name in (_MAX, _MIN):
        kinds = [op.name] * len(op.operands)
    else:
        cap = _cap(op) if op.name == "stablehlo.select" else None
        if cap is None or cap.compared != cap.y:  # only select(y dir c, c, y): max or min of y
            return []
        kinds = ["", cap.kind, ""]
    signs = []
    for kind, old in zip(kinds, op.operands, strict=True):
        value = program_splat(old) if kind else None
        sign = 0 if value is None or not value == value else (  # NaN: no bound
            1 if kind == _MAX and value > 0 else -1 if kind == _MIN and value < 0 else 0)
        signs.append(sign)
    return signs if any(signs) else []


def keep_off_zero(scope: Scope, signs: list[int], operands: list[ir.Value]) -> list[ir.Value]:
    """``operands`` (the op's, its floats at the common scale) with each guard constant kept
    off 0: ``max(c', tiny)`` for c > 0, ``min(c', -tiny)`` for c < 0, where tiny is the data
    type's smallest subnormal and c' the constant at that scale (one op on a splat)."""
    tiny = float(ml_dtypes.finfo(numpy_dtype(scope.current_data_dtype())).smallest_subnormal)
    kept = list(operands)
    for i, sign in enumerate(signs):
        if sign:
            t = kept[i].type
            kept[i] = scope.emit.binary(_MAX if sign > 0 else _MIN, kept[i],
                                        scope.emit.splat(sign * tiny, t), t)
    return kept


def same_scale_guarded(scope: Scope, op: ir.Operation, signs: list[int]) -> None:
    """``same_scale(constants_follow=True, merge=True)`` with the guard constants kept off 0
    (``keep_off_zero``)."""
    operands, scale = operands_at_common_scale(scope, op, constants_follow=True, merge=True)
    floats = [scope.scaled(old) for old in op.operands if scope.is_scaled(old)]
    bind_results(scope, op, emit_like(scope, op, keep_off_zero(scope, signs, operands)),
                 scale, all(f.any_scale for f in floats))
