"""The ``simplify`` pass: drop what scale propagation left trivial, then canonicalize and CSE.

Static scales already emit nothing; what remains are multiplications by a splat 1, converts
to the same type and duplicated constants or broadcasts, which this pass removes.
"""

from __future__ import annotations

import math

from jax.extend.mlir import ir

from scalify_hlo.rewrites.collective_combine import combine_all_reduces
from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.delayed_statistics import takes_given_exponents
from scalify_hlo.rewrites.dot_transposes import transposes_to_dots
from scalify_hlo.rewrites.emitter import (
    Emitter,
    attributes_of,
    defining_op,
    is_scalar_broadcast,
    ops_named,
)
from scalify_hlo.rewrites.fp8_cast_fence import fence_shared_fp8_casts
from scalify_hlo.rewrites.gradient_join import carry_mark, join_gradients
from scalify_hlo.rewrites.group_statistics import group_statistics
from scalify_hlo.rewrites.inline import may_have_dead_symbols
from scalify_hlo.rewrites.loop_scales import hoist_loop_scales
from scalify_hlo.rewrites.mlir_passes import run_mlir_pipeline
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.rewrites.scalar_lanes import vectorize_scalar_chains
from scalify_hlo.rewrites.scale_epochs import EPOCHS, materialize_scales
from scalify_hlo.rewrites.scale_packs import PACK, check_pack_width
from scalify_hlo.rewrites.slice_statistics import slice_statistics
from scalify_hlo.rewrites.statistics_fence import fence_delayed_statistics

# What simplify packs last (its ``pack-scales`` option, Policy.scale_packing): the epochs
# materialize-scales takes, or none.
PACK_SCALES = (*EPOCHS, "none")


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


_IDENTITY_CANDIDATES = ("stablehlo.multiply", "stablehlo.divide", "stablehlo.convert")


def _collect(module: ir.Module) -> list[ir.Operation]:
    """The ops every step of this pass looks at, from one walk of the module (a walk costs
    a Python call per op, and the rewritten module is large)."""
    return ops_named(module.operation, *_IDENTITY_CANDIDATES, "stablehlo.transpose",
                     "stablehlo.while")


def drop_identities(module: ir.Module, ops: list[ir.Operation] | None = None) -> int:
    """Replace identity ops by their operand; returns how many were dropped.

    Candidates are collected first and each replacement is computed only when it is applied,
    because dropping one identity can change the operand of the next. ``ops`` (from
    ``_collect``) loses the dropped ops, so that ``sink_scale_factors`` can reuse it.
    """
    if ops is None:
        ops = _collect(module)
    kept: list[ir.Operation] = []
    for op in ops:
        replacement = _trivial_result(op) if op.name in _IDENTITY_CANDIDATES else None
        if replacement is not None:
            op.results[0].replace_all_uses_with(replacement)
            carry_mark(op, replacement)
            op.erase()
        else:
            kept.append(op)
    dropped = len(ops) - len(kept)
    ops[:] = kept
    return dropped


def _power_of_two_factor(value: ir.Value) -> bool:
    """Whether ``value`` broadcasts a rank-0 power of two: a constant one, or one built from
    exponent bits (a bitcast_convert from integers: how the rewrite makes its runtime
    factors and reads them from packs). Moving any other factor (the original program's
    own ``* 100``) changes the rounding, and may overflow: ``(w * e^86) * 100`` became
    ``w * (e^86 * 100)``, inf where the original's is 2.8e37."""
    if not is_scalar_broadcast(value):
        return False
    scalar = defining_op(value).operands[0]
    constant = splat_constant_value(scalar)
    if constant is not None:
        mantissa = math.frexp(constant)[0] if math.isfinite(constant) else 0.0
        return abs(mantissa) == 0.5
    source = defining_op(scalar)
    return (source is not None and source.name == "stablehlo.bitcast_convert"
            and isinstance(ir.RankedTensorType(source.operands[0].type).element_type,
                           ir.IntegerType))


