"""``materialize-scales``: a block's scalar scale arithmetic, computed once per scale epoch.

XLA:CPU's fusion passes copy a cheap scalar producer into every fusion that consumes it: a
chain of i32 exponent ops (an exponent read, a sum, a clamp, ``2^e`` from bits) feeding N
tensor kernels is compiled N times (a rescaled f16 GPT step: 20k of its 49k optimized HLO
instructions are such copies inside tensor fusions), and an ``optimization_barrier`` on the
scalar does not stop it (XLA expands it before fusion). What stops it is a buffer that
several values share: the slice of a vector that one kernel wrote is read, not recomputed
(what ``hoist-loop-scales`` does for loops and the bank of scales for the step's boundary).

This pass does that for the body of a function. Every scalar op on scalars (the exponent
arithmetic, ``2^e`` factors, predicates, the original's own scalar math) moves up to just
after the last non-scalar op its value depends on: the *root* of its chain (a reduction
that measures a statistic, a loop, an argument). The chains that share a root form one
*scale epoch*; the epoch's values that non-scalar ops use go into i32 vectors of at most
``pack-width`` (f32 as bits, predicates as 0/1) behind an ``optimization_barrier`` and come
back by static slices, which fuse into their consumers as a read of one element. A vector
has at least two elements: XLA folds the slice of a one-element vector back into its chain.
One element read from a vector argument (a slice and a reshape: a delayed step's exponents)
is a chain op of the argument epoch, not a root (in a module on one device:
``materialize_block``).

``simplify`` runs it for the argument epoch alone (``epochs=arguments``): the scales a step
computes from its arguments (its inputs' exponents, Adam's bias corrections), which XLA:GPU
otherwise computes in a rank-0 kernel per value that several tensor kernels read (f32 mode,
1-layer GPT on an H100 target: 84 -> 57 fusions against the original's 55; XLA:CPU 182 ->
188, its instructions 5589 -> 4552), and a delayed step's exponents with them (H100 target
policy, GPT-2-small: 1116 -> 933 fusions, the FP8 floor 737). There a value that scales an
FP8 GEMM keeps its scalar for that user (``_wants_a_buffer``). Every epoch (``epochs=all``)
is opt-in, because what it trades is target-dependent. Measured on the 2-layer GPT step
(d 256, default policy): on XLA:CPU, 48.2k -> 37.9k optimized HLO instructions (rank-0:
35.3k -> 19.8k) for 1085 -> 1289 fusions; on an H100 target, XLA:GPU already gives most
scalar chains a kernel of their own instead of copying them, and every pack is one more
kernel (621 -> 842 fusions): a concatenate does not fuse into the amax reduction its epoch
starts from.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter, ops_named
from scalify_hlo.rewrites.op_table import Trait, ops_with
from scalify_hlo.rewrites.regions import nested_ops
from scalify_hlo.rewrites.registry import ModulePass, PassContext, option, register
from scalify_hlo.rewrites.scale_packs import PACK, check_pack_width, pack_scalars, packable
from scalify_hlo.symbols import partition_count

_NO_ROOT = -1  # the chain depends on block arguments, outer values and constants only
# Which epochs the pass packs (its ``epochs`` option).
EPOCHS = ("all", "arguments")
# Scalar ops XLA copies into their users: the loop hoister's pure elementwise ops, and the
# rounding of a statistic to a power of two.
_CHAIN_OPS = ops_with(Trait.HOISTABLE) | {"stablehlo.reduce_precision"}
_CHAIN_NAMES = _CHAIN_OPS | {"stablehlo.constant"}
# Ops that read one element of a vector: where the vector is an argument of the block (a
# delayed step's exponents, a scale bank), the element is a value of the argument epoch, not
# the root of an epoch of its own (a GPT step's 127 delayed exponents were 127 epochs that
# XLA:GPU computed in scalar kernels beside the argument epoch's pack).
_ELEMENT_READS = frozenset({"stablehlo.slice", "stablehlo.reshape"})


def _is_scalar_type(t: ir.Type) -> bool:
    return type(t) is ir.RankedTensorType and t.rank == 0


def _element_read(results: ir.OpResultList) -> ir.Value | None:
    """The result of a slice or reshape to one element (its operand is checked by the
    caller: an element of an argument is in the argument epoch)."""
    if len(results) != 1:
        return None
    t = results[0].type
    if type(t) is not ir.RankedTensorType or not t.has_static_shape or t.rank > 1 or (
            t.rank == 1 and t.shape[0] != 1):
        return None
    return results[0]


def _chain_result(op: ir.Operation, name: str, results: ir.OpResultList) -> ir.Value | None:
    """The result of a chain op, a pure scalar op on scalars (cheap to recompute, so XLA
    copies it into each user); None for any other op. ``name`` (in ``_CHAIN_NAMES``) and
    ``results`` are the op's, which the caller has read already.

    Only the result is looked at (this runs on every op of a step): the chain ops are
    elementwise, so a scalar result has scalar operands (clamp's and select's bounds and
    predicate are scalars or of the result's shape), except for a bitcast_convert, which
    may drop a dimension (``tensor<2xi32>`` to ``tensor<f64>``)."""
    if len(results) != 1:
        return None
    result = results[0]
    if not _is_scalar_type(result.type) or (name == "stablehlo.bitcast_convert"
                                            and not _is_scalar_type(op.operands[0].type)):
        return None
    return result


class _Epochs:
    """The scale epochs of one block: which ops are chain ops, and each one's root.

    Ops are known by their first result: an op's Python hash changes when its operands
    change (the moves and replacements that follow this analysis change them), while a
    value's hash stays."""

    def __init__(self, block: ir.Block, element_reads: bool = True) -> None:
        self.ops = [op.operation for op in block.operations]
        self.element_reads = element_reads  # one element of a vector argument: a chain op
        self.chain: list[bool] = []  # per position: is the op a chain op
        self.root: dict[ir.Value, int] = {}  # chain op's result -> position of its root
        self.cost: dict[ir.Value, int] = {}  # chain op's result -> non-constant ops it needs
        self.chain_ops: list[ir.Operation] = []
        self.chain_roots: list[int] = []  # the root of each of chain_ops
        self.chain_positions: list[int] = []  # the position of each of chain_ops
        self.position: dict[ir.Value, int] = {}  # every result -> position of its op
        # With analyse(users=True), per position, the positions of the ops that use its
        # results (an op whose regions use one counts: the op of this block that holds them).
        self.users: list[list[int]] = []

    def analyse(self, users: bool = False) -> None:
        """Each op's chain flag and each chain op's root and cost, in one pass in block order
        (an operand is defined before its user), each binding property read once: this
        runs on every op of a step, twice per ``simplify``. With ``users``, also each op's
        users, from the operands (a chain op's are read anyway): cheaper than asking each
        value for its uses, whose owners the bindings build as op views."""
        root, cost, chain, position = self.root, self.cost, self.chain, self.position
        chain_ops, chain_roots, chain_positions = (
            self.chain_ops, self.chain_roots, self.chain_positions)
        if users:
            self.users = [[] for _ in self.ops]
        by_definition = self.users
        for at, op in enumerate(self.ops):
            name = op.name
            results = op.results
            result = _chain_result(op, name, results) if name in _CHAIN_NAMES else None
            if result is None and self.element_reads and name in _ELEMENT_READS:
                result = _element_read(results)
                if result is not None and not self._reads_arguments(op):
                    result = None
            if result is None:
                chain.append(False)
                if users:
                    for user in (op, *nested_ops(op)):
                        for value in user.operands:
                            defined = position.get(value)
                            if defined is not None:  # None: not of this block
                                by_definition[defined].append(at)
                for value in results:
                    position[value] = at
                continue
            top = _NO_ROOT  # outside the block: no root
            total = 0 if name == "stablehlo.constant" else 1
            for value in op.operands:
                defined = position.get(value)
                if defined is None:  # outside the block: no root
                    continue
                if users:
                    by_definition[defined].append(at)
                if chain[defined]:
                    value_root = root[value]
                    total += cost[value]
                else:
                    value_root = defined
                if value_root > top:
                    top = value_root
            root[result] = top
            cost[result] = total
            position[result] = at
            chain.append(True)
            chain_ops.append(op)
            chain_roots.append(top)
            chain_positions.append(at)

    def _reads_arguments(self, op: ir.Operation) -> bool:
        """Whether ``op``'s operand is outside the block or a chain value of the argument
        epoch (one element of an argument vector, reshaped)."""
        for value in op.operands:
            defined = self.position.get(value)
            if defined is not None and not (self.chain[defined]
                                            and self.root[value] == _NO_ROOT):
                return False
        return True

    def user_root(self, user: ir.Operation) -> int | None:
        """The root of a chain op that uses a value, None for any other user."""
        results = user.results
        return self.root.get(results[0]) if len(results) == 1 else None

    def anchor(self, root: int) -> ir.Operation:
        """The first non-chain op after the root: chain ops of the epoch go before it."""
        return self.ops[self._anchor_position(root)]

    def _anchor_position(self, root: int) -> int:
        for position in range(root + 1, len(self.ops)):
            if not self.chain[position]:
                return position
        return len(self.ops) - 1

    def moved_order(self) -> list[int] | None:
        """The positions of ``ops`` in the order ``move_to_epochs`` leaves the block in
        (each epoch's chain ops, in block order, just before its anchor), so that a caller
        need not list the block again through the bindings; None where the last op is a
        chain op (no terminator: its anchor would be itself)."""
        if not self.ops or self.chain[-1]:
            return None
        before: dict[int, list[int]] = {}
        anchors: dict[int, int] = {}
        for at, root in zip(self.chain_positions, self.chain_roots, strict=True):
            anchor = anchors.get(root)
            if anchor is None:
                anchor = anchors[root] = self._anchor_position(root)
            before.setdefault(anchor, []).append(at)
        order: list[int] = []
        for at, chain in enumerate(self.chain):
            if not chain:
                order += before.get(at, ())
                order.append(at)
        return order

    def boundary(self, arguments_only: bool = False, own_buffers: bool = False
                 ) -> dict[int, list[ir.Value]]:
        """Per root, the epoch's values that a non-chain op uses (chains of more than one op
        only: a lone exponent read is as cheap to copy as its slice); with
        ``arguments_only``, the argument epoch's alone. A later epoch's chain that uses one
        keeps the scalar: reading it from the vector there too cut XLA:CPU's rank-0
        instructions by a fifth more but added a tenth more kernels."""
        epochs: dict[int, list[ir.Value]] = {}
        for result, root in self.root.items():
            if arguments_only and root != _NO_ROOT:
                continue
            if self.cost[result] < 2 or not packable(result):
                continue
            if any(self.user_root(use.owner.operation) is None
                   and not (own_buffers and _wants_a_buffer(use.owner.operation))
                   for use in result.uses):
                epochs.setdefault(root, []).append(result)
        return epochs


_LAYOUT = frozenset({"stablehlo.reshape", "stablehlo.transpose"})


def _wants_a_buffer(user: ir.Operation) -> bool:
    """Whether ``user`` broadcasts a scale that only multiplies FP8 dots' results: XLA:GPU
    folds it into the cuBLASLt FP8 GEMM, which reads it from a buffer of its own, so a
    slice of a pack there is copied out in a kernel of its own (15 on the 1-layer GPT's
    delayed step); it keeps the scalar, computed beside the other scalars XLA fuses into
    one kernel. The function's return reads the pack: left out, the returned scales were 90
    kernels on the 1-layer GPT but 1249 on GPT-2-small against 933 (XLA:GPU merges the
    small kernels that write them at 1 layer, not at 12). Only where the argument epoch
    alone is packed (the accelerators' mode): with every epoch packed (XLA:CPU's, where a
    copy is a load) the packs serve that user too."""
    if user.name != "stablehlo.broadcast_in_dim":
        return False
    broadcast = user.results[0]
    for use in broadcast.uses:
        multiply = use.owner.operation
        if multiply.name != "stablehlo.multiply" or len(multiply.operands) != 2:
            return False
        other = multiply.operands[1 - use.operand_number].owner
        while isinstance(other, ir.OpView) and other.operation.name in _LAYOUT:
            other = other.operation.operands[0].owner
        if not (isinstance(other, ir.OpView) and other.operation.name == "stablehlo.dot_general"
                and any(str(ir.RankedTensorType(v.type).element_type).startswith("f8")
                        for v in other.operation.operands)):
            return False
    return True


def move_to_epochs(block: ir.Block, users: bool = False, element_reads: bool = True
                   ) -> tuple[_Epochs, dict[int, ir.Operation]]:
    """Move the block's chain ops up to their epochs (just after their roots), so that a
    scale is computed as soon as what it depends on exists; returns the analysis (with
    ``users``: and each op's users) and each epoch's anchor (the op its chain ops now
    precede)."""
    epochs = _Epochs(block, element_reads)
    epochs.analyse(users)
    anchors = {root: epochs.anchor(root) for root in set(epochs.chain_roots)}
    for op, root in zip(epochs.chain_ops, epochs.chain_roots, strict=True):
        op.move_before(anchors[root])  # in block order: operands move before their users
    return epochs, anchors


def materialize_block(block: ir.Block, arguments_only: bool = False, width: int = PACK,
                      one_device: bool = True) -> int:
    """Move the block's chain ops to their epochs and pack each epoch's boundary values
    (with ``arguments_only``, the argument epoch's alone) in vectors of at most ``width``;
    returns how many values were packed. ``one_device``: the module is not partitioned, so
    elements read from vector arguments join the argument epoch and ``_wants_a_buffer``'s
    users keep their scalars. A pack waits for every value in it, and on a partitioned
    step under ``compile_scaled`` some scalar arguments are computed at the call (a plain
    input's scale, from an all-reduce): with the exponents packed beside them, an FSDP
    step's weight gathers waited for it (its longest chain of collectives 5 -> 6 against
    the original's 4), so a partitioned module packs as before."""
    epochs, anchors = move_to_epochs(block, element_reads=one_device)
    own_buffers = arguments_only and one_device
    boundary = epochs.boundary(arguments_only, own_buffers)
    if not boundary:
        return 0
    packed = 0
    for root, values in sorted(boundary.items()):
        # Collected before the pack exists: its reshapes use the scalars themselves, and
        # so do the chain ops (they run in the pack's kernel).
        uses = [[(use.owner.operation, use.operand_number) for use in value.uses
                 if epochs.user_root(use.owner.operation) is None
                 and not (own_buffers and _wants_a_buffer(use.owner.operation))]
                for value in values]
        anchor = anchors[root]
        taken = pack_scalars(Emitter(ir.InsertionPoint(anchor), anchor.location), values, width)
        for value_uses, slice_value in zip(uses, taken, strict=True):
            for owner, number in value_uses:
                owner.operands[number] = slice_value
        packed += len(values)
    return packed


def materialize_scales(module: ir.Module, arguments_only: bool = False,
                       width: int = PACK) -> int:
    """Materialize the scale epochs of every function body, in vectors of at most ``width``
    scalars; returns the values packed."""
    one_device = partition_count(module) == 1
    return sum(materialize_block(func.regions[0].blocks[0], arguments_only, width, one_device)
               for func in ops_named(module.operation, "func.func") if func.regions[0].blocks)


@register("materialize-scales",
          "Compute a block's scalar scale arithmetic once per scale epoch (after the non-scalar "
          "op it depends on last) and hand it to its users through packed vectors, which XLA "
          "reads instead of copying the chain into every fusion (part of simplify).")
class MaterializeScales(ModulePass):
    epochs: str = option(
        "all", "all: every epoch; arguments: only the scales computed from the function's "
        "arguments and constants (what simplify does)", EPOCHS)
    pack_width: int = option(PACK, "scalars per packed vector (at least 2; XLA:CPU runs a "
                             "wider concatenate as a kernel per scalar, XLA:GPU as one)")

    def validate(self) -> None:
        check_pack_width(self.pack_width)

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("materialize-scales.packed",
                     materialize_scales(module, self.epochs == "arguments",
                                        self.pack_width))
