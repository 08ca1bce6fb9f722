"""The ``scalify`` pass: every floating tensor of the entry function becomes (data, scale).

Public convention (docs/scaled-signature.md): each f16/bf16/f32 argument and result of the
entry function becomes two consecutive values, the data (same shape, the data dtype) and the
scale (``tensor<f32>``, a power of two); ``original = data * scale``. Other values stay as
they are. Calls are inlined first, then the body is rebuilt op by op from ``rules.RULES``.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.dtypes import DATA_DTYPE_ALIASES, DATA_DTYPES, EXPONENT_RANGES, FP8_FORMATS
from scalify_hlo.errors import PipelineError, RewriteError
from scalify_hlo.names import ORIGINAL_TYPE_ATTR
from scalify_hlo.rewrites import rule_impls
from scalify_hlo.rewrites.angle_values import angle_values
from scalify_hlo.rewrites.boundary_storage import BoundaryStorage
from scalify_hlo.rewrites.delayed_statistics import MODES as DELAYED_MODES
from scalify_hlo.rewrites.delayed_statistics import DelayedExponents, resolved_mode
from scalify_hlo.rewrites.dot_groups import mark_iterated_dots
from scalify_hlo.rewrites.drift import compounding_constant_adds
from scalify_hlo.rewrites.emitter import dtype_name, float_type, is_scalable_type
from scalify_hlo.rewrites.gradient_join import replicated_gradients
from scalify_hlo.rewrites.hand_back import handed_back
from scalify_hlo.rewrites.inline import inline_calls, remove_unused_private_functions
from scalify_hlo.rewrites.loop_drift import mark_drifting_carries
from scalify_hlo.rewrites.moment_values import fast_moments, first_moments
from scalify_hlo.rewrites.normalized_values import normalized_products
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.rewrites.rules import RULES
from scalify_hlo.rewrites.scalar_values import (
    computes_in_f32,
    scalar_values,
    unbounded_scalars,
)
from scalify_hlo.rewrites.scalify_state import makes_only
from scalify_hlo.rewrites.schedule_values import constant_expressions, schedule_values
from scalify_hlo.rewrites.scope import (
    RESCALE_ATTR,
    RESCALE_DRIFTING_ATTR,
    Scaled,
    ScalifyState,
    Scope,
)
from scalify_hlo.rewrites.signature_split import SignatureSplit, returned_values, scale_location
from scalify_hlo.rewrites.slow_averages import slow_averages
from scalify_hlo.rewrites.square_values import square_dtype_values
from scalify_hlo.rewrites.stochastic_rounding import stochastic_grid
from scalify_hlo.rewrites.trip_count_values import trip_count_values
from scalify_hlo.rewrites.update_tail import update_tail
from scalify_hlo.scale import Scale
from scalify_hlo.symbols import SCALE_ARGS_ATTR, entry_function, partition_count

# The pass's option choices (Policy.square_encoding, square_rounding, moment_format, ...).
COMMON_SCALES = ("auto", "max", "first")
UPDATES = ("f32", "scaled")
SQUARE_ENCODINGS = ("auto", "sqrt", "none")
SQUARE_ROUNDINGS = ("nearest", "stochastic")
UPDATE_ROUNDINGS = ("auto", "nearest", "stochastic")
STATE_FORMATS = ("none", *FP8_FORMATS)
ARGUMENT_SCALES = ("keep", "fold")
# Data types whose exponent range is f32's: data times a power-of-two f32 scale is exact in
# them (short of f32's own underflow and overflow), so a scale can be folded into the data.
_FOLDABLE = frozenset({"f32", "bf16"})


def scalify_function(func: ir.Operation, state: ScalifyState,
                     boundary: BoundaryStorage | None = None,
                     fold_scales: bool = False) -> None:
    """Replace ``func`` by its scaled version (same name, flattened signature); the
    arguments and results that ``boundary`` names cross it as it stores them (signed square
    roots, FP8 moments); with ``fold_scales``, each argument as ``fold_argument_scale`` binds it."""
    boundary = boundary or BoundaryStorage()
    old_block = func.regions[0].blocks[0]
    probe = Scope(state, old_block)
    split = SignatureSplit(func, probe, boundary.roots, boundary.elements(state.data_dtype))
    attributes = {name: func.attributes[name] for name in func.attributes}
    attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(split.new_inputs(), split.new_results()))
    attributes["arg_attrs"] = split.new_arg_attrs()
    attributes["res_attrs"] = split.new_res_attrs()
    if scale_arguments := split.scale_arguments():  # where a host finds the scales it is given
        attributes[SCALE_ARGS_ATTR] = ir.DenseI64ArrayAttr.get(scale_arguments)
    # The original signature, so that a scaled module can be run on its own (scalify-hlo run).
    attributes[ORIGINAL_TYPE_ATTR] = func.attributes["function_type"]
    new_func = ir.Operation.create("func.func", results=[], operands=[], attributes=attributes,
                                   regions=1, loc=func.location, ip=ir.InsertionPoint(func))
    arg_locs: list[ir.Location] = []
    for arg in old_block.arguments:
        arg_locs.append(arg.location)
        if is_scalable_type(arg.type):
            arg_locs.append(scale_location(arg.location))
    block = new_func.regions[0].blocks.append(*split.new_inputs(), arg_locs=arg_locs)
    scope = Scope(state, block)
    if state.delayed is not None:
        state.delayed.scope = scope
    scope.bind_flat(list(old_block.arguments), list(block.arguments), f32_scales=True)
    for arg in old_block.arguments:
        if not boundary.decode(scope, arg) and fold_scales:
            fold_argument_scale(scope, arg)
    terminator = scope.rewrite_block(old_block)
    if terminator is None:
        raise RewriteError("entry function has no func.return")
    scope.emit = scope.emit.at(terminator.location)
    for attr, every in ((RESCALE_ATTR, True), (RESCALE_DRIFTING_ATTR, False)):
        if attr in terminator.attributes:
            method = ir.StringAttr(terminator.attributes[attr]).value
            for index, value in enumerate(terminator.operands):
                found = scope.lookup(value)
                if isinstance(found, Scaled) and not found.any_scale and (
                        every or scope.can_drift(found.scale)) and not (
                        boundary.rescales_itself(value)):
                    scope.set(value, scope.rescale(found, method))
                    state.context.record("func.return", terminator.location, "rescale",
                                         f"{method}, result {index}")
            break
    for value, is_encoded in zip(terminator.operands, split.encoded_results, strict=True):
        found = scope.lookup(value)
        if (not is_encoded and not boundary.rescales_itself(value)  # left to their encoders
                and isinstance(found, Scaled) and _is_tail_result(value, state)):
            scope.set(value, tail_result(scope, found, split.result_data_type(value),
                                         square=value in state.squares,
                                         nearest=value in state.nearest_tail))
    for index, value in enumerate(terminator.operands):
        found = scope.lookup(value)
        moved = (handed_back(scope, found, block, dtype_name(state.data_dtype))
                 if isinstance(found, Scaled) and not boundary.rescales_itself(value) else None)
        if moved is not None:
            scope.set(value, moved)
            state.context.record("func.return", terminator.location, "rescale",
                                 f"static hand-back, result {index}")
    stored: dict[ir.Value, Scaled] = {}
    for value in terminator.operands:
        if value not in stored and (encoded := boundary.encode(scope, value)) is not None:
            stored[value] = encoded
    for value, encoded in stored.items():
        scope.set(value, encoded)
    scope.emit.at(terminator.location).op("func.return",
                                          scope.flatten(list(terminator.operands),
                                                        f32_scales=True), [])
    if state.delayed is not None:
        state.delayed.append_to(new_func, state.types)
    func.erase()


def fold_argument_scale(scope: Scope, argument: ir.Value) -> None:
    """Bind an entry argument whose data has f32's exponent range to ``data * scale``, at
    scale 1: the multiply is exact there, and every scale the step computes from its
    arguments becomes static, so the exponent arithmetic that carried them at run time
    (extracting, adding and applying each argument's exponent: a third of the optimized HLO
    of an f32-mode GPT step, kernels XLA compiles with it) folds away at rewrite time. Data
    of a narrower range (FP8 state) keeps its scale: that is where the scale holds range."""
    found = scope.lookup(argument)
    if not isinstance(found, Scaled) or found.any_scale:
        return
    factor = found.scale.single_factor
    if factor is None or not factor.is_f32 or dtype_name(
            ir.RankedTensorType(found.data.type).element_type) not in _FOLDABLE:
        return
    scope.set(argument, Scaled(scope.emit.times_factor(found.data, factor.value), Scale()))
    scope.state.context.bump("scalify.folded-argument-scales")


def _is_tail_result(value: ir.Value, state: ScalifyState) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.operation in state.tail


def tail_result(scope: Scope, value: Scaled, storage: ir.Type, square: bool = False,
                nearest: bool = False) -> Scaled:
    """A result of the update tail (data in its original type at scale 1) in ``storage``
    with its scale: at unit RMS where the storage type's range is f16's (the statistics of
    all results are taken together by group-statistics), 1 where it is f32's (bf16, f32).
    A ``square`` that is state, stored as it is (``square-dtype=f16`` without the root
    encoding), takes its amax to the top of f16's range instead: at unit RMS a second
    moment's entries 2^-24 below its RMS flushed to zero, and Adam then divided by ``eps``
    on the next step (tests/test_range_f16.py). ``nearest``: rounded to nearest even where
    the update's results round stochastically (a fast first moment, ``fast_moments``)."""
    name = dtype_name(storage)
    if name == "f16" and not value.any_scale and value.scale.is_static:
        encoded = scope.at_unit_rms(value, storage, EXPONENT_RANGES[name][1], at_top=square,
                                     delayable=True)
        # The exponent is a normal one ([-126, 126]): the result's f32 scale is built as it
        # is, with no saturation (which would cost a pass over the data) at the boundary.
        exponent = scope.exponent(encoded.scale)
        return Scaled(encoded.data, Scale.dynamic_f32(scope.emit.pow2_of_exponent(exponent)))
    data = value.data
    if name == "bf16" and scope.state.update_stochastic and not nearest and dtype_name(
            ir.RankedTensorType(data.type).element_type) == "f32":
        data = stochastic_grid(scope, data, name)
        scope.state.context.bump("scalify.stochastic-updates")
    return Scaled(scope.emit.convert(data, storage), value.scale, value.any_scale)


