"""An add of a mask's bias: the bias's sentinels saturate at the other operand's scale
instead of setting the sum's scale.

An additive attention mask (``scores + where(mask, 0, -1e9)``, ``(1 - mask) *
finfo(f32).min``, a causal mask folded into a constant) is a tensor of zeros and sentinels.
The add's common scale was the larger, the bias's, and the scores' data at that scale
flushed to 0: in f16 at the 2^29 of -1e9 (the softmax over the unmasked keys came out
uniform, scores at scale 1, 0.49 off), in f32 data at the 2^127 of ``finfo(f32).min``
(XLA flushes f32 subnormals: T5's position bias added to such a mask was lost). Where
every value of one operand is 0 or a constant of the program (``value_sets``), 0 among
them, or a multiple of a sentinel (HF's ``(1 - mask.astype(f32)) * finfo(f32).min`` of an
int mask), the sum is the other operand exactly where the bias is 0, so it takes the other
operand's scale. The bias's constants follow that scale as a select's constant branch does
(``Scope.common_scale``'s ``constants_follow``): down to where a constant below the
saturation level still fits (``_floor``), and a sentinel beyond it saturates, to half the
largest finite value (2^100 in f32-range data), so that the sum with the addend stays
finite. A masked score then stays far below every unmasked one, and a fully
masked row is one large negative number in every element (a uniform softmax, as in the
original for scores below the sentinel's rounding step), where inf would give NaN.
"""

from __future__ import annotations

import math

from jax.extend.mlir import ir

from scalify_hlo.rewrites.common_scale import sentinel_floor
from scalify_hlo.rewrites.emitter import dtype_name
from scalify_hlo.rewrites.rule_support import bind_results, emit_like, float_operands
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.value_sets import step, value_set
from scalify_hlo.scale import LARGEST_FINITE

_SENTINEL_SHARE = 0.5  # of the data type's largest finite value: room for the addend
# f32-range data saturates lower, leaving room for a later rescale up (common-scale=first
# brought T5's bias, finfo(f32).min saturated at 2^-3, to scores at 2^-8: inf, then NaN).
_WIDE_SENTINEL = 2.0 ** 100


def add_with_mask_bias(scope: Scope, op: ir.Operation) -> bool:
    """add or subtract with a mask's bias (zeros and constants) beside other data: the sum
    at the other operands' scale, the bias following it (module docstring). False where no
    operand is such a bias, or every one is."""
    olds = list(op.operands)
    indices, floats = float_operands(scope, olds)
    if len(indices) != len(olds):
        return False
    is_bias = [_is_mask_bias(scope, olds[i]) for i in indices]
    if all(is_bias) or not any(is_bias):
        return False
    biases = [v for v, bias in zip(floats, is_bias, strict=True) if bias and not v.any_scale]
    others = [v for v, bias in zip(floats, is_bias, strict=True) if not bias and not v.any_scale]
    if not biases or not others:
        return False
    scale = scope.at_least(scope.common_scale(others), _floor(scope, biases))
    datas = [scope.rescale_saturated(v, scale, _sentinel(scope)) if bias
             else scope.rescale_data(v, scale)
             for v, bias in zip(floats, is_bias, strict=True)]
    bind_results(scope, op, emit_like(scope, op, datas), scale)
    return True


def _is_mask_bias(scope: Scope, old: ir.Value) -> bool:
    """Every element 0 or one of a few constants, both kinds present, none NaN; or every
    element a multiple of a sentinel (``value_sets.step``: an int mask's bias)."""
    values = value_set(old, scope.state.value_sets)
    if values is not None:
        return 0.0 in values and not any(math.isnan(v) for v in values) and any(
            v != 0.0 for v in values)
    multiple_of = step(old, scope.state.value_steps)
    return multiple_of is not None and not math.isinf(multiple_of) and (
        multiple_of > _sentinel(scope))


def _sentinel(scope: Scope) -> float:
    """Where a bias saturates: beyond it, a value of a mask's bias is a sentinel."""
    largest = LARGEST_FINITE[dtype_name(scope.current_data_dtype())]
    return min(_SENTINEL_SHARE * largest, _WIDE_SENTINEL)


def _floor(scope: Scope, biases: list[Scaled]) -> int | None:
    """The lowest exponent at which every constant of the biases below the saturation level
    keeps its value: its data (below 2 at its own scale, ``rule_constant``) stays below
    ``2^room``, the largest power of two under that level (2^14 in f16, 2^100 in f32-range
    data, where f32 data at 2^-110 saturated a bias's 1.0 at 2^100, 2^-10 of its value).
    Constants beyond it are sentinels, which saturate, as does an int mask's bias (a
    runtime scale): the floor keeps them at 2^SENTINEL_EXP or more (``sentinel_floor``)."""
    room = math.floor(math.log2(_sentinel(scope)))
    floors = [v.scale.exp + 1 - room for v in biases
              if v.scale.is_static and v.scale.exp <= room]
    if any(not v.scale.is_static or v.scale.exp > room for v in biases):
        floors.append(sentinel_floor(_sentinel(scope)))  # a saturated sentinel keeps its effect
    return max(floors) if floors else None
