"""Which adds of a runtime value and a constant must be rescaled: those a series raises to
a power.

Under ``common-scale=first`` (the f32 and bf16 default) ``x + c`` keeps ``x``'s scale: one
rescale, and an in-place update hands its weight's scale back. Where the constant dominates
the sum (``y = x/2 - 2`` of a Clenshaw series with x at 2^-20), the data of the result is
off unit by the ratio of the two, up to the data type's range; so it is where x's own data
is far from 1 (data 2^-20 at scale 2^20). That is harmless once; it is not where the
result's data is raised to a power by the products that follow: every ``y * b`` of
bessel_i0e's series, every ``p * y + c`` of a polynomial in Horner's form, moves the data
as far again, and a few of them overflow or flush it.

This analysis finds those adds before rewriting. Each runtime + constant add is an origin
of unknown data drift; a forward walk gives every value the power to which each origin's
data enters it (products add powers, quotients subtract, sqrt halves, ops that keep the
range of their operands, such as add, select or a reshape, take the largest), and an origin
whose power reaches 2 in magnitude compounds (``COMPOUNDING_POWER``). scalify rescales
those adds' results (amax: one reduction, bessel_i0e's two ``y``); the others keep the
first operand's scale at no cost.

The walk follows elementwise arithmetic only, where series and polynomials (Clenshaw,
Horner, the rational approximations JAX lowers special functions to) are built: a dot, a
convolution or a reduce ends the chain. Across them, through the layers of a model, it
would flag layernorm's ``var + eps`` (whose rsqrt reaches the next layer's square and
Adam's ``g * g``), a runtime op per layer for a ratio that eps, far below a variance, does
not reach (1.3% more ops on the sample transformer step).
"""

from __future__ import annotations

import math

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import Types, defining_op, ops_named
from scalify_hlo.rewrites.op_table import Trait, ops_with

# (power of the first float operand, power of the second) in the result. Elementwise only:
# a contraction or reduction (dot, convolution, reduce) ends a chain (see the module doc).
_PRODUCTS = {"stablehlo.multiply": (1.0, 1.0), "stablehlo.divide": (1.0, -1.0)}
# Ops of one float operand that raise it to a power.
_POWERS = {"chlo.square": 2.0, "stablehlo.sqrt": 0.5, "stablehlo.rsqrt": -0.5}
# Ops whose float results keep the data range of their float operands.
_KEEP_RANGE = ops_with(Trait.KEEPS_RANGE)
_ADDITIVE = ops_with(Trait.SUMS)

Powers = dict[int, float]  # origin index -> power of its data
_NONE: Powers = {}


def compounding_constant_adds(func: ir.Operation) -> set[ir.Operation]:
    """The runtime + constant adds of ``func`` (body and nested regions) whose result's data
    some product raises to a power of 2 or more in magnitude."""
    types = Types()
    powers: dict[ir.Value, Powers] = {}
    origins: list[ir.Operation] = []
    fired: set[int] = set()
    names = (*_PRODUCTS, *_POWERS, *_KEEP_RANGE)
    for op in ops_named(func, *names):  # post-order: a value's definition before its uses
        floats = [v for v in op.operands if types.is_scalable(v.type)]
        if not floats:
            continue
        name = op.name
        if name in _PRODUCTS and len(floats) == 2:
            first, second = _PRODUCTS[name]
            result = _combine(powers.get(floats[0], _NONE), first,
                              powers.get(floats[1], _NONE), second)
            _fire(result, fired)
        elif name in _POWERS:
            result = _scaled(powers.get(floats[0], _NONE), _POWERS[name])
            _fire(result, fired)
        else:
            result = _largest([powers.get(v, _NONE) for v in floats])
            if name in _ADDITIVE and _is_constant_add(floats):
                result = {**result, len(origins): 1.0}
                origins.append(op)
        if result:
            for value in op.results:
                powers[value] = result
    return {origins[index] for index in fired}


def _is_constant_add(operands: list[ir.Value]) -> bool:
    """One operand a finite nonzero constant, the other not a constant."""
    constant = [_is_constant(v) for v in operands]
    return len(operands) == 2 and constant[0] != constant[1]


def _is_constant(value: ir.Value) -> bool:
    """A constant of the original program (or a broadcast of one) that sets a scale: not
    0, inf or NaN, which fit any scale."""
    splat = splat_constant_value(value)
    if splat is not None:
        return splat != 0 and math.isfinite(splat)
    op = defining_op(value)
    return op is not None and op.name == "stablehlo.constant"


def _combine(a: Powers, pa: float, b: Powers, pb: float) -> Powers:
    if not a and not b:
        return _NONE
    out = {origin: power * pa for origin, power in a.items()}
    for origin, power in b.items():
        out[origin] = out.get(origin, 0.0) + power * pb
    return {origin: power for origin, power in out.items() if power}


def _scaled(a: Powers, by: float) -> Powers:
    return {origin: power * by for origin, power in a.items()} if a else _NONE


def _largest(each: list[Powers]) -> Powers:
    """Per origin, the power of largest magnitude among ``each``."""
    present = [p for p in each if p]
    if len(present) <= 1:
        return present[0] if present else _NONE
    out: Powers = {}
    for powers in present:
        for origin, power in powers.items():
            if abs(power) > abs(out.get(origin, 0.0)):
                out[origin] = power
    return out


# The power of an origin's data from which its add is rescaled. The first
# operand's scale is off the dominant operand's by their ratio R, and a power p moves the
# data p * log2(R) binades: below 2 (an rsqrt's derivative, rsqrt(v) / v in layernorm's
# backward, is -3/2) a ratio up to 2^84 stays in f32's range, and no series is built; from
# 2 on (a square, a Clenshaw or Horner step) every further product moves it again.
COMPOUNDING_POWER = 2.0


def _fire(powers: Powers, fired: set[int]) -> None:
    for origin, power in powers.items():
        if abs(power) >= COMPOUNDING_POWER:
            fired.add(origin)