def resolve_update_rounding(raw: str, data_dtype: str) -> bool:
    """Whether the update's results are rounded stochastically to bf16 storage. ``auto``:
    yes for bf16 data. Its 8 significand bits drop a weight's update below 2^-9 of it (most
    of Adam's steps once the learning rate decays), and those drops add up: under the tpu7x
    policy transformer_lm's last losses were 3.1% above jax.jit's, 0.3% rounded
    stochastically (docs/robustness.md)."""
    return raw == "stochastic" or (raw == "auto" and data_dtype == "bf16")


def resolve_square_dtype(raw: str, data_dtype: str) -> str | None:
    """``auto``: f32 for squares when the data is f16 (the only data type whose exponent range
    is too narrow for them), else none (squares use the data type)."""
    if raw == "auto":
        return "f32" if data_dtype == "f16" else None
    name = data_dtype_name(raw)
    return None if name == data_dtype else name


def data_dtype_name(raw: str) -> str:
    name = DATA_DTYPE_ALIASES.get(raw, raw)
    if name not in DATA_DTYPES:
        raise RewriteError(f"unsupported data dtype '{raw}' (use one of {', '.join(DATA_DTYPES)})")
    return name


def resolve_common_scale_rule(rule: str, data_dtype: str) -> str:
    """``auto``: the runtime max where the data's exponent range is narrow (f16: no data may
    grow); one operand's scale where it is f32's (f32, bf16): one rescale instead of two, and
    an in-place update such as SGD's hands the weight's scale back unchanged, so the step
    returns the argument's own scale instead of computing one (a kernel per weight on
    XLA:CPU). ``first`` takes the first operand's scale that is one runtime factor as it is
    (an argument's own, a loop carry's), else the first operand's (``common_scale._first_choice``);
    it is exact
    while operands are less than 2^126 apart, ``max`` (and the midpoint for merging ops)
    beyond that too."""
    if rule == "auto":
        return "max" if data_dtype == "f16" else "first"
    return rule


