"""Which values of the original program are angles, and so need f32 data with f16 data.

A periodic op's result follows its operand's absolute error: sin(x) of an x near 1000 that
f16 holds to 0.5 is noise. RoPE's angles (position times inverse frequency, up to the
context length) and a diffusion model's timestep embedding (t up to 1000 times a frequency)
reach that range, and with f16 data the rotary embedding of a 2048-token context was 2.7
off (values near 3) where the original f32 step is exact. So the operand of every
``Trait.PERIODIC`` op, and the values it is computed from through elementwise and layout
ops (the positions, the frequencies, the exp that makes them), hold f32 data, as the
original computes them. The walk stops at any other op (a dot, a reduction, a loop): its
result is an angle, its operands are not. An angle a loop carries (a table computed before
a ``lax.scan`` over layers and read in its body) is one in every place the loop holds it:
its operand, its block arguments, its body's return and its result, which must agree.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Types, ops_named
from scalify_hlo.rewrites.op_table import Trait, has_trait, ops_with
from scalify_hlo.rewrites.value_cones import source_cone

_PERIODIC = tuple(sorted(ops_with(Trait.PERIODIC)))


def _walks_through(name: str) -> bool:
    """Whether the angles' cone continues into the operands of an op named ``name``."""
    return has_trait(name, Trait.ELEMENTWISE) or has_trait(name, Trait.LAYOUT_ONLY)


def angle_values(func: ir.Operation, types: Types) -> set[ir.Value]:
    """The float values of ``func`` that periodic ops read, and those they are computed
    from through elementwise and layout ops."""
    return source_cone((op.operands[0] for op in ops_named(func, *_PERIODIC)), _walks_through,
                       lambda value: types.is_scalable(value.type))

