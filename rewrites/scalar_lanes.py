"""``vectorize-scalar-chains``: the same scalar arithmetic on each element of a vector, done
once on the vector.

Why: a step's scale arithmetic reads vectors element by element and runs the same chain of
rank-0 ops on each element: ``2**-e`` of every exponent in the delayed exponents it is given,
the rounding of every statistic of a group (``group-statistics``' per-tensor results) to the
exponent it hands on. XLA:GPU copies such chains into multi-output scalar kernels (the
GPT-2-small step had about 60 kernels of rank-0 results where the FP8 floor has 4) and
compiles every copy. Done on the vector, a chain is one elementwise op per step whatever the
element count, and where its results are concatenated again in order (the exponent vector a
step returns, the packed scales) the concatenate is a slice of the result.

How (what compilers call SLP vectorization): the lanes of a vector ``v`` of the entry block
are its rank-0 reads ``reshape(slice(v, [j:j+1]))``. The same elementwise op (same name,
attributes and result type) reading lane ``j`` of a bundle at the same operand positions, for
several lanes, becomes one op on vectors: an operand that is lane ``j`` of a bundle of as many
lanes is that bundle's vector, one that is the same scalar for every lane a broadcast of it,
any other a vector of the lanes' scalars (short vectors only). Lane ``j`` then reads element
``j`` of the result, its own op goes, and the result is a bundle grown in turn. Lanes no
member uses are computed and never read. The values are the same element for element: an
elementwise op computes each element alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import splat_constant_value
from scalify_hlo.rewrites.emitter import Emitter, attributes_of, defining_op, ops_named
from scalify_hlo.rewrites.mlir_passes import run_mlir_pipeline
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.symbols import entry_function

_ELEMENTWISE = ops_with(Trait.HOISTABLE) | {"stablehlo.reduce_precision",
                                            "stablehlo.is_finite"}
# The longest vector whose lanes are bundled (longer ones are data, not scales).
MAX_LANES = 4096
# The longest bundle an operand that differs per lane is gathered for by default (a
# concatenate of a scalar per lane); longer bundles keep such ops scalar. simplify passes
# its pack width: XLA:CPU runs a wider concatenate as a kernel per operand.
MAX_GATHER = 64
# Attributes that describe the scalar's layout on devices, not the op: not copied.
_SHARDINGS = ("mhlo.sharding", "sdy.sharding")
# A bundle's op is vectorized when at least one lane in this many uses it (it runs on all).
MIN_SHARE = 8


@dataclass
class _Bundle:
    vector: ir.Value  # tensor<n x T>: element j is lane j
    size: int
    lanes: dict[int, ir.Value]  # lane index -> the rank-0 value that reads element j


class _Lanes:
    """The bundles of one block. Ops are known by their result (an op's Python hash changes
    with its operands, which this pass replaces)."""

    def __init__(self, block: ir.Block, max_gather: int) -> None:
        self.block = block
        self.max_gather = max_gather
        self.bundles: list[_Bundle] = []
        self.lane_of: dict[ir.Value, tuple[int, int]] = {}  # value -> (bundle, lane)
        self.vectorized = 0

    def defined_before(self, value: ir.Value, anchor: ir.Operation) -> bool:
        """Whether ``value`` is an argument of the block or made by an op of it before
        ``anchor``."""
        op = defining_op(value)
        if op is None:
            return value.owner == self.block
        return op.block == self.block and op.is_before_in_block(anchor)

    def add(self, vector: ir.Value, size: int, lanes: dict[int, ir.Value]) -> _Bundle:
        bundle = _Bundle(vector, size, lanes)
        index = len(self.bundles)
        self.bundles.append(bundle)
        for lane, value in lanes.items():
            self.lane_of[value] = (index, lane)
        return bundle

    def grow(self, first: _Bundle) -> None:
        work = [first]
        while work:
            bundle = work.pop()
            for key, members in self._groups(bundle):
                grown = self._vectorize(bundle, key, members)
                if grown is not None:
                    work.append(grown)

    def _groups(self, bundle: _Bundle) -> list[tuple[tuple, dict[int, ir.Operation]]]:
        """The users of the bundle's lanes that can be one op, by key and lane."""
        by_key: dict[tuple, dict[int, list[ir.Operation]]] = {}
        key_of: dict[ir.Value, tuple] = {}  # by an op's result
        ambiguous: set[ir.Value] = set()  # ops that read two lanes (x[0] + x[1]): none
        for lane, value in bundle.lanes.items():
            for use in value.uses:
                op = use.owner.operation
                if (op.name not in _ELEMENTWISE or len(op.results) != 1
                        or op.block != self.block):
                    continue
                key = self._key(op, lane, bundle.size)
                if key is None:
                    continue
                result = op.results[0]
                if key_of.setdefault(result, (key, lane)) != (key, lane):
                    ambiguous.add(result)
                    continue
                ops = by_key.setdefault(key, {}).setdefault(lane, [])
                if all(other.results[0] != result for other in ops):  # read twice
                    ops.append(op)
        groups = []
        for key, by_lane in by_key.items():
            for lane in by_lane:
                by_lane[lane] = [op for op in by_lane[lane] if op.results[0] not in ambiguous]
            for round_ in range(max(len(ops) for ops in by_lane.values())):
                members = {lane: ops[round_] for lane, ops in by_lane.items()
                           if len(ops) > round_}
                if len(members) >= 2 and len(members) * MIN_SHARE >= bundle.size:
                    groups.append((key, members))
        return groups

    def _key(self, op: ir.Operation, lane: int, size: int) -> tuple | None:
        result = op.results[0].type
        if not isinstance(result, ir.RankedTensorType) or result.rank != 0:
            return None
        parts = []
        for operand in op.operands:
            found = self.lane_of.get(operand)
            if found is not None and found[1] == lane and self.bundles[found[0]].size == size:
                parts.append(found[0])
            else:
                parts.append(-1)  # the same scalar for every lane, or one per lane
        attributes = tuple(sorted((name, str(value)) for name, value in
                                  attributes_of(op).items()))
        return (op.name, attributes, str(result), tuple(parts))

    def _vectorize(self, bundle: _Bundle, key: tuple,
                   members: dict[int, ir.Operation]) -> _Bundle | None:
        name, _, _, parts = key
        first = next(iter(members.values()))
        anchor = first
        for op in members.values():
            if op.is_before_in_block(anchor):
                anchor = op
        size = bundle.size
        for index, part in enumerate(parts):
            if part >= 0:
                continue
            values = [op.operands[index] for op in members.values()]
            if not all(self.defined_before(value, anchor) for value in values):
                return None  # defined after the first member: not available to the bundle
            if (len(set(values)) > 1 and size > self.max_gather
                    and _constant_lanes(values) is None):
                return None
        emit = Emitter(ir.InsertionPoint(anchor), anchor.location)
        element = first.results[0].type.element_type
        operands = []
        for index, part in enumerate(parts):
            if part >= 0:
                operands.append(self.bundles[part].vector)
                continue
            values = {lane: op.operands[index] for lane, op in members.items()}
            operands.append(_operand_vector(emit, values, size))
        attributes = {attr: value for attr, value in attributes_of(first).items()
                      if attr not in _SHARDINGS}  # a scalar's sharding is no vector's
        vector = emit.op(name, operands, [ir.RankedTensorType.get([size], element)],
                         attributes).result
        lanes = {}
        for lane, op in members.items():
            read = emit.element(vector, lane)  # a bundle has two lanes or more
            op.results[0].replace_all_uses_with(read)
            lanes[lane] = read
        for op in members.values():  # after the reads: they go before the first member
            op.erase()
        self.vectorized += len(members)
        return self.add(vector, size, lanes)



