"""Which values of a manual region (``shard_map``'s body) are the same on every device.

Why: a scale the body computes is agreed over the devices (a max all-reduce of exponents)
before values of several devices meet and where a value leaves the region, because each
device computes it from its own shard. But a scale computed from values every device holds
in full — an argument replicated over the manual axes, a ``psum``'s or an ``all_gather``'s
result — is computed by the same program from the same numbers everywhere, so it is already
equal: a data-parallel step's updated parameters, their moments and the statistics of them
are such values, and agreeing their scales as they leave the region cost a second
exponent all-reduce that waited for the gradients' sum (2-layer GPT ``shard_map`` step, f16
data: 3 all-reduces, one after another, against the original's 1).

A value is invariant when it is an argument known to be (replicated over the manual axes,
or a scale passed in), the result of a sum or gather over every device of each of the
region's groups, or the result of an op with invariant operands that reads nothing
device-dependent (partition or replica ids, random bits, collectives that leave devices
different, custom calls) in its regions either. Anything else, a loop's block argument
included, is taken to differ.
"""

from __future__ import annotations

from collections.abc import Callable

from jax.extend.mlir import ir

from scalify_hlo.rewrites.regions import nested_ops

# Ops whose results may differ per device even from equal operands.
_DEVICE_DEPENDENT = frozenset({
    "stablehlo.partition_id", "stablehlo.replica_id", "stablehlo.rng",
    "stablehlo.rng_bit_generator", "stablehlo.custom_call", "stablehlo.reduce_scatter",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.infeed", "stablehlo.recv"})
# Collectives whose result is the same on every device of the groups they run over.
_GATHERING = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather"})


class DeviceInvariance:
    """``invariance(value)``: whether ``value`` is the same on every device of a region's
    groups. ``known``: the region's arguments that are; ``covers(op)``: whether a gathering
    collective runs over every device of each group. Answers are cached: the body's values
    do not change while the region is rewritten."""

    def __init__(self, known: list[ir.Value], covers: Callable[[ir.Operation], bool]) -> None:
        self._covers = covers
        self._memo: dict[ir.Value, bool] = dict.fromkeys(known, True)

    def __call__(self, value: ir.Value) -> bool:
        memo = self._memo
        stack = [value]
        while stack:
            current = stack[-1]
            if current in memo:
                stack.pop()
                continue
            owner = current.owner
            if isinstance(owner, ir.Block):  # an argument not known to be invariant
                memo[current] = False
                stack.pop()
                continue
            verdict, reads = self._own_verdict(owner.operation)
            if verdict is not None:
                memo[current] = verdict
                stack.pop()
                continue
            pending = [v for v in reads if v not in memo]
            if pending:
                stack += pending
                continue
            memo[current] = all(memo[v] for v in reads)
            stack.pop()
        return memo[value]

    def _own_verdict(self, op: ir.Operation) -> tuple[bool | None, list[ir.Value]]:
        """The verdict that needs no operand (a collective, a device-dependent op), or None
        and the values the verdict depends on (operands, and what its regions read from
        outside them)."""
        if op.name in _GATHERING:
            return self._covers(op), []
        if op.name in _DEVICE_DEPENDENT:
            return False, []
        reads = list(op.operands)
        if not len(op.regions):
            return None, reads
        nested = nested_ops(op)
        if any(inner.name in _DEVICE_DEPENDENT or (
                inner.name in _GATHERING and not self._covers(inner)) for inner in nested):
            return False, []
        inside = {value for inner in nested for value in inner.results}
        inside.update(argument for inner in (op, *nested) for region in inner.regions
                      for block in region.blocks for argument in block.arguments)
        reads += [v for inner in nested for v in inner.operands if v not in inside]
        return None, reads
