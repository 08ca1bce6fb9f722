"""Rounding f32 data as a 16-bit original rounds its values (a bf16 op in f32 data).

One place that says how: the op's results (``walk.py``) and a reducer's partial sums
(``regions.py``) are rounded alike. The data is the value times a power of two, which
commutes with rounding, so the rewrite computes the original's numbers wherever the original
neither overflows nor underflows.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.dtypes import exponent_bits, rounding_bits
from scalify_hlo.rewrites.emitter import Emitter, dtype_name, element_type


def rounded_as(emit: Emitter, data: ir.Value, own: ir.Type) -> ir.Value:
    """``data`` rounded to the significand of ``own`` (an element type), where it has more.

    A convert round trip where ``own`` has the data's exponent range (bf16 in f32 data:
    XLA:CPU keeps an explicit one, and a reduce_precision costs it about 18 integer
    instructions, 1.5x the bf16 GPT step's), unless the data was just converted from
    ``own``: there canonicalization folds the trip away, and XLA, which ran the op in f32,
    then keeps its result unrounded. Otherwise a reduce_precision, which keeps the data's
    exponent range (f16: a round trip would overflow where the data, not the value, passes
    65504)."""
    bits = rounding_bits(dtype_name(own), dtype_name(element_type(data)))
    if bits is None:
        return data
    owner = data.owner
    from_own = (not isinstance(owner, ir.Block) and owner.name == "stablehlo.convert"
                and element_type(owner.operands[0]) == own)
    if bits[0] == exponent_bits(dtype_name(own)) and not from_own:
        return emit.convert(emit.convert(data, own), element_type(data))
    return emit.reduce_precision(data, *bits)


def only_widened(value: ir.Value) -> bool:
    """Whether every use of ``value`` converts it to f32 (and it has one): XLA computes a
    16-bit op in f32 and, allowed excess precision (its default), drops the rounding before
    a widening convert, so such a result is left as computed."""
    uses = [use.owner for use in value.uses]
    return bool(uses) and all(
        user.name == "stablehlo.convert"
        and isinstance(ir.ShapedType(user.results[0].type).element_type, ir.F32Type)
        for user in uses)