def sink_scale_factors(module: ir.Module, ops: list[ir.Operation] | None = None) -> int:
    """``(a * b) * broadcast(s)`` becomes ``a * (b * broadcast(s))`` for a power-of-two ``s``
    (``_power_of_two_factor``) when the product has no other use: the same number, but XLA
    can then contract ``a * b' + c`` into one FMA as it does in the original program, so the
    rewritten program rounds as the original does (a rescale between the product and the
    add would round the product first). ``b`` is the operand made by a broadcast when there
    is one (the smaller tensor). ``ops``: as for ``drop_identities``; only its multiplies
    are looked at."""
    sunk = 0
    for op in _collect(module) if ops is None else ops:
        if op.name != "stablehlo.multiply":
            continue
        product, factor = op.operands
        if not _power_of_two_factor(factor):
            continue
        inner = defining_op(product)
        if (inner is None or inner.name != "stablehlo.multiply"
                or len(list(product.uses)) != 1 or is_scalar_broadcast(inner.operands[1])):
            continue
        a, b = inner.operands
        a_op = defining_op(a)
        if a_op is not None and a_op.name == "stablehlo.broadcast_in_dim":
            a, b = b, a
        emit = Emitter(ir.InsertionPoint(op), op.location)
        new = emit.binary("stablehlo.multiply", a, emit.binary("stablehlo.multiply", b, factor))
        op.results[0].replace_all_uses_with(new)
        carry_mark(op, new)
        carry_mark(inner, new)  # its only reader was op
        op.erase()
        inner.erase()
        sunk += 1
    return sunk


def _splat_or_scalar_broadcast(value: ir.Value) -> bool:
    return is_scalar_broadcast(value) or splat_constant_value(value) is not None


def transpose_before_scaling(module: ir.Module, ops: list[ir.Operation] | None = None) -> int:
    """``transpose(x * s)`` becomes ``transpose(x) * s`` for a splat or broadcast scalar ``s``
    and a product with no other use: XLA folds a transpose that directly follows a dot into
    the dot (JAX's weight gradients are ``transpose(dot)``), but not one behind the unit-
    scaling multiply, and then copies the transposed gradient on every step. ``ops``: as
    for ``drop_identities``; only its transposes are looked at."""
    moved = 0
    for op in _collect(module) if ops is None else ops:
        if op.name != "stablehlo.transpose":
            continue
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
        emit = Emitter(ir.InsertionPoint(op), op.location)
        transposed = emit.op("stablehlo.transpose", [x], [out_type], attributes_of(op)).result
        splat = splat_constant_value(factor)
        if splat is not None:
            factor = emit.splat(splat, out_type)
        else:
            factor = emit.broadcast_scalar(defining_op(factor).operands[0], out_type)
        new = emit.binary("stablehlo.multiply", transposed, factor)
        op.results[0].replace_all_uses_with(new)
        carry_mark(multiply, new)
        op.erase()
        multiply.erase()
        moved += 1
    return moved


@register("simplify",
          "Drop multiplications by one and no-op converts, canonicalize, CSE and remove dead "
          "private functions, then hoist loop-invariant scale arithmetic out of while loops "
          "and pack the scales computed from the arguments alone (pack-scales).")
