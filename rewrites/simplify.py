"""The ``simplify`` pass: drop what scale propagation left trivial, then canonicalize and CSE.

Static scales already emit nothing; what remains are multiplications by a splat 1, converts
to the same type and duplicated constants or broadcasts, which this pass removes.
"""

from __future__ import annotations

from typing import Any

from jax.extend.mlir import ir
from scalify_hlo.rewrites.emitter import attributes_of, defining_op, splat_constant_value
from scalify_hlo.rewrites.mlir_passes import run_mlir_pipeline
from scalify_hlo.rewrites.registry import PassContext, PassInfo, register


def _trivial_result(op: ir.Operation) -> ir.Value | None:
    """The operand an op can be replaced by, when it is an identity."""
    if op.name == "stablehlo.multiply":
        lhs, rhs = op.operands
        if splat_constant_value(rhs) == 1.0 and lhs.type == op.results[0].type:
            return lhs
        if splat_constant_value(lhs) == 1.0 and rhs.type == op.results[0].type:
            return rhs
    elif op.name == "stablehlo.divide":
        lhs, rhs = op.operands
        if splat_constant_value(rhs) == 1.0 and lhs.type == op.results[0].type:
            return lhs
    elif op.name == "stablehlo.convert":
        if op.operands[0].type == op.results[0].type:
            return op.operands[0]
    return None


def drop_identities(module: ir.Module) -> int:
    """Replace identity ops by their operand; returns how many were dropped.

    Candidates are collected first and each replacement is computed only when it is applied,
    because dropping one identity can change the operand of the next.
    """
    candidates: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("stablehlo.multiply", "stablehlo.divide", "stablehlo.convert"):
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    dropped = 0
    for op in candidates:
        replacement = _trivial_result(op)
        if replacement is not None:
            op.results[0].replace_all_uses_with(replacement)
            op.erase()
            dropped += 1
    return dropped


def _is_scalar_broadcast(value: ir.Value) -> bool:
    op = defining_op(value)
    return (op is not None and op.name == "stablehlo.broadcast_in_dim"
            and not ir.RankedTensorType(op.operands[0].type).shape)


def sink_scale_factors(module: ir.Module) -> int:
    """``(a * b) * broadcast(s)`` becomes ``a * (b * broadcast(s))`` when the product has no
    other use: the same number for a power-of-two ``s``, but XLA can then contract
    ``a * b' + c`` into one FMA as it does in the original program, so the rewritten program
    rounds as the original does (a rescale between the product and the add would round the
    product first). ``b`` is the operand made by a broadcast when there is one (the smaller
    tensor)."""
    candidates: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "stablehlo.multiply":
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    sunk = 0
    for op in candidates:
        product, factor = op.operands
        if not _is_scalar_broadcast(factor):
            continue
        inner = defining_op(product)
        if (inner is None or inner.name != "stablehlo.multiply"
                or len(list(product.uses)) != 1 or _is_scalar_broadcast(inner.operands[1])):
            continue
        a, b = inner.operands
        if defining_op(a) is not None and defining_op(a).name == "stablehlo.broadcast_in_dim":
            a, b = b, a
        scaled = ir.Operation.create("stablehlo.multiply", results=[b.type],
                                     operands=[b, factor], loc=op.location,
                                     ip=ir.InsertionPoint(op)).result
        new = ir.Operation.create("stablehlo.multiply", results=[op.results[0].type],
                                  operands=[a, scaled], loc=op.location,
                                  ip=ir.InsertionPoint(op)).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
        inner.erase()
        sunk += 1
    return sunk


def _splat_or_scalar_broadcast(value: ir.Value) -> bool:
    return _is_scalar_broadcast(value) or splat_constant_value(value) is not None


def transpose_before_scaling(module: ir.Module) -> int:
    """``transpose(x * s)`` becomes ``transpose(x) * s`` for a splat or broadcast scalar ``s``
    and a product with no other use: XLA folds a transpose that directly follows a dot into
    the dot (JAX's weight gradients are ``transpose(dot)``), but not one behind the unit-
    scaling multiply, and then copies the transposed gradient on every step."""
    candidates: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "stablehlo.transpose":
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    moved = 0
    for op in candidates:
        product = op.operands[0]
        multiply = defining_op(product)
        if (multiply is None or multiply.name != "stablehlo.multiply"
                or len(list(product.uses)) != 1):
            continue
        x, factor = multiply.operands
        if not _splat_or_scalar_broadcast(factor):
            x, factor = factor, x
            if not _splat_or_scalar_broadcast(factor):
                continue
        out_type = op.results[0].type
        ip = ir.InsertionPoint(op)
        transposed = ir.Operation.create("stablehlo.transpose", results=[out_type],
                                         operands=[x], attributes=attributes_of(op),
                                         loc=op.location, ip=ip).result
        source = defining_op(factor)
        if source.name == "stablehlo.constant":
            element = ir.RankedTensorType(out_type).element_type
            attr = ir.DenseElementsAttr.get_splat(
                out_type, ir.FloatAttr.get(element, splat_constant_value(factor)))
            factor = ir.Operation.create("stablehlo.constant", results=[out_type],
                                         attributes={"value": attr}, loc=op.location,
                                         ip=ip).result
        else:
            factor = ir.Operation.create(
                "stablehlo.broadcast_in_dim", results=[out_type], operands=[source.operands[0]],
                attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
                loc=op.location, ip=ip).result
        new = ir.Operation.create("stablehlo.multiply", results=[out_type],
                                  operands=[transposed, factor], loc=op.location, ip=ip).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
        multiply.erase()
        moved += 1
    return moved


def _run(module: ir.Module, options: dict[str, Any], context: PassContext) -> None:
    context.bump("simplify.identities-dropped", drop_identities(module))
    context.bump("simplify.factors-sunk", sink_scale_factors(module))
    context.bump("simplify.transposes-moved", transpose_before_scaling(module))
    run_mlir_pipeline(module, "canonicalize,cse,symbol-dce")


SIMPLIFY = register(PassInfo(
    name="simplify",
    description="Drop multiplications by one and no-op converts, then canonicalize, CSE and "
                "remove dead private functions.",
    run=_run,
))
