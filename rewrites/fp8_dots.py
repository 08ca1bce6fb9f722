"""The ``fp8-dots`` pass: dot_generals take both operands as FP8, in the pattern XLA:GPU fuses
into a cuBLASLt FP8 GEMM (``__cublas$lt$matmul$f8``).

Runs after ``scalify``. Propagation keeps data near unit scale *on average*, but not within
FP8's few binades (E4M3FN: 2^-9 to 448): a residual stream whose scale is set by the largest
of its branches' unit-scaling estimates keeps data far below 1, and a LayerNorm passes that
on (the final LayerNorm of a 4-layer scan GPT gave data of 2^-11, 95% of it below E4M3's
smallest subnormal). So with ``scaling=amax`` (the default) each operand takes a power of two
from its own amax that brings it to the top binade of the format, and the dot's output takes
the inverse (one rank-0 factor, which XLA:GPU folds into the GEMM). Per operand
(``fp8_casts.py``): ``convert(clamp(-max, x * 2^e, max)) -> f8``, grouped to one batch
group, one contracting and one non-contracting dimension; the dot produces f32, is
multiplied by ``2^-(e_lhs + e_rhs)`` (and the unit-scaling 2^-k), reshaped back and
converted to the data dtype. ``scaling=none``: the cast takes the data as it is.
Gradients (operands computed under JAX's ``transpose(...)``) use the gradient format,
everything else the forward format, and never E5M2 x E5M2.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.dtypes import (
    DATA_DTYPES,
    EXPONENT_RANGES,
    FP8_FORMATS,
)
from scalify_hlo.errors import PipelineError, RewriteError
from scalify_hlo.module_io import short_location
from scalify_hlo.name_stack import has_name_stack, is_backward
from scalify_hlo.rewrites.constant_values import constant_splat
from scalify_hlo.rewrites.delayed_statistics import MODES as DELAYED_MODES
from scalify_hlo.rewrites.delayed_statistics import DelayedExponents, resolved_mode
from scalify_hlo.rewrites.emitter import (
    Emitter,
    Types,
    attributes_of,
    defining_op,
    element_type,
    ops_named,
    shape_of,
)
from scalify_hlo.rewrites.fp8_casts import (
    OperandLayout,
    cast_operand,
    free_dims,
    undo_range,
)
from scalify_hlo.rewrites.gradient_join import carry_mark
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.output_head import output_head
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.symbols import entry_function

# How an operand reaches its FP8 format (the pass's ``scaling`` option, Policy.fp8_scaling).
SCALINGS = ("auto", "amax", "none")
# Whether the dots of the step's output head (see rewrites/output_head) stay in the data
# dtype or become FP8 like the others (the pass's ``output-head`` option).
OUTPUT_HEAD = ("keep", "fp8")
# The operands of a kept head dot: the data dtype's, or widened to f32 (the pass's
# ``head-operands`` option, Policy.fp8_head_operands; see widen_dot).
HEAD_OPERANDS = ("data", "f32")
# Whether dots with batch dimensions (attention's QK^T and PV: per example, an activation
# times an activation) become FP8 or stay in the data dtype (the pass's ``batched`` option,
# Policy.fp8_batched_dots).
BATCHED = ("fp8", "keep")
# Ops that only move data: an operand reached through them keeps its producer's role.
_LAYOUT_OPS = ops_with(Trait.LAYOUT_ONLY)


@dataclass(frozen=True)
class DotDims:
    lhs_batch: list[int]
    rhs_batch: list[int]
    lhs_contracting: list[int]
    rhs_contracting: list[int]

    @staticmethod
    def of(op: ir.Operation) -> DotDims:
        text = str(op.attributes["dot_dimension_numbers"])

        def dims(key: str) -> list[int]:
            match = re.search(key + r" = \[([^\]]*)\]", text)
            return [int(x) for x in match.group(1).split(",") if x.strip()] if match else []

        return DotDims(dims("lhs_batching_dimensions"), dims("rhs_batching_dimensions"),
                       dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions"))


def _produced_under_transpose(value: ir.Value) -> bool:
    """Whether the value was computed in the backward pass (looking through layout ops)."""
    for _ in range(64):
        op = defining_op(value)
        if op is None:
            return False  # a block argument: weights, inputs, optimizer state
        if op.name == "stablehlo.optimization_barrier":  # result i is operand i
            value = op.operands[ir.OpResult(value).result_number]
            continue
        if op.name not in _LAYOUT_OPS:
            return is_backward(op.location)
        value = op.operands[0]
    return False


@dataclass
class Fp8Options:
    forward: str
    gradient: str
    min_size: int
    exclude: re.Pattern | None
    use_locations: bool
    scaling: str = "auto"
    delayed_statistics: str = "none"
    output_head: str = "keep"
    head_operands: str = "data"
    batched: str = "fp8"


def _ineligible(op: ir.Operation, options: Fp8Options) -> str | None:
    lhs, rhs = op.operands
    for value in (lhs, rhs):
        if str(element_type(value)) not in DATA_DTYPES:
            return f"operand element type {element_type(value)} is not a data dtype"
    dims = DotDims.of(op)
    if not dims.lhs_contracting:
        return "no contracting dimension"
    for rank, batch, contracting in ((len(shape_of(lhs)), dims.lhs_batch, dims.lhs_contracting),
                                     (len(shape_of(rhs)), dims.rhs_batch, dims.rhs_contracting)):
        if not free_dims(rank, batch, contracting):
            return "an operand has no non-contracting dimension (a matrix-vector product)"
    size = math.prod(shape_of(op.results[0])) * math.prod(
        shape_of(lhs)[d] for d in dims.lhs_contracting)
    if size < options.min_size:
        return f"{size} multiply-adds, below min-size={options.min_size}"
    if options.exclude is not None and options.exclude.search(str(op.location)):
        return "location matches the exclude pattern"
    return None


def _formats(op: ir.Operation, options: Fp8Options) -> tuple[str, str]:
    if not options.use_locations or not is_backward(op.location):
        lhs = rhs = options.forward
    else:
        lhs_grad, rhs_grad = (_produced_under_transpose(v) for v in op.operands)
        lhs = options.gradient if lhs_grad else options.forward
        rhs = options.gradient if rhs_grad and not lhs_grad else options.forward
    if lhs == rhs == "f8E5M2":  # E5M2 x E5M2 has no cuBLASLt kernel, whatever the options
        rhs = "f8E4M3FN"
    return lhs, rhs


def rewrite_dot(op: ir.Operation, lhs_fmt: str, rhs_fmt: str, scaling: str = "none",
                delayed: DelayedExponents | None = None) -> None:
    """Replace the dot by FP8 operands, an f32 dot in canonical form, and the way back
    (``delayed``: the entry function's delayed statistics, for a dot at its top level)."""
    lhs, rhs = op.operands
    dims = DotDims.of(op)
    emit = Emitter(ir.InsertionPoint(op), op.location)
    lhs_layout = OperandLayout.of(shape_of(lhs), dims.lhs_batch, dims.lhs_contracting)
    rhs_layout = OperandLayout.of(shape_of(rhs), dims.rhs_batch, dims.rhs_contracting)
    lhs8, lhs_shift = cast_operand(emit, lhs, lhs_fmt, lhs_layout, scaling, delayed)
    rhs8, rhs_shift = cast_operand(emit, rhs, rhs_fmt, rhs_layout, scaling, delayed)
    nb = len(dims.lhs_batch)
    numbers = ir.Attribute.parse(
        "#stablehlo.dot<lhs_batching_dimensions = [{b}], rhs_batching_dimensions = [{b}], "
        "lhs_contracting_dimensions = [{lc}], rhs_contracting_dimensions = [{rc}]>".format(
            b=", ".join(str(i) for i in range(nb)), lc=lhs_layout.contracting_position,
            rc=rhs_layout.contracting_position))
    out_shape = lhs_layout.grouped_shape[:nb] + [
        lhs_layout.grouped_shape[lhs_layout.free_position],
        rhs_layout.grouped_shape[rhs_layout.free_position]]
    attributes = attributes_of(op)
    attributes["dot_dimension_numbers"] = numbers
    attributes.pop("algorithm", None)
    f32 = ir.F32Type.get()
    product = emit.op("stablehlo.dot_general", [lhs8, rhs8],
                      [ir.RankedTensorType.get(out_shape, f32)], attributes).result
    result_shape = shape_of(op.results[0])
    if out_shape != result_shape:
        product = emit.op("stablehlo.reshape", [product],
                          [ir.RankedTensorType.get(result_shape, f32)]).result
    output = op.results[0]
    # The unit-scaling 2^-k: in f32 right after the GEMM, where XLA folds it, and before the
    # narrowing convert can overflow.
    factor = _output_scale(output)
    # The shifted operands' shifts and data types, found once.
    shifted = [(shift, str(element_type(value)))
               for value, shift in ((lhs, lhs_shift), (rhs, rhs_shift)) if shift is not None]
    if shifted:  # the operands' shifts undone, with the 2^-k, as one rank-0 factor
        i32 = emit.types.scalar_i32
        shifts = [shift for shift, _ in shifted]
        total = shifts[0] if len(shifts) == 1 else emit.binary("stablehlo.add", *shifts, i32)
        undo = _pow2_of_undo(emit, emit.unary("stablehlo.negate", total, i32),
                             undo_range(*(data for _, data in shifted)))
        if factor is not None:
            undo = emit.binary("stablehlo.multiply", undo, emit.scalar_f32(factor[1]))
        product = emit.binary("stablehlo.multiply", product,
                              emit.broadcast_scalar(undo, product.type))
    elif factor is not None:
        product = emit.binary("stablehlo.multiply", product, emit.splat(factor[1], product.type))
    _replace_dot(op, factor, emit.convert(product, element_type(output)))


def _pow2_of_undo(emit: Emitter, exponent: ir.Value, bounds: tuple[int, int]) -> ir.Value:
    """``2^exponent`` as a rank-0 f32. Where the shifts' ``bounds`` reach past f32's normal
    exponents (bf16 and f32 operands, each shifted by up to 2^+-126), as the product of two
    normal halves: a product beyond f32's range is 0 or inf, as the dot's value is."""
    low, high = EXPONENT_RANGES["f32"]
    if low <= bounds[0] and bounds[1] <= high:
        return emit.pow2_of_exponent(exponent)
    i32 = emit.types.scalar_i32
    half = emit.binary("stablehlo.shift_right_arithmetic", exponent, emit.int_scalar(1), i32)
    rest = emit.binary("stablehlo.subtract", exponent, half, i32)
    return emit.binary("stablehlo.multiply",
                       emit.pow2_of_exponent(emit.clamp_exponent(half, low, high)),
                       emit.pow2_of_exponent(emit.clamp_exponent(rest, low, high)))


def widen_dot(op: ir.Operation, operands_in_f32: bool = False) -> None:
    """A dot kept in its data dtype produces f32, as the FP8 GEMMs do, and is converted
    after its unit-scaling 2^-k: one accumulation type for every dot's output (a sharded
    step's partial sums of f16 and f32 gradients do not share an all-reduce), and no f16
    rounding of the accumulated sum before the factor.

    ``operands_in_f32``: its operands are converted to f32 first (exact). XLA:CPU cannot
    run a bf16 x bf16 -> f32 dot ("Unsupported element type for DotThunk"), so a TPU policy's
    step could not be tried on a CPU; XLA:TPU folds the converts into the dot (the 2-layer GPT
    on tpu7x: the same 752,457 estimated cycles and 385 fusions). Not on GPUs: XLA:GPU runs
    the widened dot as an f32 GEMM."""
    output = op.results[0]
    if element_type(output) == ir.F32Type.get() or str(element_type(output)) not in DATA_DTYPES:
        return
    emit = Emitter(ir.InsertionPoint(op), op.location)
    f32 = ir.F32Type.get()
    operands = list(op.operands)
    if operands_in_f32:
        operands = [x if element_type(x) == f32 else emit.convert(x, f32) for x in operands]
    product = emit.op("stablehlo.dot_general", operands,
                      [ir.RankedTensorType.get(shape_of(output), f32)], attributes_of(op)).result
    factor = _output_scale(output)
    if factor is not None:
        product = emit.binary("stablehlo.multiply", product, emit.splat(factor[1], product.type))
    _replace_dot(op, factor, emit.convert(product, element_type(output)))


def _replace_dot(op: ir.Operation, factor: tuple[ir.Operation, float] | None,
                 replacement: ir.Value) -> None:
    """What read the dot (or its unit-scaling multiply, ``factor``) reads ``replacement``;
    the dot, the multiply and its constant, now unused, are erased."""
    output = op.results[0] if factor is None else factor[0].results[0]
    output.replace_all_uses_with(replacement)
    carry_mark(op if factor is None else factor[0], replacement)
    if factor is not None:
        constants = [v.owner for v in factor[0].operands if v != op.results[0]]
        factor[0].erase()
        for constant in constants:
            constant = constant.operation if isinstance(constant, ir.OpView) else constant
            if not list(constant.results[0].uses):
                constant.erase()
    op.erase()


def _output_scale(value: ir.Value) -> tuple[ir.Operation, float] | None:
    """The single ``multiply(dot, splat constant)`` consuming a dot, with the constant."""
    uses = list(value.uses)
    if len(uses) != 1:
        return None
    user = uses[0].owner
    user = user.operation if isinstance(user, ir.OpView) else user
    if user.name != "stablehlo.multiply":
        return None
    other = user.operands[1] if user.operands[0] == value else user.operands[0]
    constant = defining_op(other)
    if constant is None or constant.name != "stablehlo.constant":
        return None
    value = constant_splat(constant)
    return None if value is None else (user, value)


def _output_head(module: ir.Module, dots: list[ir.Operation]) -> list[ir.Operation]:
    """The output head's dots; none where the module has no single entry function (a file of
    test functions) to find a loss in."""
    try:
        entry = entry_function(module)
    except RewriteError:
        return []
    return output_head(dots, entry)


def fp8_dots(module: ir.Module, options: Fp8Options, context: PassContext) -> None:
    dots = ops_named(module.operation, "stablehlo.dot_general")
    if dots and not has_name_stack(module):
        options.use_locations = False
        context.warn("module has no JAX name-stack locations: every dot operand uses the "
                     f"forward format {options.forward} (export with debug info to use "
                     f"{options.gradient} for gradients)")
    context.bump("fp8-dots.dots", len(dots))
    delayed_mode = resolved_mode(options.delayed_statistics, module)
    delayed = DelayedExponents(delayed_mode) if delayed_mode != "none" and dots else None
    entry = entry_function(module) if delayed is not None else None
    head = (_output_head(module, dots) if options.output_head == "keep" and options.use_locations
            else [])
    if options.output_head == "keep":
        context.bump("fp8-dots.output-head", len(head))
    in_head = [any(op == h for h in head) for op in dots]  # before any op is erased
    for op, kept in zip(dots, in_head, strict=True):
        if kept:  # a policy, not a shape FP8 cannot take: no warning
            context.record(op.name, op.location, "not-fp8",
                           f"stays in {element_type(op.operands[0])}: the output head")
            widen_dot(op, options.head_operands == "f32")
            continue
        reason = _ineligible(op, options)
        if reason is not None:
            context.bump("fp8-dots.left-alone")
            context.warn(f"{short_location(op.location)}: dot_general stays in "
                         f"{element_type(op.operands[0])}: {reason}")
            context.record(op.name, op.location, "not-fp8",
                           f"stays in {element_type(op.operands[0])}: {reason}")
            continue
        if options.batched == "keep" and DotDims.of(op).lhs_batch:  # a policy: no warning
            context.bump("fp8-dots.batched")
            context.record(op.name, op.location, "not-fp8",
                           f"stays in {element_type(op.operands[0])}: a batched dot")
            continue
        lhs_fmt, rhs_fmt = _formats(op, options)
        context.record(op.name, op.location, "fp8", f"{lhs_fmt} x {rhs_fmt}")
        top_level = delayed is not None and op.parent.operation == entry
        rewrite_dot(op, lhs_fmt, rhs_fmt, options.scaling, delayed if top_level else None)
        context.bump("fp8-dots.fp8")
        context.bump(f"fp8-dots.{lhs_fmt}x{rhs_fmt}")
    if delayed is not None:
        delayed.append_to(entry, Types())
        context.bump("fp8-dots.delayed-amaxes", len(delayed.measured))


@register("fp8-dots",
          "Cast both operands of each eligible dot_general to FP8 (clamp, convert) in the pattern "
          "XLA:GPU fuses into a cuBLASLt FP8 GEMM; report the others.")
class Fp8Dots(ModulePass):
    forward_format: str = option("f8E4M3FN", "FP8 format of activations and weights",
                                 FP8_FORMATS)
    gradient_format: str = option("f8E5M2", "FP8 format of gradients", FP8_FORMATS)
    min_size: int = option(0, "dots with fewer multiply-adds stay in the data dtype")
    exclude: str = option("", "regular expression on op locations of dots to leave alone")
    scaling: str = option(
        "auto", "amax: each operand is brought to the format's top binade by a power of two "
        "from its amax, undone on the dot's output; none: the data is cast as it is; auto: "
        "amax where the format's exponent range is narrower than the data dtype's (E4M3FN), "
        "none where it holds it (E5M2 for f16 data)", SCALINGS)
    delayed_statistics: str = option(
        "none", "where the amax shifts of the entry function's top-level dots come from: none "
        "(the amax they measure), measure (that, returned with the function's delayed "
        "exponents, see scalify's option of the same name) or use (the previous call's, from "
        "the function's delayed-exponents argument; the measured ones are returned) or auto "
        "(measure where the module is partitioned over several devices, none otherwise)",
        DELAYED_MODES)
    output_head: str = option(
        "keep", "keep: the dots of the step's output head (forward dots whose result reaches "
        "the rank-0 loss through no other dot, and the backward dots sharing their operands) "
        "stay in the data dtype; fp8: cast them too", OUTPUT_HEAD)
    head_operands: str = option(
        "data", "the operands of a kept head dot: the data dtype's, or f32 (converted, exact: "
        "what XLA:CPU needs to run a bf16 head with its f32 result; XLA:TPU folds the "
        "converts)", HEAD_OPERANDS)
    batched: str = option(
        "fp8", "dots with batch dimensions (attention's QK^T and PV, an activation times an "
        "activation per example): fp8 casts them too; keep leaves them in the data dtype, "
        "where an FP8 dot gains less than its operands' casts cost", BATCHED)

    def validate(self) -> None:
        self._exclude_pattern()

    def _exclude_pattern(self) -> re.Pattern | None:
        try:
            return re.compile(self.exclude) if self.exclude else None
        except re.error as exc:
            raise PipelineError(f"invalid exclude pattern '{self.exclude}': {exc}") from None

    def apply(self, module: ir.Module, context: PassContext) -> None:
        fp8_dots(module, Fp8Options(self.forward_format, self.gradient_format, self.min_size,
                                    self._exclude_pattern(), True, self.scaling,
                                    self.delayed_statistics, self.output_head,
                                    self.head_operands, self.batched), context)
