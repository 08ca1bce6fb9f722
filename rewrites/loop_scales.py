"""``hoist-loop-scales``: scale arithmetic on loop-invariant values, computed once before the loop.

Inside a ``stablehlo.while`` body, most scale arithmetic (exponent sums, ``2^e`` factors)
depends only on values the loop passes through unchanged: the scales of weights and of the
loop's inputs. XLA's loop-invariant code motion hoists each such scalar out of the loop, where
every one becomes an XLA:CPU kernel of its own (a loop's operands are materialized buffers),
the main source of extra kernels in a rewritten ``lax.scan``. This pass hoists them itself
and hands them to the loop packed, at most ``PACK`` scalars per vector, which XLA computes in
one kernel; the body takes each back with a static slice, which XLA does not hoist on its own
and fuses into the kernels that use it. The vectors pass through an optimization barrier, so
that no simplifier folds the slices back into the scalars.
"""

from __future__ import annotations

from typing import Any

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import (
    Emitter,
    attributes_of,
    ops_named,
    scalar_type,
    terminator,
)
from scalify_hlo.rewrites.loop_invariants import invariant_arguments, invariant_body_ops
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register

# Scalars per packed vector: XLA:CPU fuses a concatenate of up to about 8 scalars into one
# kernel, and runs every operand of a longer one as a kernel of its own.
PACK = 8
# Pure elementwise ops whose scalar instances are hoisted (no side effects, no regions).
_HOISTABLE = ops_with(Trait.HOISTABLE)


def _is_scalar(value: ir.Value) -> bool:
    value_type = value.type
    return isinstance(value_type, ir.RankedTensorType) and not value_type.shape


def _hoisted_or_constant(op: ir.Operation) -> bool:
    """A body constant (invariant; copied out where a hoisted op uses it) or a pure scalar
    op, which is hoisted where its operands are invariant."""
    return op.name == "stablehlo.constant" or (
        op.name in _HOISTABLE and all(_is_scalar(r) for r in op.results))