def _operand_vector(emit: Emitter, values: dict[int, ir.Value], size: int) -> ir.Value:
    """The vector an operand that is no lane of a bundle becomes: a broadcast of the scalar
    every lane reads, or the lanes' scalars in order (an unused lane repeats one)."""
    distinct = set(values.values())
    if len(distinct) == 1:
        scalar = distinct.pop()
        return emit.broadcast_scalar(
            scalar, ir.RankedTensorType.get([size], scalar.type.element_type))
    filler = next(iter(values.values()))
    ordered = [values.get(lane, filler) for lane in range(size)]
    constants = _constant_lanes(ordered)
    if constants is not None:
        element = ir.RankedTensorType(filler.type).element_type
        return emit.constant(np.array(constants), ir.RankedTensorType.get([size], element))
    return emit.vector_of(ordered)


def _constant_lanes(values: list[ir.Value]) -> list[float] | None:
    """The values of scalar constants one per lane (a clamp's bounds that differ between
    lanes), when each is a splat constant of a type whose values survive the round trip
    through a Python float (signless integers of 8 to 32 bits, f16, f32, f64): such an
    operand is one constant vector, not a gather, whatever the lane count."""
    element = ir.RankedTensorType(values[0].type).element_type
    if isinstance(element, ir.IntegerType):
        integer = ir.IntegerType(element)
        if not (integer.is_signless and 8 <= integer.width <= 32):
            return None
    elif not isinstance(element, ir.F32Type | ir.F16Type | ir.F64Type):
        return None
    constants = [splat_constant_value(value) for value in values]
    return None if any(value is None for value in constants) else constants