def resolve_square_encoding(raw: str, square_dtype: str, data_dtype: str) -> bool:
    """Whether squares at the entry boundary are stored as signed square roots. ``auto``:
    with f16 data and ``square-dtype=auto``, so that Adam's second moment is stored in 16
    bits (f16 holds the square root of a square spanning 48 binades, the square itself 24)
    and computed in f32 inside; an explicit ``square-dtype`` keeps squares as they are."""
    if raw == "auto":
        return square_dtype == "auto" and data_dtype == "f16"
    return raw == "sqrt"


def scalify_module(module: ir.Module, options: Scalify, context: PassContext) -> None:
    context.bump("inline.calls-inlined", inline_calls(module))
    remove_unused_private_functions(module)
    dtype = data_dtype_name(options.data_dtype)
    delayed_mode = resolved_mode(options.delayed_statistics, module)
    state = ScalifyState(
        data_dtype=float_type(dtype),
        strict=options.strict,
        common_scale_rule=resolve_common_scale_rule(options.common_scale, dtype),
        context=context,
        rules={name: rule.family.apply for name, rule in RULES.items()},
        fallback=rule_impls.rule_fallback,
        clone=rule_impls.rule_unscaled,
        delayed=(DelayedExponents(delayed_mode) if delayed_mode != "none" else None),
    )
    fold = options.argument_scales == "fold" and dtype in _FOLDABLE
    state.unit_shifts = not fold
    state.update_stochastic = resolve_update_rounding(options.update_rounding, dtype)
    func = entry_function(module)
    if state.common_scale_rule == "first":
        state.compounding = compounding_constant_adds(func)
    if dtype == "f16":  # f16's range: iterated dots leave it (dot_groups.py)
        context.bump("scalify.iterated-dots-rescaled", mark_iterated_dots(func))
    # A constant factor on a loop carry moves its data on every trip (loop_drift.py).
    context.bump("scalify.drifting-carries-rescaled",
                 mark_drifting_carries(func, dtype, state.unit_shifts))
    wide = resolve_square_dtype(options.square_dtype, dtype)
    encode = resolve_square_encoding(options.square_encoding, options.square_dtype, dtype)
    moments = options.moment_format != "none"
    classes = (square_dtype_values(func) if wide is not None or dtype != "f32" or encode
               or moments else None)
    if wide is not None:
        state.give_own_dtype(classes.squares, float_type(wide), "square-dtype")
        context.bump("scalify.square-values", len(classes.squares))
        if delayed_mode == "none":  # a norm's output at scale 1 (normalized_values.py)
            state.normalized = normalized_products(func)
            context.bump("scalify.normalized-values", len(state.normalized))
    if dtype != "f32" and classes.bits:
        # Floats made from integer bits keep f32's significand up to the nonlinear op that
        # reads them (jax.random's uniforms before erf_inv or log): see square_values.py.
        state.give_own_dtype(classes.bits, float_type("f32"), "random bits")
        context.bump("scalify.bit-values", len(classes.bits))
    scalars: set[ir.Value] = set()
    if dtype != "f32":
        angles = angle_values(func, state.types)
        if angles:  # a periodic op's operand: f16 holds 1000 to 0.5 (angle_values.py)
            state.give_own_dtype(angles, float_type("f32"), "angle")
            context.bump("scalify.angle-values", len(angles))
        scalars = scalar_values(func, state.types)
        if scalars:  # Adam's 1 - 0.999^t is 0 in bf16 (scalar_values.py)
            state.give_own_dtype(scalars, float_type("f32"), "rank 0",
                                 lambda op: computes_in_f32(op, state.types))
            context.bump("scalify.scalar-values", len(scalars))
            # exp(-t / 50) at t = 1000 is 0 in f16, converted raw (scalar_values.py).
            unbounded = unbounded_scalars(func, scalars)
            state.rescaled_when_narrowed.update(unbounded)
            context.bump("scalify.unbounded-scalars", len(unbounded))
        averages = slow_averages(func, classes.squares)  # classes: computed for 16-bit data
        if averages:  # 0.9999 * ema rounds back to ema in 16 bits (slow_averages.py)
            state.give_own_dtype(averages, float_type("f32"), "slow average",
                                 makes_only(averages))
            context.bump("scalify.slow-averages", len(averages))
        computed = constant_expressions(func, state.types)
        schedules = schedule_values(func, state.types, computed)
        if schedules:  # a noise schedule's 0.9999 is 1 in 16 bits (schedule_values.py)
            state.give_own_dtype(schedules, float_type("f32"), "schedule",
                                 makes_only(schedules), rescaled_when_narrowed=True)
            context.bump("scalify.schedule-values", len(schedules))
        trips = trip_count_values(func, state.types)
        if trips:  # r + 1 is r once r is 256 in bf16 (trip_count_values.py)
            state.give_own_dtype(trips, float_type("f32"), "trip count", makes_only(trips),
                                 rescaled_when_narrowed=True)
            context.bump("scalify.trip-count-values", len(trips))
    # A rank-0 square keeps f32 data (scalar_values.py): its root in 16 bits would only
    # lose bits (Prodigy's learning-rate estimate came back 2^-10 off each step).
    state_squares = (frozenset(_boundary_squares(func, classes.squares) - scalars)
                     if classes is not None else frozenset())
    if options.update == "f32":
        state.tail = update_tail(func)
        state.squares = state_squares
        if state.update_stochastic and options.update_rounding == "auto":
            state.nearest_tail = fast_moments(
                func, classes.squares if classes is not None else set())
            context.bump("scalify.nearest-moments", len(state.nearest_tail))
        if partition_count(module) > 1:
            state.gradients = replicated_gradients(func, state.tail)
        context.bump("scalify.update-ops", len(state.tail))
    scalify_function(func, state, BoundaryStorage(
        roots=state_squares if encode else frozenset(),
        root_element=_format_type(options.square_format),
        root_stochastic=options.square_rounding == "stochastic",
        moments=frozenset(first_moments(func, classes.squares)) if moments else frozenset(),
        moment_element=_format_type(options.moment_format),
        moment_stochastic=options.moment_rounding == "stochastic"),
        fold_scales=fold)