class _LoopHoist:
    """The hoisting of one while op: which body ops are invariant, and the new loop."""

    def __init__(self, loop: ir.Operation) -> None:
        self.loop = loop
        self.body = loop.regions[1].blocks[0]
        self.terminator = terminator(self.body)
        self.constants: set[ir.Value] = set()

    def invariant_ops(self) -> tuple[list[ir.Operation], dict[ir.Value, ir.Value]]:
        """The scalar ops of the body (top level) whose operands are all loop-invariant, in
        order, and the outer value of every invariant body argument (``self.constants``: the
        body's constants, copied out when a hoisted op uses one)."""
        hoisted: list[ir.Operation] = []
        for op in invariant_body_ops(self.loop, _hoisted_or_constant):
            if op.name == "stablehlo.constant":
                self.constants.update(op.results)
            else:
                hoisted.append(op)
        return hoisted, invariant_arguments(self.loop)

    def run(self) -> int:
        hoisted, outer = self.invariant_ops()
        if not hoisted:
            return 0
        hoisted_set = set(hoisted)
        boundary = [value for op in hoisted for value in op.results
                    if any(use.owner.operation not in hoisted_set for use in value.uses)]
        mapping = self._clone_before_loop(hoisted, outer)
        # Distinct outer values only: XLA:CPU runs a concatenate that takes a value twice
        # as one kernel per operand.
        distinct = list(dict.fromkeys(mapping[v] for v in boundary))
        packs = self._packs(distinct)
        count = len(self.loop.operands)
        new_loop = self._widened_loop([vector for vector, _ in packs])
        slices = self._unpack(packs, distinct,
                              list(new_loop.regions[1].blocks[0].arguments)[count:])
        position = {value: n for n, value in enumerate(distinct)}
        for value in boundary:
            value.replace_all_uses_with(slices[position[mapping[value]]])
        for op in reversed(hoisted):
            op.erase()
        for constant in self.constants:  # those only hoisted ops used
            if not list(constant.uses):
                constant.owner.operation.erase()
        return len(hoisted)

    def _clone_before_loop(self, hoisted: list[ir.Operation],
                           outer: dict[ir.Value, ir.Value]) -> dict[ir.Value, ir.Value]:
        """Hoisted ops (and the body constants they use) re-created before the loop, once
        per distinct computation (two loop arguments may start from the same value); the
        map from body values to their outer copies."""
        mapping: dict[ir.Value, ir.Value] = dict(outer)
        made: dict[tuple[Any, ...], ir.Operation] = {}
        ip = ir.InsertionPoint(self.loop)

        def create(op: ir.Operation, operands: list[ir.Value]) -> ir.Operation:
            attributes = attributes_of(op)
            key = (op.name, tuple(operands), tuple(str(r.type) for r in op.results),
                   tuple((name, str(value)) for name, value in attributes.items()))
            if key not in made:
                made[key] = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                                operands=operands, attributes=attributes,
                                                loc=op.location, ip=ip)
            return made[key]

        for op in hoisted:
            operands = []
            for value in op.operands:
                if value not in mapping and value in self.constants:
                    mapping[value] = create(value.owner.operation, []).results[0]
                operands.append(mapping.get(value, value))
            mapping.update(zip(op.results, create(op, operands).results, strict=True))
        return mapping

    def _packs(self, values: list[ir.Value]) -> list[tuple[ir.Value, list[int]]]:
        """``values`` (outer scalars) as vectors of at most ``PACK``, one group of vectors
        per element type; per vector, the positions in ``values`` of its elements.

        Each value travels in its own type. Integers carried as f32 bits (one vector for
        exponents and factors) can come back wrong: a small integer's bits are an f32
        subnormal, which XLA may flush to zero (it did in jnp.searchsorted's binary search)."""
        groups: dict[Any, list[int]] = {}
        for position, value in enumerate(values):
            groups.setdefault(str(value.type.element_type), []).append(position)
        emit = Emitter(ir.InsertionPoint(self.loop), self.loop.location)
        packs = []
        for positions in groups.values():
            for start in range(0, len(positions), PACK):
                chunk = positions[start:start + PACK]
                packs.append((emit.vector_of([values[p] for p in chunk]), chunk))
        # Behind a barrier: XLA's while canonicalization turns invariant operands into
        # captures and would then fold each slice of a concatenate back to its scalar.
        vectors = emit.op("stablehlo.optimization_barrier", [v for v, _ in packs],
                          [v.type for v, _ in packs]).results
        return [(vector, chunk) for vector, (_, chunk) in zip(vectors, packs, strict=True)]

    def _widened_loop(self, vectors: list[ir.Value]) -> ir.Operation:
        """The loop with ``vectors`` as extra operands that the body returns as they came;
        the old loop's regions move into it and its results are replaced."""
        loop = self.loop
        count = len(loop.operands)
        types = [v.type for v in vectors]
        new = ir.Operation.create(
            "stablehlo.while", results=[r.type for r in loop.results] + types,
            operands=list(loop.operands) + vectors, attributes=attributes_of(loop),
            regions=2, loc=loop.location, ip=ir.InsertionPoint(loop))
        for old_region, new_region in zip(loop.regions, new.regions, strict=True):
            block = old_region.blocks[0]
            for vector_type in types:
                block.add_argument(vector_type, loop.location)
            block.append_to(new_region)
        terminator = self.terminator
        ip = ir.InsertionPoint(terminator)
        carried = list(new.regions[1].blocks[0].arguments)[count:]
        # Returned through a barrier, so that XLA sees the vectors as loop-carried: its
        # algebraic simplifier merges a slice with constant factors of the body (a mean's
        # 1/n), and its loop-invariant code motion would hoist each such product out of
        # the loop as a kernel of its own.
        carried = list(Emitter(ip, loop.location).op("stablehlo.optimization_barrier",
                                                      carried, types).results)
        Emitter(ip, terminator.location).op("stablehlo.return",
                                            list(terminator.operands) + carried, [])
        terminator.erase()
        for old, value in zip(loop.results, new.results, strict=False):
            old.replace_all_uses_with(value)
        loop.erase()
        return new

    @staticmethod
    def _unpack(packs: list[tuple[ir.Value, list[int]]], distinct: list[ir.Value],
                arguments: list[ir.Value]) -> list[ir.Value]:
        """The packed values (``distinct``, outside the loop) taken back at the start of the
        body, each by a static slice of its vector (the body argument in ``arguments`` that
        carries it)."""
        emit = Emitter(ir.InsertionPoint.at_block_begin(arguments[0].owner),
                       arguments[0].owner.owner.location)  # the loop's
        taken: list[ir.Value] = list(distinct)
        for argument, (_, positions) in zip(arguments, packs, strict=True):
            element = argument.type.element_type
            for index, position in enumerate(positions):
                taken[position] = emit.unary("stablehlo.reshape",
                                             emit.slice(argument, index, index + 1),
                                             scalar_type(element))
        return taken


def hoist_loop_scales(module: ir.Module) -> int:
    """Hoist the invariant scalar arithmetic of every while body; returns the ops hoisted.
    Inner loops first (``ops_named`` walks in post-order), so that what leaves an inner loop
    can leave the outer one too."""
    return sum(_LoopHoist(loop).run() for loop in ops_named(module.operation,
                                                             "stablehlo.while"))


@register("hoist-loop-scales",
          "Compute the scalar arithmetic of while bodies on loop-invariant values once before the "
          "loop, packed into few vectors (part of simplify).")
class HoistLoopScales(ModulePass):
    """A scan's body recomputes its invariant scales on every trip unless they are hoisted."""

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("hoist-loop-scales.hoisted", hoist_loop_scales(module))
