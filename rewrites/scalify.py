"""The ``scalify`` pass: every floating tensor of the entry function becomes (data, scale).

Public convention (docs/scaled-signature.md): each f16/bf16/f32 argument and result of the
entry function becomes two consecutive values, the data (same shape, the data dtype) and the
scale (``tensor<f32>``, a power of two); ``original = data * scale``. Other values stay as
they are. Calls are inlined first, then the body is rebuilt op by op from ``rules.RULES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from jax.extend.mlir import ir

from scalify_hlo.dtypes import DATA_DTYPE_ALIASES, DATA_DTYPES
from scalify_hlo.errors import RewriteError
from scalify_hlo.names import (
    ARG_NAME_ATTR,
    DATA_SUFFIX,
    ENCODING_ATTR,
    ORIGINAL_TYPE_ATTR,
    SCALE_SUFFIX,
    SQRT_ENCODING,
    argument_names,
    half_name,
)
from scalify_hlo.rewrites import rule_impls
from scalify_hlo.rewrites.drift import compounding_constant_adds
from scalify_hlo.rewrites.emitter import float_type, is_scalable_type
from scalify_hlo.rewrites.inline import inline_calls, remove_unused_private_functions
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.rewrites.rules import RULES
from scalify_hlo.rewrites.scope import (
    RESCALE_ATTR,
    RESCALE_DRIFTING_ATTR,
    Scaled,
    ScalifyState,
    Scope,
)
from scalify_hlo.rewrites.square_values import wide_values
from scalify_hlo.scale import Scale
from scalify_hlo.symbols import SCALE_ARGS_ATTR, entry_function

# The pass's option choices (Policy.square_encoding, square_rounding).
COMMON_SCALES = ("auto", "max", "first")
SQUARE_ENCODINGS = ("auto", "sqrt", "none")
SQUARE_ROUNDINGS = ("nearest", "stochastic")

_SDY_MESH_RE = re.compile(r"#sdy\.sharding<(@[\w.$-]+|mesh<[^>]*>)")


def _dict_attr(attrs: ir.Attribute | None, index: int) -> dict[str, ir.Attribute]:
    if attrs is None:
        return {}
    entry = ir.DictAttr(ir.ArrayAttr(attrs)[index])
    return {named.name: named.attr for named in (entry[i] for i in range(len(entry)))}


def _scale_attrs(data_attrs: dict[str, ir.Attribute]) -> dict[str, ir.Attribute]:
    """A scale is replicated wherever its data is sharded."""
    attrs: dict[str, ir.Attribute] = {}
    if "mhlo.sharding" in data_attrs:
        attrs["mhlo.sharding"] = ir.StringAttr.get("{replicated}")
    if "sdy.sharding" in data_attrs:
        match = _SDY_MESH_RE.search(str(data_attrs["sdy.sharding"]))
        if match:
            attrs["sdy.sharding"] = ir.Attribute.parse(f"#sdy.sharding<{match.group(1)}, []>")
    return attrs


def _with_suffix(attrs: dict[str, ir.Attribute], suffix: str) -> dict[str, ir.Attribute]:
    if "jax.result_info" in attrs:
        attrs = dict(attrs)
        info = ir.StringAttr(attrs["jax.result_info"]).value
        attrs["jax.result_info"] = ir.StringAttr.get(f"{info}{suffix}")
    return attrs


def _with_name(attrs: dict[str, ir.Attribute], name: str | None) -> dict[str, ir.Attribute]:
    """``attrs`` with ``jax.arg_info = name``: an argument keeps its path when the module is
    printed without locations (where JAX's export keeps it)."""
    if name is None:
        return attrs
    return {**attrs, ARG_NAME_ATTR: ir.StringAttr.get(name)}


def _encoded(attrs: dict[str, ir.Attribute], is_encoded: bool) -> dict[str, ir.Attribute]:
    """``attrs`` with ``scalify.encoding = "sqrt"`` for a data half stored as a square root."""
    if not is_encoded:
        return attrs
    return {**attrs, ENCODING_ATTR: ir.StringAttr.get(SQRT_ENCODING)}


def _decode_sqrt(scope: Scope, value: Scaled, inside: ir.Type) -> Scaled:
    """A square stored as its signed square root ``x = data * scale``, as ``x * |x|`` in the
    type it is computed in (``inside``, f32 for f16 data): the data is squared in f32 (exact
    for f16 and bf16 data), the scale is squared symbolically (no runtime op)."""
    emit, f32 = scope.emit, scope.state.types.f32
    wide = emit.convert(value.data, f32)
    square = emit.binary("stablehlo.multiply", wide, emit.unary("stablehlo.abs", wide))
    return Scaled(emit.convert(square, inside), value.scale.times(value.scale))


# Bits of f32's significand that a 16-bit storage type drops (stochastic rounding).
_DROPPED_BITS = {"f16": 13, "bf16": 16}
# Multipliers of a 32-bit integer hash (murmur3's finalizer), as signed i32.
_HASH_MULTIPLIERS = (-1640531535, -2048144789, -1028477387)


def _hash_bits(scope: Scope, bits: ir.Value, t: ir.RankedTensorType) -> ir.Value:
    """A pseudo-random i32 per element, from its own bits and its indices: the root changes
    every step, so each element draws a new value each step (no state, no key)."""
    emit = scope.emit

    def splat(value: int) -> ir.Value:
        return emit.broadcast_scalar(emit.int_scalar(value), t)

    h = bits
    for dim in range(t.rank):
        index = emit.op("stablehlo.iota", [], [t], {
            "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).result
        h = emit.binary("stablehlo.xor", h, emit.binary(
            "stablehlo.multiply", index, splat(_HASH_MULTIPLIERS[dim % 3])))
    for shift, multiplier in ((16, _HASH_MULTIPLIERS[1]), (13, _HASH_MULTIPLIERS[2])):
        h = emit.binary("stablehlo.xor", h,
                        emit.binary("stablehlo.shift_right_logical", h, splat(shift)))
        h = emit.binary("stablehlo.multiply", h, splat(multiplier))
    return emit.binary("stablehlo.xor", h,
                       emit.binary("stablehlo.shift_right_logical", h, splat(16)))


def _stochastic_round(scope: Scope, data: ir.Value, storage: ir.Type) -> ir.Value:
    """f32 ``data`` rounded stochastically to ``storage`` (f16, bf16): a random integer
    below 2^dropped is added to the bits and the dropped bits cleared, so a value rounds up
    with probability equal to its distance from the value below. A moving average whose
    per-step change is below half a unit in the last place (Adam's b2 = 0.999 in f16: 2^-10)
    keeps its expected value, where nearest rounding drops the change. Exact for values in
    the storage type's normal range; smaller ones (f16 subnormals) and non-finite ones are
    rounded to nearest."""
    dropped = _DROPPED_BITS.get(str(storage))
    if dropped is None:
        return data
    emit, types = scope.emit, scope.state.types
    t = ir.RankedTensorType(data.type)
    int_type = types.with_element_type(t, ir.IntegerType.get_signless(32))
    bits = emit.unary("stablehlo.bitcast_convert", data, int_type)
    noise = emit.binary("stablehlo.and", _hash_bits(scope, bits, int_type),
                        emit.broadcast_scalar(emit.int_scalar((1 << dropped) - 1), int_type))
    mask = emit.broadcast_scalar(emit.int_scalar(-(1 << dropped)), int_type)
    dithered = emit.binary("stablehlo.and", emit.binary("stablehlo.add", bits, noise), mask)
    rounded = emit.unary("stablehlo.bitcast_convert", dithered, t)
    magnitude = emit.unary("stablehlo.abs", data)
    smallest = 2.0 ** -14 if dropped == 13 else 2.0 ** -126  # the smallest normal
    largest = 65504.0 if dropped == 13 else 3.0e38
    i1 = types.with_element_type(t, ir.IntegerType.get_signless(1))
    in_range = emit.op("stablehlo.and", [
        emit.compare("GE", magnitude, emit.splat(smallest, t)),
        emit.compare("LE", magnitude, emit.splat(largest, t))], [i1]).result
    chosen = emit.op("stablehlo.select", [in_range, rounded, data], [t]).result
    return emit.convert(chosen, storage)


def _encode_sqrt(scope: Scope, value: Scaled, storage: ir.Type,
                 stochastic: bool = False) -> Scaled:
    """A square as its signed square root ``sign(v) sqrt(|v|)`` in ``storage``: its binade
    span halves, so 16 bits hold squares of values spanning twice as many binades. The
    scale's exponent is made even first (an odd one moves a factor 2 into the data, in
    f32), then halved; the root is rescaled by its amax so that it sits at unit scale
    whatever the square's scale was."""
    emit, types = scope.emit, scope.state.types
    i32, f32 = types.scalar_i32, types.f32
    wide = emit.convert(value.data, f32)
    exponent = scope.exponent(value.scale)
    odd = emit.binary("stablehlo.and", exponent, emit.int_scalar(1), i32)
    wide = emit.times_factor(wide, emit.pow2_of_exponent(odd))
    half = emit.binary("stablehlo.shift_right_arithmetic",
                       emit.binary("stablehlo.subtract", exponent, odd, i32),
                       emit.int_scalar(1), i32)
    root = emit.binary("stablehlo.multiply", emit.unary("stablehlo.sign", wide),
                       emit.unary("stablehlo.sqrt", emit.unary("stablehlo.abs", wide)))
    rescaled = scope.rescale(Scaled(root, Scale.dynamic(half)), "amax:nearest")
    data = (_stochastic_round(scope, rescaled.data, storage) if stochastic
            else emit.convert(rescaled.data, storage))
    return Scaled(data, rescaled.scale)


def _scale_location(loc: ir.Location) -> ir.Location:
    text = str(loc)
    match = re.match(r'loc\("([^"]*)"\)$', text)
    return ir.Location.name(f"{match.group(1)}.scale") if match else loc


class SignatureSplit:
    """How the entry function's arguments and results map to the flattened signature."""

    def __init__(self, func: ir.Operation, scope: Scope,
                 encoded: frozenset[ir.Value] = frozenset()) -> None:
        function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        self.inputs = list(function_type.inputs)
        self.results = list(function_type.results)
        block = func.regions[0].blocks[0]
        returned = _returned_values(block)
        # Which arguments and results cross the boundary as signed square roots, in the
        # data dtype (``_decode_sqrt``, ``_encode_sqrt``).
        self.encoded_inputs = [a in encoded for a in block.arguments]
        self.encoded_results = ([v in encoded for v in returned] if returned is not None
                                else [False] * len(self.results))
        storage = scope.state.data_dtype
        types = scope.state.types

        def data_type(old: ir.Value, is_encoded: bool) -> ir.Type:
            return (types.with_element_type(old.type, storage) if is_encoded
                    else scope.data_type_of(old))

        self.input_data_types = [data_type(a, e) for a, e in
                                 zip(block.arguments, self.encoded_inputs, strict=True)]
        self.result_data_types = ([data_type(v, e) for v, e in
                                   zip(returned, self.encoded_results, strict=True)]
                                  if returned is not None else
                                  [scope.data_type(t) for t in self.results])
        self.arg_attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
        self.arg_names = argument_names(func)
        self.res_attrs = func.attributes["res_attrs"] if "res_attrs" in func.attributes else None
        self.result_positions: list[int] = []
        position = 0
        for t in self.results:
            self.result_positions.append(position)
            position += 2 if is_scalable_type(t) else 1

    def new_inputs(self) -> list[ir.Type]:
        return self._flat(self.inputs, self.input_data_types)

    def new_results(self) -> list[ir.Type]:
        return self._flat(self.results, self.result_data_types)

    @staticmethod
    def _flat(types: list[ir.Type], data_types: list[ir.Type]) -> list[ir.Type]:
        flat: list[ir.Type] = []
        for t, data_type in zip(types, data_types, strict=True):
            flat.append(data_type)
            if is_scalable_type(t):
                flat.append(ir.RankedTensorType.get([], ir.F32Type.get()))
        return flat

    def _remap_aliasing(self, attrs: dict[str, ir.Attribute]) -> dict[str, ir.Attribute]:
        if "tf.aliasing_output" in attrs:
            old = ir.IntegerAttr(attrs["tf.aliasing_output"]).value
            if 0 <= old < len(self.result_positions):
                attrs = dict(attrs)
                attrs["tf.aliasing_output"] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), self.result_positions[old])
        return attrs

    def new_arg_attrs(self) -> ir.ArrayAttr:
        entries: list[ir.Attribute] = []
        for index, t in enumerate(self.inputs):
            attrs = self._remap_aliasing(_dict_attr(self.arg_attrs, index))
            name = self.arg_names[index]
            if not is_scalable_type(t):
                entries.append(ir.DictAttr.get(_with_name(attrs, name)))
                continue
            data_attrs = _with_name(attrs, half_name(name, DATA_SUFFIX))
            entries.append(ir.DictAttr.get(_encoded(data_attrs, self.encoded_inputs[index])))
            entries.append(ir.DictAttr.get(_with_name(_scale_attrs(attrs),
                                                      half_name(name, SCALE_SUFFIX))))
        return ir.ArrayAttr.get(entries)

    def scale_arguments(self) -> list[int]:
        """The indices of the scale arguments in the new signature."""
        indices: list[int] = []
        position = 0
        for t in self.inputs:
            if is_scalable_type(t):
                indices.append(position + 1)
            position += 2 if is_scalable_type(t) else 1
        return indices

    def new_res_attrs(self) -> ir.ArrayAttr:
        entries: list[ir.Attribute] = []
        for index, t in enumerate(self.results):
            attrs = _dict_attr(self.res_attrs, index)
            if is_scalable_type(t):
                entries.append(ir.DictAttr.get(_encoded(_with_suffix(attrs, ".data"),
                                                        self.encoded_results[index])))
                scale_attrs = _scale_attrs(attrs)
                if "jax.result_info" in attrs:
                    scale_attrs["jax.result_info"] = attrs["jax.result_info"]
                entries.append(ir.DictAttr.get(_with_suffix(scale_attrs, ".scale")))
            else:
                entries.append(ir.DictAttr.get(attrs))
        return ir.ArrayAttr.get(entries)


def scalify_function(func: ir.Operation, state: ScalifyState,
                     encoded: frozenset[ir.Value] = frozenset(),
                     stochastic: bool = False) -> None:
    """Replace ``func`` by its scaled version (same name, flattened signature); the
    arguments and results in ``encoded`` cross it as signed square roots (rounded
    stochastically to the data dtype with ``stochastic``)."""
    old_block = func.regions[0].blocks[0]
    probe = Scope(state, old_block)
    split = SignatureSplit(func, probe, encoded)
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
            arg_locs.append(_scale_location(arg.location))
    block = new_func.regions[0].blocks.append(*split.new_inputs(), arg_locs=arg_locs)
    scope = Scope(state, block)
    scope.bind_flat(list(old_block.arguments), list(block.arguments), f32_scales=True)
    for arg, is_encoded in zip(old_block.arguments, split.encoded_inputs, strict=True):
        if is_encoded:
            scope.set(arg, _decode_sqrt(scope, scope.scaled(arg), state.dtype_of(arg)))
            state.context.bump("scalify.sqrt-encoded")
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
                        every or scope.can_drift(found.scale)):
                    scope.set(value, scope.rescale(found, method))
                    state.context.record("func.return", terminator.location, "rescale",
                                         f"{method}, result {index}")
            break
    roots: dict[ir.Value, Scaled] = {}
    for value, is_encoded in zip(terminator.operands, split.encoded_results, strict=True):
        if is_encoded and value not in roots:
            roots[value] = _encode_sqrt(scope, scope.scaled(value), state.data_dtype,
                                        stochastic)
            state.context.bump("scalify.sqrt-encoded")
    for value, root in roots.items():
        scope.set(value, root)
    scope.emit.at(terminator.location).op("func.return",
                                          scope.flatten(list(terminator.operands),
                                                        f32_scales=True), [])
    func.erase()


