"""Which values of the original program hold squares, and so need a wide data type.

With f16 data a tensor lives in f16's range around its one scale: about 2^-24..2^15 times
the scale. Squaring doubles every exponent, so the square of a tensor whose entries span more
than 12 binades cannot be held: its small entries flush to zero. Adam's second moment is the
case that matters: where ``nu`` flushes and ``mu`` does not, ``mu / (sqrt(nu) + eps)`` is
``mu / eps``, an update thousands of times too large (an MLP on MNIST diverges in a few
steps). The values that need the wide type are the squares (``multiply(x, x)``), their sums
(a reduce that adds), and everything they are added to, selected with, reshaped into or
carried through a loop with, up to the next op that combines them with other tensors (a
reduction other than a sum, a product or quotient of two tensors):
Adam's ``nu`` state, its bias correction and ``sqrt(nu_hat) + eps``, but not the update
``mu / (sqrt(nu_hat) + eps)``, which the op computes in the wide type and hands on in f16.

This is a union-find over the values of the original function: ops that keep the range of
their operands (add, select, reshape, a product with a broadcast scalar, ...) join their
results and operands into one class, and a class that holds a square is wide.

The operand of an op that is infinite at 0 (a divisor, ``log``, ``rsqrt``) kept from zero
by a constant (``y + eps``, ``max(y, eps)``) seeds a class too: the constant sits at the
scale of what it guards, where f16 holds 1e-9 beside unit values as 0, and
``x / (0 + eps)`` became ``x / 0``, ``log(0 + eps)`` ``log(0)``.

The same classes hold a second kind of wide value: floats made from integer bits
(``bitcast_convert``), which is how ``jax.random`` turns random bits into uniforms in [1, 2)
with f32's 24-bit significand, then shifts them to the sampler's interval and hands them to
``erf_inv`` (normal) or ``log`` (exponential, gumbel). Rounded to f16's or bf16's
significand, the largest uniforms become exactly 1 (and -0.99999994 becomes -1): erf_inv of
them is +-inf, one sample in a thousand (bf16) or ten thousand (f16). Their class computes
in f32, up to the nonlinear op, as the original does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.rewrites.constant_values import constant_splat
from scalify_hlo.rewrites.emitter import Types, defining_op, is_ranked_tensor, ops_named, terminator
from scalify_hlo.rewrites.op_table import Trait, ops_with, wide_operands
from scalify_hlo.rewrites.regions import is_additive

# Ops whose float results join the class of every float operand (the op table's
# JOINS_WIDE_CLASS ops that list no operands), and those that join only some (by index).
_JOINING = ops_with(Trait.JOINS_WIDE_CLASS)
_JOINS_ALL = frozenset(name for name in _JOINING if not wide_operands(name))
_JOINS_SOME = {name: wide_operands(name) for name in _JOINING if wide_operands(name)}


class _UnionFind:
    """Classes of float values, over integer ids: ``find`` runs tens of thousands of times
    on a large step, and comparing ints is far cheaper than comparing ``ir.Value`` handles.
    Non-float values get no id (they never join a class)."""

    def __init__(self) -> None:
        self.ids: dict[ir.Value, int] = {}  # -1: not a float
        self.values: list[ir.Value] = []
        self.parent: list[int] = []
        self.types = Types()  # is_scalable per type, remembered

    def id_of(self, value: ir.Value) -> int:
        found = self.ids.get(value)
        if found is None:
            found = -1
            if self.types.is_scalable(value.type):
                found = len(self.parent)
                self.parent.append(found)
                self.values.append(value)
            self.ids[value] = found
        return found

    def find(self, node: int) -> int:
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _one_element(t: ir.Type) -> bool:
    """A tensor type of one element (rank 0, or every dimension 1)."""
    if not is_ranked_tensor(t):
        return False
    ranked = t if type(t) is ir.RankedTensorType else ir.RankedTensorType(t)
    return ranked.has_static_shape and all(d == 1 for d in ranked.shape)


def scalar_like(value: ir.Value) -> bool:
    """A one-element value, a splat constant, or a broadcast of a one-element value
    (``jax.random.uniform`` broadcasts its bounds as tensor<1xf32>)."""
    if _one_element(value.type):
        return True
    op = defining_op(value)
    if op is None:
        return False
    if op.name == "stablehlo.broadcast_in_dim":
        return _one_element(op.operands[0].type)
    if op.name == "stablehlo.constant":
        return constant_splat(op) is not None
    return False


# Ops that are infinite at a point (0; log1p's -1), by the operand a constant guard keeps
# from it (``x / (y + eps)``, ``log(p + 1e-9)`` of a probability that is 0: -inf in f16).
_SINGULAR = {"stablehlo.divide": 1, "stablehlo.log": 0, "stablehlo.rsqrt": 0,
              "stablehlo.power": 0, "stablehlo.log_plus_one": 0, "chlo.lgamma": 0,
              "chlo.digamma": 0}
# Ops that keep a value from that point with a constant (``y + eps``, ``max(y, eps)``,
# ``where(y == 0, eps, y)``, ``clip(y, eps)``), and what a guarded value may pass through to
# the op: layout, ops that keep 0 at 0, products with a constant (``2 * (y + eps)``).
_GUARDS = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.maximum",
                     "stablehlo.minimum", "stablehlo.select", "stablehlo.clamp"})
_LAYOUT = ops_with(Trait.LAYOUT_ONLY)
_KEEPS_ZERO = _LAYOUT | {"stablehlo.sqrt", "stablehlo.abs", "stablehlo.negate"}
_PRODUCTS = frozenset({"stablehlo.multiply", "stablehlo.divide"})  # by a constant


def _guarded(operand: ir.Value) -> bool:
    """Whether the operand of an op that is infinite at a point (``_SINGULAR``) is kept
    from it by a nonzero constant. Its class is wide like a square's: in f16 data the
    constant sits at the scale of what it guards, 1e-9 beside unit values is 0, and
    ``x / (y + eps)`` was NaN or inf where ``y`` is 0 (a masked mean
    ``sum(l * m) / (sum(m) + 1e-9)`` over an all-padding row, ``x / max(|x|, 1e-12)``),
    ``log(p + 1e-9)`` -inf where ``p`` is 0."""
    op = defining_op(operand)
    while op is not None and op.name not in _GUARDS:  # to the guard, through what keeps 0
        if op.name in _KEEPS_ZERO:
            op = defining_op(op.operands[0])
        elif op.name in _PRODUCTS and _nonzero_constant(op.operands[1]):
            op = defining_op(op.operands[0])
        elif op.name == "stablehlo.multiply" and _nonzero_constant(op.operands[0]):
            op = defining_op(op.operands[1])
        else:
            return False
    return op is not None and any(_nonzero_constant(value) for value in op.operands)


def _nonzero_constant(value: ir.Value) -> bool:
    """A finite nonzero splat constant, seen through layout ops (a ``jnp.where`` of a
    Python float converts and broadcasts its constant)."""
    op = defining_op(value)
    while op is not None and op.name in _LAYOUT:
        op = defining_op(op.operands[0])
    if op is None or op.name != "stablehlo.constant":
        return False
    constant = constant_splat(op)
    return constant is not None and constant != 0 and math.isfinite(constant)


# How many scalar products ``_unscaled`` looks through (``(1 - b2) * g * g`` needs one).
SCALAR_FACTORS = 8
# Unary ops that keep a tensor's relative range.
_KEEPS_RELATIVE_RANGE = frozenset({"stablehlo.negate", "stablehlo.convert"})


def _unscaled(value: ir.Value) -> ir.Value:
    """``value`` with its scalar factors taken off (``c * x``, ``x / c``, ``-x``, a float
    convert; ``c`` a scalar, constant or not): a product of two values with the same
    unscaled value is a square up to a factor, and has a square's range. Prodigy writes its
    second moment as ``(1 - b2) * d * d``, a product of ``(1 - b2) * d`` and ``d``: seen as
    two tensors, its entries 2^-27 below its largest flushed in f16 data, and the update
    divided by ``d * eps`` alone there (35 times too large)."""
    for _ in range(SCALAR_FACTORS):
        op = defining_op(value)
        if op is None:
            return value
        name = op.name
        if name in _KEEPS_RELATIVE_RANGE:
            if not is_ranked_tensor(op.operands[0].type) or not isinstance(
                    ir.RankedTensorType(op.operands[0].type).element_type, ir.FloatType):
                return value
            value = op.operands[0]
        elif name == "stablehlo.multiply" and scalar_like(op.operands[0]):
            value = op.operands[1]
        elif name in _PRODUCTS and scalar_like(op.operands[1]):
            value = op.operands[0]
        else:
            return value
    return value


_VISITED = ("stablehlo.multiply", *_SINGULAR, *_JOINS_ALL, *_JOINS_SOME,
            "stablehlo.optimization_barrier", "stablehlo.while", "stablehlo.case",
            "stablehlo.if", "stablehlo.bitcast_convert", "stablehlo.reduce", "chlo.square")


@dataclass(frozen=True)
class SquareDtypeValues:
    """The float values in a class with a square (wide for range) and those in a class with
    floats made from integer bits (wide for precision: always f32)."""

    squares: set[ir.Value]
    bits: set[ir.Value]


def square_values(func: ir.Operation) -> set[ir.Value]:
    """The float values of ``func`` (its body and nested regions) in a class with a square."""
    return square_dtype_values(func).squares


def _is_bits_to_float(op: ir.Operation, types: Types) -> bool:
    """A ``bitcast_convert`` from integers to floats: full-significand values from bits."""
    operand_type = ir.RankedTensorType(op.operands[0].type).element_type
    return isinstance(operand_type, ir.IntegerType) and types.is_scalable(op.results[0].type)


def square_dtype_values(func: ir.Operation) -> SquareDtypeValues:
    """The classes of ``func``'s float values (its body and nested regions) that hold a
    square, and those that hold floats made from integer bits.

    Only the ops that square or join values are visited (found by ``ops_named``, which
    leaves the rest of the walk in C++), and only values they touch are looked at: a value
    that no op joins is in a wide class only if it is a seed itself. The classes do not
    depend on the order of the unions, so neither does the result.
    """
    sets = _UnionFind()
    seeds: list[ir.Value] = []
    bit_seeds: list[ir.Value] = []

    def join(a: ir.Value, b: ir.Value) -> None:
        ia = sets.id_of(a)
        if ia >= 0:
            ib = sets.id_of(b)
            if ib >= 0:
                sets.union(ia, ib)

    for op in ops_named(func, *_VISITED):
        name = op.name
        operands, results = list(op.operands), list(op.results)
        singular = _SINGULAR.get(name)
        if singular is not None and _guarded(operands[singular]):
            seeds.append(operands[singular])
            if (name == "stablehlo.divide" and scalar_like(operands[0])
                    and not scalar_like(operands[1])):
                # A reciprocal of a guarded tensor spans the guard's range too (1 / (c + 1e-9)
                # is 1e9 where c is 0, 0.125 where c is 8): in f16 at its RMS the small
                # entries were 0, and the gradient of sum(s * c / (c + eps)) was 0. (A
                # tensor over it, Adam's m / (sqrt(v) + eps), keeps a narrow range.)
                join(results[0], operands[1])
        if name == "stablehlo.multiply" and len(operands) == 2:
            if _unscaled(operands[0]) == _unscaled(operands[1]):
                seeds.append(results[0])
            else:
                for mine, other in ((operands[0], operands[1]), (operands[1], operands[0])):
                    if scalar_like(other):
                        join(results[0], mine)
        elif name == "chlo.square":  # lax.square (Flax's BatchNorm and LayerNorm)
            seeds.append(results[0])
        elif name == "stablehlo.divide" and scalar_like(operands[1]):
            join(results[0], operands[0])
        elif name in _JOINS_ALL:
            for operand in operands:
                for result in results:
                    join(result, operand)
        elif name in _JOINS_SOME:
            for index in _JOINS_SOME[name]:
                join(results[0], operands[index])
        elif name == "stablehlo.optimization_barrier":
            for operand, result in zip(operands, results, strict=True):
                join(operand, result)
        elif name == "stablehlo.while":
            for index, (operand, result) in enumerate(zip(operands, results, strict=True)):
                join(operand, result)
                for region in op.regions:
                    block = region.blocks[0]
                    join(operand, block.arguments[index])
                body_return = terminator(op.regions[1].blocks[0])
                join(result, body_return.operands[index])
        elif name in ("stablehlo.case", "stablehlo.if"):
            for region in op.regions:
                returned = terminator(region.blocks[0])
                for result, value in zip(results, returned.operands, strict=True):
                    join(result, value)
        elif name == "stablehlo.bitcast_convert" and _is_bits_to_float(op, sets.types):
            bit_seeds.append(results[0])
        elif name == "stablehlo.reduce" and is_additive(op.regions[0]):
            # A sum of squares has their range (BatchNorm's and LayerNorm's mean of x * x,
            # a global norm): var + eps of a batch whose variance is 0 keeps eps in f32,
            # where f16 flushes it next to var's scale and rsqrt(0) is inf.
            for operand, result in zip(operands[:len(results)], results, strict=True):
                join(result, operand)
    return SquareDtypeValues(_classes_of(sets, seeds), _classes_of(sets, bit_seeds))


def _classes_of(sets: _UnionFind, seeds: list[ir.Value]) -> set[ir.Value]:
    """Every value in a class with one of ``seeds``."""
    roots = {sets.find(i) for i in (sets.id_of(seed) for seed in seeds) if i >= 0}
    if not roots:
        return set()
    return {value for i, value in enumerate(sets.values) if sets.find(i) in roots}