def _format_type(name: str) -> ir.Type | None:
    """The FP8 type an option names; None for ``none`` (the data dtype)."""
    return None if name == "none" else float_type(name)


def _boundary_squares(func: ir.Operation, squares: set[ir.Value]) -> set[ir.Value]:
    """The entry arguments and returned values that hold squares and are state: a square
    argument with a square result of the same type (Adam's second moment, factored second
    moments, taken and returned). A square result with no such argument (a mean squared
    error loss) stays as it is: it is not fed back, and its reader expects data * scale."""
    block = func.regions[0].blocks[0]
    returned = returned_values(block) or []
    args = [v for v in block.arguments if is_scalable_type(v.type) and v in squares]
    results = [v for v in returned if is_scalable_type(v.type) and v in squares]
    arg_types = {str(v.type) for v in args}
    result_types = {str(v.type) for v in results}
    return ({v for v in args if str(v.type) in result_types}
            | {v for v in results if str(v.type) in arg_types})


@register("scalify",
          "Split every floating tensor into (data, scale) with a power-of-two scale and propagate "
          "scales through every op (calls are inlined first).")
class Scalify(ModulePass):
    data_dtype: str = option("f16", "element type of the data halves",
                             DATA_DTYPES + tuple(DATA_DTYPE_ALIASES))
    strict: bool = option(False, "make an op without a scale rule an error, not a warning")
    common_scale: str = option(
        "auto", "scale that add, select, concatenate... bring their operands to when runtime "
        "scales differ: max, first (an operand's: the first that is an argument's or carry's "
        "own, else the first), or auto (max for f16 data, first otherwise)", COMMON_SCALES)
    square_dtype: str = option(
        "auto", "data type of squares and of what they are added to (Adam's second moment): "
        "f16 cannot hold the square of a tensor whose entries span more than 12 binades; "
        "auto: f32 for f16 data, else the data type",
        ("auto",) + DATA_DTYPES + tuple(DATA_DTYPE_ALIASES))
    square_encoding: str = option(
        "auto", "how squares cross the entry boundary (the second moment between steps): "
        "sqrt (data holds the signed square root, in the data dtype), none (as they are "
        "computed), or auto (sqrt for f16 data with square-dtype=auto)", SQUARE_ENCODINGS)
    square_rounding: str = option(
        "nearest", "how a square's root is rounded to its storage type at the boundary: "
        "nearest, or stochastic (unbiased: a moving average's changes below half an ulp are "
        "kept in expectation)", SQUARE_ROUNDINGS)
    update: str = option(
        "f32", "how a training step's update (its elementwise ops after the backward pass "
        "that lead only to its results) runs: f32 (on unscaled values in the original types; "
        "each result then takes one scale, from its amax for f16 data, 1 otherwise) or "
        "scaled (with scales propagated, as the rest of the step)", UPDATES)
    square_format: str = option(
        "none", "storage type of a square's root between steps: none (the data dtype) or an "
        "FP8 format (scale from the root's amax, in the format's top binade)", STATE_FORMATS)
    moment_format: str = option(
        "none", "storage type of first moments between steps (state returned as c * itself + "
        "d * gradient, 0 < c < 1: Adam's mu, momentum's trace, found without marking): none "
        "(the data dtype) or an FP8 format (scale from the moment's amax, in the format's "
        "top binade)", STATE_FORMATS)
    moment_rounding: str = option(
        "stochastic", "how a first moment is rounded to its FP8 format at the boundary: "
        "stochastic (unbiased: with 3 significand bits, nearest rounding drops a moving "
        "average's changes below 6% of it) or nearest", SQUARE_ROUNDINGS)
    update_rounding: str = option(
        "auto", "how the update's results (new weights and optimizer state, computed in f32 "
        "with update=f32) are rounded to bf16 data: stochastic (unbiased: bf16 drops a "
        "weight's updates below 2^-9 of it, which add up over a run; bf16 data only), nearest, "
        "or auto (stochastic for bf16 data, nearest for the others and for first moments "
        "that decay by at most 15/16 a step, such as Adam's mu: they lag the gradient by at "
        "most 2^-8 / (1 - decay), no drift)", UPDATE_ROUNDINGS)

    argument_scales: str = option(
        "keep", "what the entry function does with the scales it is given: keep (each "
        "argument is its data at a run-time scale) or fold (where the data has f32's "
        "exponent range, f32 or bf16: each argument is multiplied by its scale on entry, "
        "exactly, and the step runs on values at their original magnitude, with no run-time "
        "exponent arithmetic and no unit-scaling shift of dots, sums and constants)",
        ARGUMENT_SCALES)
    delayed_statistics: str = option(
        "none", "where the rescale pass's points at the top level of the entry function take "
        "their exponent: none (the statistic they measure), measure (that, and the function "
        "returns the exponents as one more tensor<Kxi32> result) or use (the exponents of one "
        "more tensor<Kxi32> argument, the previous call's, and it returns the measured ones: "
        "the statistics no longer wait for each other: where the step is sharded, XLA combines "
        "their all-reduces instead of running one after another) or auto (measure where the "
        "module is partitioned over several devices, none otherwise)", DELAYED_MODES)

    def validate(self) -> None:
        if self.update_rounding == "stochastic" and data_dtype_name(self.data_dtype) != "bf16":
            raise PipelineError(f"update-rounding=stochastic rounds the update's results to "
                                f"bf16 data: data-dtype is {self.data_dtype}")
        if self.square_format != "none" and not resolve_square_encoding(
                self.square_encoding, self.square_dtype, data_dtype_name(self.data_dtype)):
            raise PipelineError(f"square-format={self.square_format} stores squares by their "
                                "root: it needs square-encoding=sqrt (or auto with f16 data and "
                                "square-dtype=auto)")

    def apply(self, module: ir.Module, context: PassContext) -> None:
        scalify_module(module, self, context)
