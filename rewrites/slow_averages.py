"""Which step state is a slow moving average, and so keeps f32 data with 16-bit data.

An average of the weights (an EMA or Polyak average, ``ema = 0.9999 * ema + 0.0001 * w``:
what diffusion models sample with and what a self-distillation teacher is) moves by a
small fraction of its distance to the weights each step. 16-bit data rounds such a move
away: f16 holds 11 significand bits, bf16 8, and ``0.9999 * ema`` rounds back to ``ema``.
Measured over 200 calls (``optax.incremental_update`` with step 1e-4): the f16 average
moved 60% off the f32 one, the bf16 average not at all. So state that a step returns as

    r = c * m + t        or        r = m + k * (x - m)        (``add``s, in either order)

with ``m`` the entry argument of ``r``'s type, ``c`` a constant in [``SLOW``, 1) (``k`` one
in (0, 1 - ``SLOW``]), and ``t`` (``x``) not a gradient, holds f32 data: the argument, the
decayed copy and the sum, as the original computes them (``t`` itself is the increment,
which 16 bits hold to their relative precision). BatchNorm's running statistics (Flax's
momentum 0.99) are such averages too. A first moment of the gradient (Adam's ``mu``,
``b1 = 0.9``) is ``moment_values``' and keeps the data type or the moment format; a square
(Adam's ``nu``) is ``square_values``'.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import defining_op
from scalify_hlo.rewrites.moment_values import (
    constant_products,
    decayed_state,
    is_gradient,
    state_candidates,
    through_converts,
)

# The smallest decay that makes an average slow: a move of 1% per step is about 20 of f16's
# rounding steps and 2.5 of bf16's, where the average's error accumulates.
SLOW = 0.99


def _converts_between(value: ir.Value, end: ir.Value) -> list[ir.Value]:
    """``value`` and the values its converts peel off down to ``end``."""
    chain = [value]
    while value != end and (op := defining_op(value)) is not None:
        value = op.operands[0]
        chain.append(value)
    return chain


def _average_of(value: ir.Value, arguments: set[ir.Value]) -> list[ir.Value] | None:
    """The values from the argument ``m`` to ``value`` where ``value = c * m + t`` is a slow
    average of ``m`` (see the module docstring), else None."""
    total = through_converts(value)
    op = defining_op(total)
    if op is None or op.name != "stablehlo.add":
        return None
    a, b = op.operands
    for decayed, term in ((a, b), (b, a)):
        state = decayed_state(decayed, 1.0, SLOW)
        if state in arguments and not is_gradient(term):
            return [state, decayed, *_converts_between(value, total)]
        state = through_converts(decayed)
        if state in arguments and _moves_toward(term, state):  # m + k * (x - m)
            return [state, *_converts_between(decayed, state),
                    *_converts_between(value, total)]
    return None


def _moves_toward(term: ir.Value, state: ir.Value) -> bool:
    """Whether ``term`` is ``k * (x - m)`` (either order) of the state ``m`` with a constant
    ``k`` in (0, 1 - SLOW] and ``x`` not a gradient: an EMA written as a step toward its
    target (``ema + (1 - d) * (w - ema)``, PyTorch's ``lerp``)."""
    for k, other in constant_products(term):
        difference = defining_op(other)
        if (0.0 < k <= 1.0 - SLOW and difference is not None
                and difference.name == "stablehlo.subtract"
                and through_converts(difference.operands[1]) == state
                and not is_gradient(difference.operands[0])):
            return True
    return False


def slow_averages(func: ir.Operation, squares: set[ir.Value]) -> set[ir.Value]:
    """The entry arguments of ``func`` that are slow averages, the returned values that
    update them (same type), and the decayed copies and sums between them."""
    arguments, returned = state_candidates(func, squares)
    found: set[ir.Value] = set()
    for value in returned:
        chain = _average_of(value, arguments)
        if chain is not None and chain[0].type == value.type:
            found.update(chain)
    return found

