"""Delayed statistics: a rescale point shifts its data by the exponent the previous call
measured there, and hands the one it measures on to the next call.

Why: a rescale point's exponent decides the data that every later point measures, so the
statistics of a step form one chain, and in a sharded step each one over a sharded tensor
is an all-reduce that waits for the one before (58 in a row for a 2-layer GPT in data
parallel; docs/how-it-works.md, "Sharded steps"). With the exponent from the previous call,
no data waits for a statistic: the statistics are independent, and XLA combines their
all-reduces into one per step. Between two calls of a training step the data a point sees
moves by a binade or two, and f16 has fifteen above unit scale; a value that a stale
exponent would overflow saturates at the data type's largest finite value instead of
becoming inf (an inf of the wide value stays inf).

The statistics of the entry function's own block (the ``rescale`` pass's points, the
narrowing of a wide value to the data type and the encodings of f16 results, at unit RMS or
as square roots, in ``scalify``; then the FP8 operands' amax shifts, in ``fp8-dots``, which
appends its own; points inside loops, shard_map bodies and other regions measure and apply
their statistic as before), in the order the passes meet them, are numbered 0..K-1. The
results' own too: a result stored at the exponent of its statistic waits for that
statistic's all-reduce, and XLA:GPU's multi-output fusions then chain the next ones behind
it. With ``delayed-statistics=measure`` the function returns the exponents it applied as
one more result, a ``tensor<Kxi32>``; with ``use`` it also takes one more argument of that
type, the exponents to apply, and returns the ones it measured. A
caller runs the ``measure`` program once (the first step: its exponents are the measured
ones) and the ``use`` program after, each call given the exponents the one before returned
(``compile_scaled`` does that through its bank of scales). The function attribute
``scalify.delayed_exponents`` holds K.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.names import ARG_NAME_ATTR, RESULT_NAME_ATTR, string_attr
from scalify_hlo.rewrites.emitter import Emitter, Types
from scalify_hlo.rewrites.registry import ModulePass
from scalify_hlo.rewrites.signature_split import dict_attr, replicated_attrs
from scalify_hlo.symbols import DELAYED_ATTR, entry_function, partition_count

# The scalify pass's ``delayed-statistics`` option (``auto``: see ``resolved_mode``).
MODES = ("none", "measure", "use", "auto")
ARG_NAME = "delayed_exponents"
# How the exponent a point hands on follows its data (``DelayedExponents.held``): up at once;
# held while the data is at most HOLD_SLACK binades below it, and down HOLD_DECAY binades a
# call beyond that. transformer_lm under the H100 policy, 100 steps, the last 10 losses
# against jax.jit's (seeds 0 and 1): slack 8 +0.06% and +0.37%, slack 12 +0.13% and +0.23%,
# no slack with decay 1 +1.08% and +2.32%, with decay 2 NaN at seed 1; current statistics
# +0.22% and +0.36%. The slack bounds how far below unit scale f16 data may sit for good.
HOLD_DECAY = 1
HOLD_SLACK = 8


def resolved_mode(mode: str, module: ir.Module) -> str:
    """``auto`` as ``measure`` for a module that JAX's SPMD partitioner splits over several
    devices (there each statistic of a sharded tensor is an all-reduce, and current ones
    chain) and as ``none`` for one device (where a chain costs kernels, not latency, and a
    step keeps one program); any other mode as it is."""
    if mode != "auto":
        return mode
    return "measure" if partition_count(module) > 1 else "none"


class DelayedExponents:
    """The delayed points of one entry function, numbered as they are emitted."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        # The scope of the entry function's block: only its points are delayed (a region
        # of its own, a shard_map body or a loop's, has its own data per run).
        self.scope: object | None = None
        self.measured: list[ir.Value] = []  # this call's exponent per point (rank-0 i32)
        self.held_points: list[bool] = []  # per point: whether ``held`` holds its exponent
        self._given: list[ir.Operation] = []  # per point, what stands for the given one
        # The exponent a point applies, by what it measures where several casts measure the
        # same tensor (fp8-dots: a weight cast in one format for its forward and backward
        # dots): one point serves them all, so that they stay the same ops.
        self.by_operand: dict[tuple[ir.Value, str], ir.Value] = {}

    def exponent(self, emit: Emitter, measured: ir.Value,
                 handed_on: ir.Value | None = None, held: bool = True,
                 known: ir.Value | None = None) -> ir.Value:
        """The exponent a point applies, given the one it measured: that one in ``measure``
        mode, the previous call's in ``use`` mode. ``handed_on``: what the next call gets,
        where it is not ``measured`` (which may be an all-zero tensor's own exponent, the
        smallest: it would push the next call's nonzero values to f16's largest). ``known``
        (rank-0 i1): whether the data measured anything (not all zero, finite); where it did
        not, a first call hands on 0 and a fed-back one the exponent it was given, as it
        was (a gradient that is zero for some calls, a loss term weighted 0 during a
        warm-up, comes back where it was: at the smallest exponent its gradient was NaN
        from the call after). ``held``: what the point hands on is held (``held``); an FP8
        cast's is not (it saturates in its format's top binade by design, where the next
        dot expects it)."""
        handed = measured if handed_on is None else handed_on
        self.held_points.append(held)
        if self.mode != "use":
            if known is not None:
                handed = emit.op("stablehlo.select", [known, handed, emit.int_scalar(0)],
                                 [handed.type]).result
            self.measured.append(handed)
            return measured
        i32 = emit.types.scalar_i32
        # A constant of its own (not the emitter's cached zero): replaced once the argument
        # that holds the given exponents exists.
        stand_in = ir.Operation.create(
            "stablehlo.constant", results=[i32], loc=emit.loc, ip=emit.ip,
            attributes={"value": ir.DenseElementsAttr.get(np.zeros((), np.int32), type=i32)})
        self._given.append(stand_in)
        given = stand_in.results[0]
        if known is not None:
            handed = emit.op("stablehlo.select", [known, handed, given], [i32]).result
        self.measured.append(handed)
        return given

    def append_to(self, func: ir.Operation, types: Types) -> None:
        """Add this pass's points to the delayed exponents of ``func`` (after any an earlier
        pass gave it): its last result (and in ``use`` mode its last argument) becomes the
        longer vector. Nothing changes without a point."""
        count = len(self.measured)
        if self.mode == "none" or not count:
            return
        block = func.regions[0].blocks[0]
        ret = block.operations[len(block.operations) - 1].operation
        existing = delayed_count_of(func)
        total = existing + count
        i32 = types.i32
        vector_type = ir.RankedTensorType.get([total], i32)
        one = ir.RankedTensorType.get([1], i32)
        emit = Emitter(ir.InsertionPoint(ret), ret.location, types=types)
        operands = list(ret.operands)
        parts = [emit.unary("stablehlo.reshape", value, one) for value in self.measured]
        earlier = operands.pop() if existing else None
        function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        inputs, results = list(function_type.inputs), list(function_type.results)
        if self.mode == "use":
            if existing:
                given = block.arguments[len(block.arguments) - 1]
                whole_reads = _whole_vector_reads(given)
                given.set_type(vector_type)
                for read in whole_reads:  # now element 0 of a longer vector: a slice
                    at = Emitter(ir.InsertionPoint(read), read.location, types=types)
                    read.results[0].replace_all_uses_with(at.element(given, 0))
                    read.erase()
                inputs[-1] = vector_type
            else:
                given = block.add_argument(vector_type, func.location)
                inputs.append(vector_type)
                func.attributes["arg_attrs"] = _appended(func, "arg_attrs", len(inputs) - 1,
                                                         ARG_NAME_ATTR)
            at = Emitter(ir.InsertionPoint(block.operations[0]), func.location, types=types)
            for index, stand_in in enumerate(self._given, start=existing):
                stand_in.results[0].replace_all_uses_with(at.element(given, index))
                stand_in.erase()
            this_call = parts[0] if count == 1 else emit.op(
                "stablehlo.concatenate", parts, [ir.RankedTensorType.get([count], i32)],
                {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
            # A slice even of the whole vector: a later pass's points make it longer.
            parts = [self.held(emit, this_call, emit.slice(given, existing, total))]
        if earlier is not None:
            parts.insert(0, earlier)
        measured = parts[0] if len(parts) == 1 else emit.op(
            "stablehlo.concatenate", parts, [vector_type],
            {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
        if existing:
            results[-1] = vector_type
        else:
            results.append(vector_type)
            func.attributes["res_attrs"] = _appended(func, "res_attrs", len(results) - 1,
                                                     RESULT_NAME_ATTR)
        emit.op("func.return", [*operands, measured], [])
        ret.erase()
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
        func.attributes[DELAYED_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                           total)

    def held(self, emit: Emitter, measured: ir.Value, given: ir.Value) -> ir.Value:
        """What a fed-back call hands on, given the exponents it ``measured`` and the ones it
        was ``given`` (both this pass's, as vectors), for the points that ``exponent`` was
        told to hold: the measured one where it is larger (data that grew); the given one
        while the data is at most ``HOLD_SLACK`` binades below it; beyond that, the given
        one less ``HOLD_DECAY``.

        Why: a rescale point applies the previous call's exponent, and data that grew past
        it saturates at the data type's largest value, where the products after it
        overflow f16 (docs/robustness.md). Cancellation residuals (a softmax's or a
        BatchNorm's gradient terms that are zero but for rounding) move by up to 2^23 from
        one call to the next; the exponent of their largest recent value keeps the data
        below the top when they come back. This is the amax history of delayed FP8 scaling
        (the largest over recent steps), held in the exponent itself: no more state; and a
        value that shrinks for good (a gradient as the loss falls) is followed down, a
        binade a call, once it is ``HOLD_SLACK`` binades below."""
        if not any(self.held_points):
            return measured
        t = measured.type
        shape = ir.RankedTensorType(t).shape
        decay = emit.constant(np.full(shape, HOLD_DECAY, np.int32), t)
        slack = emit.constant(np.full(shape, HOLD_SLACK, np.int32), t)
        # max(m, min(g, max(g - decay, m + slack))): g while m <= g <= m + slack, g - decay
        # above that, m from below.
        lowest = emit.binary("stablehlo.maximum", emit.binary("stablehlo.subtract", given,
                                                              decay, t),
                             emit.binary("stablehlo.add", measured, slack, t), t)
        held = emit.binary("stablehlo.maximum", measured,
                           emit.binary("stablehlo.minimum", given, lowest, t), t)
        if all(self.held_points):
            return held
        mask = emit.constant(np.array(self.held_points),
                             ir.RankedTensorType.get(shape, ir.IntegerType.get_signless(1)))
        return emit.op("stablehlo.select", [mask, held, measured], [t]).result


def _whole_vector_reads(vector: ir.Value) -> list[ir.Operation]:
    """The reshapes that read ``vector`` whole as a rank-0 value: how ``Emitter.element``
    reads a vector of one (an earlier pass's single point). Once the vector grows they
    would reshape all of it, so ``append_to`` makes each one a slice of element 0."""
    return [use.owner for use in vector.uses
            if use.owner.name == "stablehlo.reshape"
            and ir.RankedTensorType(use.owner.results[0].type).rank == 0]


def _appended(func: ir.Operation, name: str, count: int, info: str) -> ir.ArrayAttr:
    """``func``'s ``arg_attrs`` or ``res_attrs`` (``count`` entries) with one more: the
    exponent vector's name, replicated where the module is sharded (as every scale is)."""
    array = func.attributes[name] if name in func.attributes else None
    entries = list(ir.ArrayAttr(array)) if array is not None else []
    entries += [ir.DictAttr.get({})] * (count - len(entries))
    sharded = next((dict_attr(array, index) for index, entry in enumerate(entries)
                    if "sharding" in str(entry)), {})  # padding entries hold none
    attrs = {info: ir.StringAttr.get(ARG_NAME), **replicated_attrs(sharded, rank=1)}
    return ir.ArrayAttr.get([*entries, ir.DictAttr.get(attrs)])


def delayed_count(module: ir.Module) -> int:
    """How many delayed exponents the module's entry function returns (0: none)."""
    return delayed_count_of(entry_function(module))


def takes_given_exponents(module: ir.Module) -> bool:
    """Whether the entry function applies the exponents of the call before (``use`` mode:
    its last argument is the vector of them), so that what its own statistics become is
    handed on and scales no data of this call."""
    func = entry_function(module)
    count = len(func.regions[0].blocks[0].arguments)
    attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
    return bool(count) and string_attr(attrs, count - 1, ARG_NAME_ATTR) == ARG_NAME


def delayed_count_of(func: ir.Operation) -> int:
    attributes = func.attributes
    return ir.IntegerAttr(attributes[DELAYED_ATTR]).value if DELAYED_ATTR in attributes else 0


def with_delayed_mode(passes: Sequence[ModulePass], mode: str) -> list[ModulePass]:
    """``passes`` with ``delayed-statistics`` set to ``mode`` in every pass that has it
    (scalify's rescale points, fp8-dots' amaxes: the two must agree)."""
    return [dataclasses.replace(p, delayed_statistics=mode)
            if any(o.field == "delayed_statistics" for o in p.options()) else p
            for p in passes]