def _slice_of(value: ir.Value) -> tuple[ir.Value, int, int] | None:
    """``(v, start, stop)`` when ``value`` (rank 1) is ``v[start:stop]`` with stride 1,
    looking through the reshapes of one element to rank 0 and back."""
    op = defining_op(value)
    if op is not None and op.name == "stablehlo.reshape":
        inner = defining_op(op.operands[0])
        if (inner is None or inner.name != "stablehlo.reshape"
                or ir.RankedTensorType(op.operands[0].type).rank != 0):
            return None
        op = defining_op(inner.operands[0])
    if op is None or op.name != "stablehlo.slice":
        return None
    source = op.operands[0]
    if ir.RankedTensorType(source.type).rank != 1:
        return None
    attrs = attributes_of(op)
    if list(ir.DenseI64ArrayAttr(attrs["strides"])) != [1]:
        return None
    return (source, ir.DenseI64ArrayAttr(attrs["start_indices"])[0],
            ir.DenseI64ArrayAttr(attrs["limit_indices"])[0])


def _block_ops(block: ir.Block, name: str) -> list[ir.Operation]:
    """The ops of ``block`` named ``name``, in order, from the C++ walk (``ops_named``):
    listing a step's whole block through the bindings costs a Python object per op."""
    return [op for op in ops_named(block.owner, name) if op.block == block]


def _length(vector: ir.Value) -> int:
    return ir.RankedTensorType(vector.type).shape[0]


def merge_adjacent_slices(block: ir.Block) -> int:
    """Concatenates (of rank-1 operands) whose neighbouring operands are adjacent slices of
    one vector read it as one slice, and one that reads a whole vector in order is that
    vector. Returns how many concatenates changed."""
    changed = 0
    for op in _block_ops(block, "stablehlo.concatenate"):
        operands = list(op.operands)
        if ir.RankedTensorType(op.results[0].type).rank != 1:
            continue
        runs: list[list] = []  # [source, start, stop] or [value]
        for operand in operands:
            found = _slice_of(operand)
            if (found is not None and runs and len(runs[-1]) == 3
                    and runs[-1][0] == found[0] and runs[-1][2] == found[1]):
                runs[-1][2] = found[2]
            else:
                runs.append(list(found) if found is not None else [operand])
        if len(runs) == len(operands) and not any(
                len(run) == 3 and (run[1], run[2]) == (0, _length(run[0])) for run in runs):
            continue
        emit = Emitter(ir.InsertionPoint(op), op.location)
        merged = []
        for run in runs:
            if len(run) == 1:
                merged.append(run[0])
                continue
            source, start, stop = run
            if (start, stop) == (0, _length(source)):
                merged.append(source)
                continue
            merged.append(emit.slice(source, start, stop))
        result = merged[0] if len(merged) == 1 else emit.op(
            "stablehlo.concatenate", merged, [op.results[0].type], attributes_of(op)).result
        op.results[0].replace_all_uses_with(result)
        op.erase()
        changed += 1
    return changed


def _seeds(block: ir.Block) -> list[tuple[ir.Value, int, dict[int, ir.Value]]]:
    """Per vector of the block (up to ``MAX_LANES`` elements) read element by element, its
    lanes: the first rank-0 read of each element."""
    found: dict[ir.Value, dict[int, ir.Value]] = {}
    sizes: dict[ir.Value, int] = {}
    for op in _block_ops(block, "stablehlo.reshape"):
        result = op.results[0]
        if ir.RankedTensorType(result.type).rank != 0:
            continue
        read = _slice_of(op.operands[0])
        if read is None or read[2] != read[1] + 1:
            continue
        source = read[0]
        size = ir.RankedTensorType(source.type).shape[0]
        if not 2 <= size <= MAX_LANES:
            continue
        sizes[source] = size
        found.setdefault(source, {}).setdefault(read[1], result)
    return [(source, sizes[source], lanes) for source, lanes in found.items()
            if len(lanes) >= 2]


def vectorize_scalar_chains(module: ir.Module, max_gather: int = MAX_GATHER) -> int:
    """Vectorize the entry block's scalar chains over vector elements; returns how many
    scalar ops became vector ops. ``max_gather``: the longest bundle for which an operand
    that differs per lane is gathered into a vector."""
    block = entry_function(module).regions[0].blocks[0]
    lanes = _Lanes(block, max_gather)
    for vector, size, reads in _seeds(block):
        lanes.grow(lanes.add(vector, size, reads))
    if lanes.vectorized:
        merge_adjacent_slices(block)
        run_mlir_pipeline(module, "canonicalize,cse")
    return lanes.vectorized


@register("vectorize-scalar-chains",
          "Run the same chain of rank-0 ops on each element of a vector (the scale "
          "arithmetic of delayed exponents and statistics groups) once on the vector.")
class VectorizeScalarChains(ModulePass):
    max_gather: int = option(MAX_GATHER, "the longest bundle for which an operand that "
                             "differs per lane is gathered into a vector")

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("vectorize-scalar-chains.ops",
                     vectorize_scalar_chains(module, self.max_gather))
