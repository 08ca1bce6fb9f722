"""Regions of reduce-like ops: when they commute with scaling, and cloning them retyped.

A reducer, comparator or scatter-update region can run on scaled data unchanged when it is
positively homogeneous, ``f(c*x, c*y) = c*f(x, y)`` for a power of two ``c``: sums,
max/min, selects and comparisons are; products and non-trivial float constants are not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import distinct_values
from scalify_hlo.rewrites.emitter import Emitter, attributes_of, element_type, is_scalable_type
from scalify_hlo.rewrites.narrow_rounding import rounded_as
from scalify_hlo.rewrites.op_table import Trait, ops_with

_HOMOGENEOUS_OPS = ops_with(Trait.HOMOGENEOUS)
_SUMMING_OPS = ops_with(Trait.SUMS)
_ROUNDING_OPS = ops_with(Trait.ROUNDS)


def _scale_free_constant(op: ir.Operation) -> bool:
    """Integer and boolean constants, and float constants of only 0, ±inf and NaN."""
    result_type = op.results[0].type
    if not is_scalable_type(result_type):
        return True
    values = distinct_values(op.attributes["value"])
    return bool(np.all((values == 0) | ~np.isfinite(values)))


def _bitcast_is_integer_only(op: ir.Operation) -> bool:
    # A float<->int bitcast sees raw bits, which scaling changes (JAX's total-order sort
    # comparators use one): only int<->int bitcasts and converts are harmless.
    return not any(is_scalable_type(v.type) for v in list(op.operands) + list(op.results))


def region_ops(region: ir.Region) -> list[ir.Operation]:
    ops: list[ir.Operation] = []
    for block in region.blocks:
        ops += [op.operation for op in block.operations]
    return ops


def nested_ops(op: ir.Operation) -> list[ir.Operation]:
    """Every op in the regions of ``op``, at any depth, each before the ops of its own
    regions."""
    found: list[ir.Operation] = []
    if len(op.regions):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    found.append(inner)
                    found += nested_ops(inner)
    return found


def is_homogeneous(region: ir.Region) -> bool:
    for op in region_ops(region):
        if op.name == "stablehlo.constant":
            if not _scale_free_constant(op):
                return False
        elif op.name in ("stablehlo.bitcast_convert", "stablehlo.convert"):
            if not _bitcast_is_integer_only(op):
                return False
        elif op.name not in _HOMOGENEOUS_OPS or op.regions:
            return False
    return True


def is_additive(region: ir.Region) -> bool:
    return any(op.name in _SUMMING_OPS and is_scalable_type(op.results[0].type)
               for op in region_ops(region))


def combiner(op: ir.Operation) -> str | None:
    """The name of the one op of a single-input reduce's (or reduce_window's) body when the
    body is ``return(op(arg0, arg1))``, else None."""
    body = op.regions[0].blocks[0]
    ops = [inner.operation for inner in body.operations]
    if len(ops) != 2 or ops[1].name != "stablehlo.return":
        return None
    args = list(body.arguments)
    if list(ops[0].operands) not in (args, args[::-1]) or list(ops[1].operands) != [
            ops[0].results[0]]:
        return None
    return ops[0].name


def is_assignment(region: ir.Region) -> bool:
    """A scatter update ``^bb0(%old, %new): return %new`` (pure overwrite)."""
    block = region.blocks[0]
    ops = [op.operation for op in block.operations]
    args = list(block.arguments)
    return (len(ops) == 1 and ops[0].name == "stablehlo.return"
            and len(args) % 2 == 0
            and list(ops[0].operands) == args[len(args) // 2:])


def clone_region_retyped(
    source: ir.Region, target: ir.Region, retype: Callable[[ir.Type], ir.Type],
    round_as_original: bool = False,
) -> None:
    """Copy ``source`` into the empty ``target`` with every type passed through ``retype``.

    Float constants are re-emitted in the new element type (their values are scale-free, as
    checked by ``is_homogeneous``). ``round_as_original``: the results of ops that round
    (``Trait.ROUNDS``) retyped to more significand bits are rounded to their own type's, so
    a bf16 reduction in f32 data rounds each partial sum as the original does.
    """
    for block in source.blocks:
        new_block = target.blocks.append(*[retype(a.type) for a in block.arguments])
        mapping: dict[ir.Value, ir.Value] = dict(zip(block.arguments, new_block.arguments,
                                                      strict=True))
        ip = ir.InsertionPoint(new_block)
        for op in block.operations:
            op = op.operation
            attributes = attributes_of(op)
            new_types = [retype(r.type) for r in op.results]
            if op.name == "stablehlo.constant" and new_types[0] != op.results[0].type:
                values = distinct_values(op.attributes["value"])
                element = ir.ShapedType(new_types[0]).element_type
                attributes["value"] = ir.DenseElementsAttr.get_splat(
                    new_types[0], ir.FloatAttr.get(element, float(values.flat[0])))
            new_op = ir.Operation.create(
                op.name,
                results=new_types,
                operands=[mapping.get(v, v) for v in op.operands],
                attributes=attributes,
                regions=len(op.regions),
                loc=op.location,
                ip=ip,
            )
            for old_region, new_region in zip(op.regions, new_op.regions, strict=True):
                clone_region_retyped(old_region, new_region, retype, round_as_original)
            mapping.update(zip(op.results, new_op.results, strict=True))
            if round_as_original and op.name in _ROUNDING_OPS:
                emit = Emitter(ip, op.location)
                for old, new in zip(op.results, new_op.results, strict=True):
                    if is_scalable_type(old.type):
                        mapping[old] = rounded_as(emit, new, element_type(old))
