"""How each family of StableHLO ops is rewritten on (data, scale) pairs.

Every rule has the signature ``rule(scope, op)``: it reads the op's operands from the
scope's value map, emits the rewritten ops and binds the op's results. The table that
assigns a rule to each op name is ``rules.py``. The rules of elementwise, reducing, layout
and producing ops are here; select/max/min/clamp/compare are in ``rules_pick.py``,
while/case/optimization_barrier in ``rules_control_flow.py``, and what they share (and the
unscaled fallback) in ``rule_support.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import (
    finite_data,
    finite_splat,
    read_dense,
    splat_constant_value,
    splat_scalar,
)
from scalify_hlo.rewrites.emitter import (
    dtype_name,
    element_type,
    is_scalable_type,
    numpy_dtype,
    shape_of,
)
from scalify_hlo.rewrites.op_table import Trait, has_trait, target_has_trait
from scalify_hlo.rewrites.program_constants import program_constant, program_splat
from scalify_hlo.rewrites.regions import is_additive, is_assignment, is_homogeneous
from scalify_hlo.rewrites.rule_support import (
    bind_results,
    emit_like,
    float_operand_indices,
    operands_at_common_scale,
    rule_unscaled,
    same_scale,
)
from scalify_hlo.rewrites.rules_bias import add_with_mask_bias
from scalify_hlo.rewrites.rules_control_flow import rule_case, rule_optimization_barrier, rule_while
from scalify_hlo.rewrites.rules_pick import (
    reduce_past_constant_inits,
    rule_choose,
    rule_compare,
    rule_select,
)
from scalify_hlo.rewrites.rules_small import small_result_scale
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.value_signs import is_nonpositive
from scalify_hlo.scale import (
    ONE,
    Scale,
    pow2_exponent_of_array,
    pow2_exponent_of_magnitudes,
    sqrt_size_exponent,
)

__all__ = ["bind_results", "emit_like",
           "float_operand_indices", "operands_at_common_scale", "rule_case", "rule_choose",
           "rule_compare", "rule_optimization_barrier", "rule_select", "rule_unscaled",
           "rule_while"]

def rule_nonlinear(scope: Scope, op: ir.Operation) -> None:
    """Run on the unscaled operands, results stored at scale 1 where the data type holds
    them. With f16 data that is where the op's results are bounded (the op table's
    ``RANGE_BOUNDED``, ``BOUNDED_WHERE_NONPOSITIVE`` with an operand that is never positive),
    or a binade above a smaller operand scale for one that vanishes at 0 (``rules_small``);
    ``OPERAND_BOUNDED`` results (floor, round) take the larger of the operand's static scale
    and 1; any other results have their largest magnitude measured (``encode_in_range``):
    at scale 1, exp(12) and floor(1e5) were inf where the original holds them."""
    if _stored_at_one(scope, op):
        rule_unscaled(scope, op, scale=small_result_scale(scope, op))
        return
    if has_trait(op.name, Trait.OPERAND_BOUNDED):
        operand = scope.scaled(op.operands[0])
        if operand.scale.is_static:
            rule_unscaled(scope, op, scale=Scale(max(operand.scale.exp, 0)))
            return
    rule_unscaled(scope, op, scale=small_result_scale(scope, op, measured=True), measured=True)
    scope.state.context.bump("scalify.measured-nonlinear")


def _stored_at_one(scope: Scope, op: ir.Operation) -> bool:
    """Whether scale 1 holds every float result of the nonlinear ``op``: the data type has
    f32's range, the op's results are bounded, or there are no float results."""
    if scope.is_wide_range():
        return True
    if has_trait(op.name, Trait.RANGE_BOUNDED) or not any(
            is_scalable_type(r.type) for r in op.results):
        return True
    return has_trait(op.name, Trait.BOUNDED_WHERE_NONPOSITIVE) and is_nonpositive(op.operands[0])


def rule_fallback(scope: Scope, op: ir.Operation) -> None:
    rule_unscaled(scope, op, report="has no scale rule")


def rule_same_scale(scope: Scope, op: ir.Operation) -> None:
    """Linear-in-scale ops: float operands at one common scale, results at that scale."""
    same_scale(scope, op)


def rule_additive(scope: Scope, op: ir.Operation) -> None:
    """add, subtract: as same-scale; under common-scale=first with a constant operand, never
    below the constant's scale (``CommonScale._first_above_constants``; a zero constant is
    any-scale and sets none). A runtime + constant add whose
    result later products raise to a power (a series' ``y = x/2 - 2``, ``drift.py``) is
    then rescaled (amax): whatever moved its data off unit (an argument's data far from 1)
    would be multiplied by every step of the series. A mask's bias (zeros and sentinels)
    follows the other operand's scale (``rules_bias``)."""
    if not add_with_mask_bias(scope, op):
        same_scale(scope, op, above_constants=scope.state.common_scale_rule == "first" and any(
            program_constant(v) is not None for v in op.operands))
    if op in scope.state.compounding:
        scope.rescale_results(op, "amax:nearest")


def rule_merge(scope: Scope, op: ir.Operation) -> None:
    """Ops that put pieces of their operands together without arithmetic between them
    (concatenate, max, pad): a common scale between the operands' (see Scope.common_scale)."""
    same_scale(scope, op, merge=True)


def rule_scale_invariant(scope: Scope, op: ir.Operation) -> None:
    """``f(c*x) = f(x)`` (sign, atan2): common scale in, scale 1 out."""
    operands, _ = operands_at_common_scale(scope, op)
    bind_results(scope, op, emit_like(scope, op, operands), ONE)


def rule_with_region(scope: Scope, op: ir.Operation) -> None:
    """sort: like ``rule_same_scale`` when its comparator commutes with scaling, otherwise
    run unscaled and report why (scatter has ``rule_scatter``)."""
    if all(is_homogeneous(r) for r in op.regions):
        rule_same_scale(scope, op)
    else:
        rule_unscaled(scope, op, report="has a region that does not commute with scaling")


def rule_scatter(scope: Scope, op: ir.Operation) -> None:
    """An assignment puts its updates beside the operand's values (a merge: in f32 data a
    ``finfo(f32).max`` written into x's tensor took x's scale and overflowed); an update
    that commutes with scaling (add) is same-scale."""
    region = op.regions[0]
    if is_assignment(region):
        rule_merge(scope, op)
    elif is_homogeneous(region):
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
    """multiply/divide: the same op on data, the scales combined by ``scale_of``. A factor of
    only 0, inf and NaN makes a product of only those: any-scale, as the factor is."""
    if not _exact_constant_product(scope, op):
        a, b = (scope.scaled(v) for v in op.operands)
        bind_results(scope, op, emit_like(scope, op, [a.data, b.data]),
                     scale_of(a.scale, b.scale), a.any_scale or b.any_scale)
        return
    state, narrow = scope.state, scope.current_data_dtype()
    state.current_dtype = state.types.f32  # scaled() makes the constant again in f32
    try:
        a, b = (scope.scaled(v) for v in op.operands)
        wide = emit_like(scope, op, [a.data, b.data]).results[0]
    finally:
        state.current_dtype = narrow
    data = scope.emit.convert(wide, narrow)
    scope.set(scope.results_of(op)[0][0], Scaled(data, scale_of(a.scale, b.scale),
                                                 a.any_scale or b.any_scale))
    state.context.bump("scalify.exact-constant-products")


def rule_multiply(scope: Scope, op: ir.Operation) -> None:
    _product(scope, op, Scale.times)


def rule_divide(scope: Scope, op: ir.Operation) -> None:
    _product(scope, op, Scale.over)


def rule_square(scope: Scope, op: ir.Operation) -> None:
    """The square of a zero (optax's norms square a real leaf's ``imag``, a zero fill) is a
    zero: any-scale, so that adding it to the squares of tiny values sets no scale (it took
    their common scale to 1 and flushed them: a global norm of gradients near 2^-70 was 0)."""
    a = scope.scaled(op.operands[0])
    bind_results(scope, op, emit_like(scope, op, [a.data]), a.scale.times(a.scale),
                 a.any_scale)


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
    k = sqrt_size_exponent(_contracting_size(op)) if scope.state.unit_shifts else 0
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
    moves ``2^k ~ sqrt(N)`` from data to scale. A sum's constant init is an add of a
    constant (``above_constants``): in f32 data ``lax.reduce(x, 1e30, add)`` of x at 2^-40
    took x's scale, the factor to it clamped at 2^127, and the sum came out 1e30 / 4096."""
    region = op.regions[0]
    if not is_homogeneous(region):
        rule_unscaled(scope, op, report="has a reducer that does not commute with scaling")
        return
    additive = is_additive(region)
    if not additive and reduce_past_constant_inits(scope, op):
        return
    operands, scale = operands_at_common_scale(scope, op, above_constants=additive)
    types = scope.state.types
    data_dtype, f32 = scope.current_data_dtype(), types.f32
    if additive and data_dtype != f32:
        # Sum f16/bf16 data in f32, as JAX sums f16 and as the f32 original does: a sum of
        # N same-sign values of unit scale passes f16's 65504 from N ~ 65k on.
        def accumulator_type(t: ir.Type) -> ir.Type:
            return types.with_element_type(t, f32) if types.is_scalable(t) else t

        operands = [_widened(scope, v) if types.is_scalable(v.type) else v for v in operands]
        new = emit_like(scope, op, operands, accumulator_type)
    else:
        new = emit_like(scope, op, operands)
    k = sqrt_size_exponent(_reduced_size(op)) if additive and scope.state.unit_shifts else 0
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
        _set_splat(scope, result, scalar, data_type)
        return
    values = read_dense(attr).astype(np.float64)
    exp = (pow2_exponent_of_array(values, dtype_name(scope.current_data_dtype()))
           if scope.state.unit_shifts else 0)
    any_scale = bool(np.all((values == 0) | ~np.isfinite(values)))
    data = scope.emit.constant(finite_data(values, exp, data_type), data_type)
    scope.set(result, Scaled(data, Scale(exp), any_scale))


def _set_splat(scope: Scope, result: ir.Value, scalar: float, data_type: ir.Type) -> None:
    """``result`` as a splat of ``scalar``, split at rewrite time (``rule_constant``)."""
    exp, any_scale = _split_scalar(scalar, dtype_name(scope.current_data_dtype()))
    exp = exp if scope.state.unit_shifts else 0
    scope.set(result, Scaled(scope.emit.splat(finite_splat(scalar, exp, data_type), data_type),
                             Scale(exp), any_scale))


def _split_scalar(value: float, data_dtype: str) -> tuple[int, bool]:
    """``pow2_exponent_of_array`` and the any-scale test of one value, without numpy (most
    constants are splats, and numpy's per-call cost is most of a small constant's rewrite);
    0 for 0, inf and NaN, which fit any scale."""
    magnitude = abs(value)
    if magnitude == 0 or not math.isfinite(magnitude):
        return 0, True
    return pow2_exponent_of_magnitudes(magnitude, magnitude, data_dtype), False


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
           if scope.exceeds_data_range(largest, t.element_type) else 0)
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
            scope.exceeds_data_range(_largest_magnitude(element_type(source)),
                                     element_type(result)):
        scalar = program_splat(source)
        if scalar is not None:  # jnp.where(x > 1, 1, x)'s int 1: known, no measurement
            _set_splat(scope, result, scalar, scope.data_type(result.type))
            return
        converted = scope.emit.convert(scope.in_original_type(source), element_type(result))
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
    if target_has_trait(target, Trait.LAYOUT_ONLY) and len(op.operands) == 1:
        rule_same_scale(scope, op)
    else:
        rule_unscaled(scope, op, report=f"(target '{target}') has no scale rule")
