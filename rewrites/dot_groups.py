"""Dots that iterate a linear map, rescaled from their amax (f16 data).

Static scale propagation estimates a dot's result scale from its operands' (unit scaling).
The estimate is off by some factor for any given data, and where dots feed dots through
nothing that measures the data the factors multiply. Muon's Newton-Schulz iteration
(``x = a x + (b A + c A A) x`` with ``A = x x^T``; JAX unrolls its five steps into 15 dots)
left f16's range within three steps and its orthogonalized update came back 0.

Rescaling only the dot that ends a long chain is not enough: the iteration amplifies the
rounding of every dot left at a drifting scale, and which ones a depth rule picks decides the
result (the Gram matrix ``x x^T`` never reaches a depth of 2, 3 or 5 counted from the last
rescale, and five steps came back 11 to 26 times off). So the forward dots form groups, two
dots in one group where one reads the other's result through linear ops (dots, sums,
products with constants or with each other, layout ops; a product with a factor computed
from the data, a layer norm's rsqrt, bounds it), and every dot of a group deeper than
``DEPTH`` dots is rescaled, as ``rescale{at=dot-outputs}`` would. A transformer's longest
chain is three (``v``, ``softmax @ v``, the output projection) and its residual stream
joins groups without deepening them, so its steps are left as they are; the backward pass
is the ``gradients`` rescale point's (its dots do not join groups). A dot in a loop body on
a linear path from a carried value the body changes to a carried result (a loop the trace
keeps) is applied once per trip, so it is rescaled too.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.name_stack import is_backward
from scalify_hlo.rewrites.emitter import ops_named, terminator
from scalify_hlo.rewrites.op_table import CONTROL_FLOW_OPS, Family, ops_in_family
from scalify_hlo.rewrites.program_constants import program_constant
from scalify_hlo.rewrites.scope import RESCALE_ATTR

_DOTS = frozenset(ops_in_family(Family.DOT))
# Ops whose result is linear in each operand: a scale estimate's error passes through them.
_LINEAR = _DOTS | {
    "stablehlo.add", "stablehlo.subtract", "stablehlo.negate", "stablehlo.multiply",
    "stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.reshape",
    "stablehlo.transpose", "stablehlo.slice", "stablehlo.concatenate", "stablehlo.pad",
    "stablehlo.select"}
# Dots in a row (through linear ops) whose static estimates are trusted: a transformer's three.
DEPTH = 3


class _Groups:
    """Union-find over forward dots, each value's group and chain depth."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.depth: dict[int, int] = {}  # a root's deepest chain
        self.dots: dict[int, list[ir.Operation]] = {}  # a root's dots
        self.of_value: dict[ir.Value, tuple[int, int]] = {}  # value -> (group, chain depth)

    def root(self, group: int) -> int:
        while self.parent[group] != group:
            self.parent[group] = self.parent[self.parent[group]]
            group = self.parent[group]
        return group

    def join(self, groups: list[int]) -> int:
        roots = sorted({self.root(g) for g in groups})
        if not roots:
            new = len(self.parent)
            self.parent[new], self.depth[new], self.dots[new] = new, 0, []
            return new
        first = roots[0]
        for other in roots[1:]:
            self.parent[other] = first
            self.depth[first] = max(self.depth[first], self.depth.pop(other))
            self.dots[first] += self.dots.pop(other)
        return first

    def visit(self, block: ir.Block) -> None:
        for op in block.operations:
            op = op.operation
            if op.name in CONTROL_FLOW_OPS:
                for region in op.regions:
                    for inner in region.blocks:
                        self.visit(inner)
            if op.name not in _LINEAR or RESCALE_ATTR in op.attributes or (
                    op.name in _DOTS and is_backward(op.location)):
                continue  # measured, bounded, rescaled or backward: no group goes through
            found = [self.of_value[v] for v in op.operands if v in self.of_value]
            if op.name == "stablehlo.multiply" and any(
                    v not in self.of_value and program_constant(v) is None for v in op.operands):
                continue  # times a factor from the data (a norm's rsqrt, a gate): bounded
            is_dot = op.name in _DOTS
            if not found and not is_dot:
                continue
            group = self.join([g for g, _ in found])
            depth = max((d for _, d in found), default=0) + is_dot
            if is_dot:
                self.dots[group].append(op)
                self.depth[group] = max(self.depth[group], depth)
            for value in op.results:
                self.of_value[value] = (group, depth)

    def deep_dots(self) -> list[ir.Operation]:
        return [dot for root, dots in self.dots.items() if self.depth[root] > DEPTH
                for dot in dots]


def _loop_dots(loop: ir.Operation) -> list[ir.Operation]:
    """The forward dots of ``loop``'s body on a linear path from a block argument the body
    changes to a returned value."""
    body = loop.regions[1].blocks[0]
    returned = list(terminator(body).operands)
    changing = {arg for arg, out in zip(body.arguments, returned, strict=True) if out != arg}
    ops = [op.operation for op in body.operations][:-1]
    reached: set[ir.Value] = set(changing)
    for op in ops:
        if op.name in _LINEAR and any(value in reached for value in op.operands):
            reached.update(op.results)
    feeds: set[ir.Value] = set(returned)
    for op in reversed(ops):
        if op.name in _LINEAR and any(value in feeds for value in op.results):
            feeds.update(op.operands)
    return [op for op in ops if op.name in _DOTS and op.results[0] in reached
            and op.results[0] in feeds and not is_backward(op.location)]


def mark_iterated_dots(func: ir.Operation) -> int:
    """Mark the forward dots of ``func`` that iterate a linear map (see the module docstring)
    to rescale their results (amax, nearest); returns how many were marked."""
    groups = _Groups()
    groups.visit(func.regions[0].blocks[0])
    dots = dict.fromkeys(groups.deep_dots())
    for loop in ops_named(func, "stablehlo.while"):
        dots.update(dict.fromkeys(_loop_dots(loop)))
    how = ir.StringAttr.get("amax:nearest")
    for dot in dots:
        dot.attributes[RESCALE_ATTR] = how
    return len(dots)