def _returned_values(block: ir.Block) -> list[ir.Value] | None:
    ops = block.operations
    count = len(ops)  # the last op by index: listing them all makes a handle per op
    if count and ops[count - 1].operation.name == "func.return":
        return list(ops[count - 1].operation.operands)
    return None


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
    (an argument's own, a loop carry's), else the first operand's (``scope._first_choice``);
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


def scalify_module(module: ir.Module, data_dtype: str, strict: bool, context: PassContext,
                   common_scale: str = "auto", square_dtype: str = "auto",
                   square_encoding: str = "auto", square_rounding: str = "nearest") -> None:
    context.bump("inline.calls-inlined", inline_calls(module))
    remove_unused_private_functions(module)
    dtype = data_dtype_name(data_dtype)
    state = ScalifyState(
        data_dtype=float_type(dtype),
        strict=strict,
        common_scale_rule=resolve_common_scale_rule(common_scale, dtype),
        context=context,
        rules={name: rule.family.apply for name, rule in RULES.items()},  # no Rule.__call__
        fallback=rule_impls.rule_fallback,
        clone=rule_impls.rule_unscaled,
    )
    func = entry_function(module)
    if state.common_scale_rule == "first":
        state.compounding = compounding_constant_adds(func)
    wide = resolve_square_dtype(square_dtype, dtype)
    encode = resolve_square_encoding(square_encoding, square_dtype, dtype)
    classes = wide_values(func) if wide is not None or dtype != "f32" or encode else None
    if wide is not None:
        state.set_wide(classes.squares, float_type(wide))
        context.bump("scalify.square-values", len(classes.squares))
    if dtype != "f32" and classes.bits:
        # Floats made from integer bits keep f32's significand up to the nonlinear op that
        # reads them (jax.random's uniforms before erf_inv or log): see square_values.py.
        state.set_wide(classes.bits, float_type("f32"))
        context.bump("scalify.bit-values", len(classes.bits))
    encoded = frozenset(_boundary_squares(func, classes.squares)) if encode else frozenset()
    scalify_function(func, state, encoded, square_rounding == "stochastic")


