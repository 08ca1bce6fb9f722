"""The ``rescale`` pass: choose where scales are recomputed from the data at run time.

Static propagation keeps data near unit scale on average; dynamic rescaling resets it where
the policy asks: at dot outputs; at the backward pass's dot outputs (``backward-dots``: the
gradients of activations and weights, where unit scaling's estimate drifts most, by more
than f16's exponent range over a few layers); at gradients (the backward pass's dot and
reduce outputs); at the step's outputs (weights and optimizer state); or at the outputs
whose scale can drift from one call to the next (``drifting-outputs``: moving averages such
as momentum, Adam's moments and BatchNorm's running statistics; see ``Scope.can_drift``).
This pass runs before ``scalify`` and marks those ops with ``scalify.rescale =
"<amax|rms>:<nearest|up>"``; ``scalify`` then measures the data (amax or RMS), rounds it to
a power of two and moves that factor from data to scale.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.errors import PipelineError
from scalify_hlo.name_stack import is_backward
from scalify_hlo.rewrites.emitter import ops_named
from scalify_hlo.rewrites.op_table import Family, ops_in_family
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.rewrites.scope import RESCALE_ATTR, RESCALE_DRIFTING_ATTR
from scalify_hlo.symbols import entry_function

# The pass's option choices (Policy.rescale_at, rescale_method, scale_rounding).
RESCALE_POINTS = ("dot-outputs", "backward-dots", "gradients", "outputs", "drifting-outputs")
RESCALE_METHODS = ("amax", "rms")
SCALE_ROUNDINGS = ("nearest", "up")

_DOTS = ops_in_family(Family.DOT)
# The ops each point marks inside the function (the output points mark its return): their
# names, and whether only those of the backward pass (JAX's ``transpose(jvp(...))``).
_OP_POINTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "dot-outputs": (_DOTS, False),
    "backward-dots": (_DOTS, True),
    "gradients": (_DOTS + ("stablehlo.reduce",), True),
}


def mark_rescale_points(module: ir.Module, points: set[str], method: str,
                        rounding: str = "nearest") -> int:
    marked: dict[ir.Operation, None] = {}  # each op once, in walk order
    for point in sorted(points & set(_OP_POINTS)):
        names, backward_only = _OP_POINTS[point]
        for op in ops_named(module.operation, *names):
            if not backward_only or is_backward(op.location):
                marked[op] = None
    how = ir.StringAttr.get(f"{method}:{rounding}")
    for op in marked:
        op.attributes[RESCALE_ATTR] = how
    count = len(marked)
    if points & {"outputs", "drifting-outputs"}:
        entry = entry_function(module)
        terminator = entry.regions[0].blocks[0].operations[-1].operation
        every = "outputs" in points
        terminator.attributes[RESCALE_ATTR if every else RESCALE_DRIFTING_ATTR] = how
        count += 1
    return count


@register("rescale",
          "Mark where scalify recomputes scales from the data at run time (amax or RMS, rounded "
          "to a power of two); run it before scalify.")
class Rescale(ModulePass):
    at: tuple[str, ...] = option(("dot-outputs",), "comma-separated points: "
                                 + ", ".join(RESCALE_POINTS))
    method: str = option("amax", "statistic the new scale comes from", RESCALE_METHODS)
    rounding: str = option("nearest", "power of two the statistic is rounded to: nearest, or "
                           "up (data amax stays <= 1)", SCALE_ROUNDINGS)

    def validate(self) -> None:
        unknown = sorted(set(self.at) - set(RESCALE_POINTS))
        if unknown:
            raise PipelineError(f"unknown rescale point '{unknown[0]}' for pass 'rescale' "
                                f"(points: {', '.join(RESCALE_POINTS)})")

    def apply(self, module: ir.Module, context: PassContext) -> None:
        count = mark_rescale_points(module, set(self.at), self.method, self.rounding)
        context.bump("rescale.points", count)
