"""Which values decide how many trips a loop makes, and so need f32 data with 16-bit data.

A ``while`` whose condition reads floats stops when they converge: a series until its next
term is below 2^-23 of the sum (``jax.scipy.special.gammainc`` and ``betainc``, which JAX
lowers to such loops), a Newton iteration until its residual is small, a counter kept in
floats until it reaches a bound. In 16-bit data those values are rounded on every trip:
``r + 1`` stops growing once ``r`` is 256 in bf16 (2048 in f16), and a term ``c * x / r``
whose ratio rounds to 1 stops shrinking. ``gammainc`` of arguments near 2^20 then never
returned in bf16 data (its series loop has no trip limit), and in f16 came back 0 or inf
where the original is 0.5; a float counter compared with 3000 stopped at 256.

So the values a loop's condition is computed from hold f32 data, as the original computes
them: walking back from the condition's result through elementwise, layout, reduce and dot
ops, into the body through every carry the condition reads (the body's returned value in
the same place) and on through the carries those are computed from. Dots too: a solver's
residual is ``b - A @ v`` and its test ``r @ r < tol``, and with the walk stopped at the
dots a Richardson iteration to 1e-5 never returned in f16 or bf16 data (its 16-bit
residual stalls near 2^-11 of ``b``) and ``jax.scipy.sparse.linalg.cg`` came back NaN.
The walk stops at any other op (another loop): its result is one of the values, its
operands are not. A loop with an integer counter (``scan``, ``fori_loop``) reaches no float.

These values' data is wherever the loop's arithmetic takes it (a residual shrinks by 2^-40
in f32 data), so an op in the 16-bit data type that reads one (CG's solution update reads
the step size ``gamma / (p @ A p)``) reads it rescaled by its amax, not its data converted
(``ScalifyState.rescaled_when_narrowed``).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Types, ops_named, terminator
from scalify_hlo.rewrites.op_table import Family, Trait, has_trait, ops_in_family
from scalify_hlo.rewrites.value_cones import source_cone

# A residual's products (``b - A @ v``, ``r @ r``): their operands decide it as much as
# their result.
_DOTS = frozenset(ops_in_family(Family.DOT))


def _walks_through(name: str) -> bool:
    """Whether the walk continues into the operands of an op named ``name``."""
    return (name == "stablehlo.reduce" or has_trait(name, Trait.ELEMENTWISE)
            or has_trait(name, Trait.LAYOUT_ONLY) or name in _DOTS)


def trip_count_values(func: ir.Operation, types: Types) -> set[ir.Value]:
    """The float values of ``func`` that the conditions of its loops are computed from."""
    starts = (terminator(loop.regions[0].blocks[0]).operands[0]
              for loop in ops_named(func, "stablehlo.while"))
    return source_cone(starts, _walks_through, lambda value: types.is_scalable(value.type),
                       through_others=True)
