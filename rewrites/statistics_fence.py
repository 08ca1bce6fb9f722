"""Delayed statistics fenced: the arithmetic that turns this call's statistics into the
exponents it hands on runs after all of them are taken, from one barrier.

Why: with delayed statistics no data waits for a statistic (``delayed_statistics.py``), so
every statistic's all-reduce of a sharded step is independent and XLA could combine them.
But XLA:GPU fuses the scalar arithmetic after one statistic (its rounding to an exponent,
the zero case) with the exponent arithmetic of the data (siblings reading the same given
exponents), and the data after that fusion, whose statistics feed the next all-reduce, then
waits for the first: on an 8-H100 FSDP step five all-reduces in a row. So the statistics go
into one ``stablehlo.optimization_barrier`` at the end of the block, with everything they
feed moved below it: a fusion that joined that arithmetic to an exponent some statistic
depends on would be a cycle, which XLA never makes. They go in packed, one vector per
element type, and come out as slices of it: the slices of one vector are siblings that
XLA:GPU fuses into a few kernels, where scalars each out of the barrier took a kernel each
(8-H100 GPT steps: about 100 fewer kernels than without a barrier). Where a module packs
no scales (``simplify{pack-scales=none}``, the TPU targets) the scalars go through the
barrier as they are: XLA:TPU copies the elements of a vector out into scalar buffers in
kernels of their own, a dozen slices each (tpu7x, GPT-2-small, target policy: 2044 -> 2022
fusions, 13.45M -> 13.25M estimated cycles; 2 layers: 389 -> 387). Without the barrier it
was 2045 fusions and 13.54M. For the same reason a vector of statistics (``slice-statistics``'
pieces of one tensor) goes through whole, and its elements are read below the barrier
(2 layers: 387 -> 385 fusions, 757,345 -> 752,457 cycles; GPT-2-small: 2022 -> 2020). The
price is XLA:TPU's compile: GPT-2-small 31.0 -> 35.3 s on this machine (docs/how-it-works.md).

Which statistics: the full reductions (``stablehlo.reduce`` to a scalar; unpacked, also to a
vector of ``slice-statistics``' pieces) that the function's last result, the exponent
vector, reads through scalar arithmetic of the entry block. One is fenced only if what it
feeds feeds nothing but that result: in ``measure`` mode (and in ``use`` mode, a point
inside a loop) the data applies what is measured, and the statistic stays where it is.
The values stay the same; only the order XLA may run them in changes.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.delayed_statistics import delayed_count_of
from scalify_hlo.rewrites.emitter import Emitter
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.symbols import entry_function


def _is_statistic(op: ir.Operation, vectors: bool = False) -> bool:
    """A reduction of a tensor to a scalar or (``vectors``) to a vector of them, one per
    slice of the tensor (``slice-statistics``)."""
    if op.name != "stablehlo.reduce" or len(op.results) != 1:
        return False
    result, source = op.results[0].type, op.operands[0].type
    return (isinstance(result, ir.RankedTensorType) and result.rank <= int(vectors)
            and isinstance(source, ir.RankedTensorType) and source.rank > result.rank)


def _exponent_slice(block: ir.Block, measured: ir.Value) -> set[ir.Operation]:
    """The ops of ``block`` that ``measured`` reads, not looking past a statistic into the
    data it reduces."""
    found: set[ir.Operation] = set()
    stack = [measured]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation
        if op in found or op.block != block:
            continue
        found.add(op)
        if not _is_statistic(op):
            stack.extend(op.operands)
    return found


def _feeds(op: ir.Operation, within: set[ir.Operation]) -> set[ir.Operation] | None:
    """The ops that ``op``'s results reach, all of them in ``within``; None where one is
    not (a value some data or another result also reads)."""
    reached: set[ir.Operation] = set()
    stack = [op]
    while stack:
        current = stack.pop()
        for result in current.results:
            for use in result.uses:
                user = use.owner.operation
                if user not in within:
                    return None
                if user not in reached:
                    reached.add(user)
                    stack.append(user)
    return reached


def fence_delayed_statistics(module: ir.Module, packed: bool = True) -> int:
    """Fence the statistics of the entry function's delayed exponents (see the module
    docstring), packed in one vector per element type or (``packed=False``) each an operand
    of the barrier as it is, a scalar or a vector of ``slice-statistics``' pieces; returns
    how many reductions were fenced."""
    func = entry_function(module)
    if not delayed_count_of(func):
        return 0
    block = func.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1].operation
    measured = ret.operands[len(ret.operands) - 1]
    exponent_ops = _exponent_slice(block, measured)
    whole_vectors = not packed  # a vector of statistics goes through the barrier whole
    within = {op for op in exponent_ops if not _is_statistic(op, whole_vectors)} | {ret}
    statistics: list[ir.Operation] = []
    moved: set[ir.Operation] = set()
    for op in block.operations:  # block order, so that the barrier's operands are too
        op = op.operation
        if op in exponent_ops and _is_statistic(op, whole_vectors):
            reached = _feeds(op, within)
            if reached is not None:
                statistics.append(op)
                moved |= reached - {ret}
    if not statistics:
        return 0
    emit = Emitter(ir.InsertionPoint(ret), ret.location)
    by_type: dict[ir.Type, list[ir.Value]] = {}
    for op in statistics:
        by_type.setdefault(op.results[0].type, []).append(op.results[0])
    groups = list(by_type.values())
    below: dict[ir.Value, ir.Value] = {}
    if packed:
        packs = [emit.vector_of(group) for group in groups]
        barrier = emit.op("stablehlo.optimization_barrier", packs, [v.type for v in packs])
        for group, vector in zip(groups, barrier.results, strict=True):
            below.update((value, emit.element(vector, index)) for index, value in enumerate(group))
    else:
        values = [value for group in groups for value in group]
        barrier = emit.op("stablehlo.optimization_barrier", values, [v.type for v in values])
        below.update(zip(values, barrier.results, strict=True))
    for op in [op.operation for op in block.operations if op.operation in moved]:
        op.move_before(ret)
        for index, operand in enumerate(op.operands):
            if operand in below:
                op.operands[index] = below[operand]
    return len(statistics)


@register("fence-statistics",
          "Take a delayed step's statistics together: one optimization_barrier over the "
          "statistics that only the handed-on exponents read, with their arithmetic below "
          "it, so that XLA:GPU's fusions cannot chain their all-reduces (part of simplify).")
class FenceStatistics(ModulePass):
    packed: bool = option(True, "the statistics go through the barrier packed in one vector "
                          "per element type (false: each as it is, a scalar or a vector of "
                          "slice-statistics' pieces, what a module that packs no scales "
                          "gets: XLA:TPU copies each element of a vector out)")

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("fence-statistics.fenced", fence_delayed_statistics(module, self.packed))