class Simplify(ModulePass):
    pack_scales: str = option(
        "arguments", "arguments: compute the scales that depend on the function's arguments "
        "alone as one packed vector (one kernel on XLA:GPU instead of a rank-0 kernel each); "
        "all: every scale epoch (materialize-scales: fewer instructions, faster XLA:CPU "
        "compiles, more kernels on a GPU); none", PACK_SCALES)
    pack_width: int = option(PACK, "scalars per packed vector (at least 2; XLA:CPU runs a "
                             "wider concatenate as a kernel per scalar, XLA:GPU as one)")
    group_statistics: bool = option(True, "take a block's statistics together in one row "
                                    "reduction (group-statistics: two kernels a group on "
                                    "XLA:GPU; XLA:TPU writes the concatenated rows out, a "
                                    "copy of every tensor, so TPU targets turn it off); "
                                    "false: only the statistics of the slices of one "
                                    "tensor together (slice-statistics)")
    vectorize: bool = option(False, "in a step that applies the exponents of the call "
                             "before (delayed-statistics=use), run the same chain of scalar "
                             "ops on each element of a vector once on the vector "
                             "(vectorize-scalar-chains): fewer kernels on XLA:GPU where the "
                             "results are handed on rather than applied")
    join_gradients: bool = option(True, "in a partitioned step, make the ops that read the "
                                  "replicated gradients wait for all of them "
                                  "(join-gradients): XLA then fuses no update kernel into "
                                  "the backward pass and combines the gradients' "
                                  "all-reduces; false: only drop scalify's gradient marks")

    def validate(self) -> None:
        check_pack_width(self.pack_width)

    def apply(self, module: ir.Module, context: PassContext) -> None:
        ops = _collect(module)
        # Split before anything is erased: an erased op must not be touched again.
        transposes = [op for op in ops if op.name == "stablehlo.transpose"]
        candidates = [op for op in ops if op.name in _IDENTITY_CANDIDATES]
        has_loops = any(op.name == "stablehlo.while" for op in ops)
        context.bump("simplify.identities-dropped", drop_identities(module, candidates))
        context.bump("simplify.factors-sunk", sink_scale_factors(module, candidates))
        dags, transposes = transposes_to_dots(transposes)
        context.bump("simplify.transposes-to-dots", dags)
        context.bump("simplify.transposes-moved", transpose_before_scaling(module, transposes))
        run_mlir_pipeline(module, "canonicalize,cse,symbol-dce" if may_have_dead_symbols(module)
                          else "canonicalize,cse")  # symbol-dce could remove nothing: skipped
        # After CSE: a statistic taken twice is one.
        grouped = group_statistics(module) if self.group_statistics else 0
        context.bump("simplify.statistics-grouped", grouped)
        if grouped:
            run_mlir_pipeline(module, "cse")
        if has_loops:  # after CSE, so that equal scale values in a loop are hoisted once
            hoisted = hoist_loop_scales(module)
            context.bump("simplify.loop-scales-hoisted", hoisted)
            if hoisted:
                run_mlir_pipeline(module, "cse")
        # Last: the scales a step computes from its arguments alone (its inputs' exponents,
        # Adam's bias corrections) as one packed vector, which XLA:GPU computes in one kernel
        # instead of a rank-0 kernel per value that several tensor kernels read.
        if self.pack_scales != "none":
            context.bump("simplify.scales-packed", materialize_scales(
                module, arguments_only=self.pack_scales == "arguments", width=self.pack_width))
        # Before the fence, which takes the vector of pieces through its barrier whole where
        # nothing is packed (XLA:TPU would copy each element out). Grouping takes each
        # piece's statistic in its rows already.
        if not self.group_statistics:
            context.bump("simplify.slice-statistics-merged", slice_statistics(module))
        # After everything that moves or merges scalar ops: their order is what it fixes.
        context.bump("simplify.statistics-fenced", fence_delayed_statistics(
            module, packed=self.pack_scales != "none"))
        # After CSE, which leaves one cast where a tensor was cast twice the same way.
        context.bump("simplify.fp8-casts-fenced", fence_shared_fp8_casts(module))
        # After the packs and the fence: their vectors are what the chains read element by
        # element, and the concatenates they end in read the vectorized results back.
        if self.vectorize and takes_given_exponents(module):
            context.bump("simplify.scalar-ops-vectorized",
                         vectorize_scalar_chains(module, max_gather=self.pack_width))
        # Last: the all-reduces that scale agreement split (one per psum, and a kernel
        # before each), made one before XLA's fusion can chain them.
        context.bump("simplify.all-reduces-combined", combine_all_reduces(module))
        # After everything that moves ops: the update waits for every replicated gradient,
        # so that XLA fuses none of its kernels into the backward pass.
        context.bump("simplify.gradients-joined",
                     join_gradients(module, join=self.join_gradients))