def _boundary_squares(func: ir.Operation, squares: set[ir.Value]) -> set[ir.Value]:
    """The entry arguments and returned values that hold squares and are state: a square
    argument with a square result of the same type (Adam's second moment, factored second
    moments, taken and returned). A square result with no such argument (a mean squared
    error loss) stays as it is: it is not fed back, and its reader expects data * scale."""
    block = func.regions[0].blocks[0]
    returned = _returned_values(block) or []
    args = [v for v in block.arguments if is_scalable_type(v.type) and v in squares]
    results = [v for v in returned if is_scalable_type(v.type) and v in squares]
    arg_types = {str(v.type) for v in args}
    result_types = {str(v.type) for v in results}
    return ({v for v in args if str(v.type) in result_types}
            | {v for v in results if str(v.type) in arg_types})


@register
@dataclass(frozen=True)
class Scalify(ModulePass):
    name: ClassVar[str] = "scalify"
    description: ClassVar[str] = (
        "Split every floating tensor into (data, scale) with a power-of-two scale and "
        "propagate scales through every op (calls are inlined first).")

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
        "nearest", "how a square's root is rounded to the data dtype at the boundary: "
        "nearest, or stochastic (unbiased: a moving average's changes below half an ulp are "
        "kept in expectation)", SQUARE_ROUNDINGS)

    def apply(self, module: ir.Module, context: PassContext) -> None:
        scalify_module(module, self.data_dtype, self.strict, context, self.common_scale,
                       self.square_dtype, self.square_encoding, self.square_rounding)
