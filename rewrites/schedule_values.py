"""Which values are looked up in a constant schedule, and so keep f32 data with 16-bit data.

A diffusion model's noise schedule is a table of ``alpha_bar`` per timestep, built with numpy
and indexed by each example's timestep: ``ab = AB[t]``. The step needs ``1 - ab`` of values
near 1 (0.9999 at the first timesteps), and 16-bit data rounds them to 1 (f16's spacing below
1 is 2^-11, bf16's 2^-8): the noise coefficient ``sqrt(1 - ab)`` was 0 where it is 0.01, and a
min-SNR weight ``ab / (1 - ab)`` was inf. A per-tensor scale cannot help: the values are near
one another, not near 0. So a lookup in a rank-1 constant table (a ``gather``,
``dynamic_slice`` or ``slice`` of it: a schedule indexed by a step or timestep), the table, and
every value computed from lookups through elementwise and layout ops whose other float
operands are constants or rank-0 values, hold f32 data, as the original computes them. Such
values are a few per example. An op that combines one with a data tensor
(``sqrt(1 - ab) * noise``) makes a 16-bit result and reads it converted: the coefficient
keeps f16's relative precision there, which is what the product needs.

A schedule computed in the step from constants (``jnp.cumprod(1 - jnp.linspace(...))``, a
cosine schedule of constant timesteps) is the same table before XLA folds it: such values
(``constant_expressions``) start the class as lookups do. Their f32 data is wherever the
arithmetic left it (``ab / (1 - ab)`` near 1e4), so a 16-bit op reads one rescaled by its
amax, which XLA folds with it.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import constant_splat
from scalify_hlo.rewrites.emitter import Types, defining_op, ops_named
from scalify_hlo.rewrites.op_table import Trait, has_trait
from scalify_hlo.rewrites.program_constants import program_constant

_LOOKUPS = ("stablehlo.gather", "stablehlo.dynamic_slice", "stablehlo.slice")


def _is_float_tensor(value: ir.Value, types: Types) -> bool:
    return types.is_scalable(value.type) and ir.RankedTensorType(value.type).rank > 0


def _table(lookup: ir.Operation) -> ir.Operation | None:
    """The rank-1 constant (not a splat) that a lookup reads."""
    table = lookup.operands[0]
    if not isinstance(table.type, ir.RankedTensorType) or table.type.rank != 1:
        return None
    constant = program_constant(table)
    if constant is None or constant_splat(constant) is not None:
        return None
    return constant


def _chain_to(value: ir.Value, table: ir.Operation) -> list[ir.Value] | None:
    """The values from the table constant to ``value`` through the layout ops between
    them; None where a block argument is among them (a loop-invariant carry, whose loop
    would have to agree on its type)."""
    chain = [value]
    while (op := defining_op(value)) is not None:
        if op == table:
            return chain
        value = op.operands[0]
        chain.append(value)
    return None


def _propagates(name: str) -> bool:
    return has_trait(name, Trait.ELEMENTWISE) or has_trait(name, Trait.LAYOUT_ONLY)


def _other_operand_allowed(value: ir.Value, types: Types) -> bool:
    """A float operand that may meet a schedule value without ending its class: a constant
    of the program or a rank-0 value (f32 data already: scalar_values.py). Non-float
    operands (a select's predicate, an index) are always allowed."""
    if not types.is_scalable(value.type):
        return True
    return ir.RankedTensorType(value.type).rank == 0 or program_constant(value) is not None


# Ops whose region is a reducer (of their operands alone): computed from constants when
# their operands are.
_WITH_REDUCER = frozenset({"stablehlo.reduce", "stablehlo.reduce_window"})


def _computed_float_tensor(value: ir.Value, types: Types) -> bool:
    """A float tensor that is not itself a constant (``program_constant``)."""
    return _is_float_tensor(value, types) and program_constant(value) is None


def constant_expressions(func: ir.Operation, types: Types) -> set[ir.Value]:
    """The float tensors of ``func``'s body computed from constants alone whose elements
    differ (from a non-splat constant or an iota), other than the constants themselves: a
    schedule built in the step (``cumprod(1 - linspace(...))``, a cosine schedule of
    constant timesteps), which XLA folds at compile time, and the tensors they are computed
    from. A broadcast of a computed scalar (``1 / sqrt(64)``) that no such tensor reads is
    left alone. Only ops without regions, or reductions with a reducer, count."""
    varying: dict[ir.Value, bool] = {}  # computed from constants alone -> elements differ
    found: set[ir.Value] = set()
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        name = op.name
        if name in ("stablehlo.constant", "stablehlo.iota"):
            for result in op.results:
                varying[result] = name == "stablehlo.iota" or constant_splat(op) is None
            continue
        if (len(op.regions) and name not in _WITH_REDUCER) or not all(
                operand in varying for operand in op.operands):
            continue
        differ = any(varying[operand] for operand in op.operands)
        for result in op.results:
            varying[result] = differ
            if differ and _computed_float_tensor(result, types):
                found.add(result)
    # And the tensors they are computed from (a broadcast of ``cos(0.008 / 1.008 * pi / 2)
    # ** 2``, which bf16 rounds to 1: the cosine schedule's first alpha_bar divides by it).
    pending = list(found)
    while pending:
        op = defining_op(pending.pop())
        for operand in op.operands:
            if (operand in varying and operand not in found
                    and _computed_float_tensor(operand, types)):
                found.add(operand)
                pending.append(operand)
    return found


def schedule_values(func: ir.Operation, types: Types,
                    computed: set[ir.Value] = frozenset()) -> set[ir.Value]:
    """The rank-1-or-more float values of ``func`` looked up in a rank-1 constant table,
    the values between such a table and its lookups, the values of ``computed``
    (``constant_expressions``), and those computed from any of these through elementwise
    and layout ops with constants and rank-0 values alone."""
    found: set[ir.Value] = set()
    pending: list[ir.Value] = list(computed)
    for lookup in ops_named(func, *_LOOKUPS):
        table = _table(lookup)
        if table is None or not _is_float_tensor(lookup.results[0], types):
            continue
        chain = _chain_to(lookup.operands[0], table)
        if chain is None:  # the table reaches the lookup as a loop's carry: left as it is
            continue
        found.update(chain)
        pending.append(lookup.results[0])
    while pending:
        value = pending.pop()
        if value in found:
            continue
        found.add(value)
        for use in value.uses:
            user = use.owner.operation
            if not _propagates(user.name) or not all(
                    operand in found or _other_operand_allowed(operand, types)
                    for operand in user.operands):
                continue
            pending += [result for result in user.results if _is_float_tensor(result, types)]
    return found

