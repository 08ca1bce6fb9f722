"""The (data, scale) pair of a rewritten float value, and the state one scalify run shares
across the scopes of its blocks (settings, wide values, reporting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.module_io import short_location
from scalify_hlo.rewrites.emitter import Types, element_type
from scalify_hlo.rewrites.registry import PassContext
from scalify_hlo.scale import Factor, Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.delayed_statistics import DelayedExponents
    from scalify_hlo.rewrites.scope import Scope

RESCALE_ATTR = "scalify.rescale"  # set by the rescale pass on ops whose results it rescales
# Set by the rescale pass on the entry function's return: rescale the results whose scale can
# drift from one call to the next (``Scope.can_drift``).
RESCALE_DRIFTING_ATTR = "scalify.rescale-drifting"


@dataclass(frozen=True)
class Scaled:
    """``original = data * scale``; data is in the pass's data dtype.

    ``any_scale`` marks values made only of 0, +-inf and NaN (relu's zero, reduce inits,
    masks): their data is the same at every scale, so they never force a rescale.
    """

    data: ir.Value
    scale: Scale
    any_scale: bool = False

    def __init__(self, data: ir.Value, scale: Scale, any_scale: bool = False) -> None:
        fields = self.__dict__  # see Scale.__init__: one of these per rewritten value
        fields["data"] = data
        fields["scale"] = scale
        fields["any_scale"] = any_scale

    def data_element(self) -> ir.Type:
        """The data's element type, read from the IR once per pair: each read of a type
        makes the bindings build new type objects, and ops ask for every operand's."""
        found = self.__dict__.get("_element")
        if found is None:
            found = self.__dict__["_element"] = element_type(self.data)
        return found


Mapped = Scaled | ir.Value


def makes_only(values: set[ir.Value]) -> Callable[[ir.Operation], bool]:
    """A ``computes_in`` filter for ``give_own_dtype``: an op computes in a class's type when
    every float it makes is in the class or of rank 0 (a lookup, ``1 - ab``, an average's
    decayed copy and sum), not when it applies one to a data tensor (``sqrt(1 - ab) * x``,
    whose result stays in the data type)."""
    def computes_in(op: ir.Operation) -> bool:
        return all(result in values or result.type.rank == 0 for result in op.results
                   if isinstance(result.type, ir.RankedTensorType)
                   and isinstance(result.type.element_type, ir.FloatType))
    return computes_in


def _wider(known: ir.Type | None, dtype: ir.Type) -> ir.Type:
    """The wider of two data types (f32 over f16 and bf16; the first of two 16-bit ones)."""
    if known is None or isinstance(dtype, ir.F32Type):
        return dtype
    return known


@dataclass
class ScalifyState:
    """Settings and reporting shared by every scope of one scalify run."""

    data_dtype: ir.Type
    strict: bool
    common_scale_rule: str  # "max" or "first"
    context: PassContext
    rules: dict[str, Callable[[Scope, ir.Operation], None]]
    fallback: Callable[[Scope, ir.Operation], None]
    clone: Callable[[Scope, ir.Operation], None]
    reported: set[str] = field(default_factory=set)
    # Values of the original program that get a data type of their own (squares, see
    # square_values.py, and floats made from integer bits) and that type; empty: every value
    # uses data_dtype. ``widest_own_dtype`` is None when there is none, else the widest of them.
    own_dtypes: dict[ir.Value, ir.Type] = field(default_factory=dict)
    widest_own_dtype: ir.Type | None = None
    # The ops that define or use a value of ``own_dtypes``, and the type they compute in (see
    # ``op_dtype``), found once from the values rather than per op from its operands.
    own_dtype_ops: dict[ir.Operation, ir.Type] = field(default_factory=dict)
    # Why each of those ops computes in its type (the class's name, for ``explain``).
    own_dtype_reasons: dict[ir.Operation, str] = field(default_factory=dict)
    # Values of ``own_dtypes`` whose data is not kept near unit scale (a loop's residual,
    # shrinking by 2^-40 in f32 data; a schedule's ab / (1 - ab), 1e6): an op in the data type
    # reads one rescaled by its amax, not its data converted (which is 0 or inf in f16).
    rescaled_when_narrowed: set[ir.Value] = field(default_factory=set)
    # The data type of the op being rewritten: its operands are read in it, its results made
    # in it (None outside an op: values keep their own type).
    current_dtype: ir.Type | None = None
    types: Types = field(default_factory=Types)
    # The last op reported as a fallback: its record says so, not which scale it got.
    fallback_op: ir.Operation | None = None

    # Whether the update tail's results are rounded stochastically to bf16 storage
    # (``scalify.resolve_update_rounding``).
    update_stochastic: bool = False
    # Results of the update tail that round to nearest all the same: first moments that
    # move fast enough for bf16 (``moment_values.fast_moments``).
    nearest_tail: frozenset[ir.Value] = frozenset()

    # Runtime factors that may hold ``UNSET_EXPONENT``: the scales of loop-carried values
    # that enter a loop as zeros (see ``rule_while``), and common scales of only such.
    unset_factors: set[Factor] = field(default_factory=set)

    # Whether dots, sums and constants move a static power of two from their data to their
    # scale (unit scaling: data near 1 where the data type's range is narrow). False where a
    # step runs on values at their original magnitude (folded arguments in a data type with
    # f32's range): there the shift is one more multiply per dot and sum, and holds no range.
    unit_shifts: bool = True

    def maybe_unset(self, scale: Scale) -> bool:
        """Whether ``scale``'s runtime exponent may be ``UNSET_EXPONENT`` (or sums with it)."""
        return bool(self.unset_factors) and any(
            factor in self.unset_factors for factor, _ in scale.factors)

    # The entry function's delayed rescale points (delayed_statistics.py); None: every
    # point applies what it measures.
    delayed: DelayedExponents | None = None

    # The update tail's ops (update_tail.py): run on unscaled values in the original types.
    tail: set[ir.Operation] = field(default_factory=set)
    # Squares that are state (an argument and a result of a square class: Adam's second
    # moment): the update tail stores those it returns unencoded with their amax at the top
    # of the data type's range (tail_result); nothing but the update reads them.
    squares: frozenset[ir.Value] = frozenset()
    # In a partitioned step, the ops that make a replicated gradient the tail reads
    # (gradient_join.replicated_gradients): their data is marked for join-gradients.
    gradients: set[ir.Operation] = field(default_factory=set)

    # Runtime maxima of scales (common_scale): each one's operands, for ``Scope.can_drift``.
    maxima: dict[Scale, tuple[Scale, ...]] = field(default_factory=dict)
    # Runtime + constant adds whose result's data later products raise to a power, rescaled
    # under ``common-scale=first`` (drift.py).
    compounding: set[ir.Operation] = field(default_factory=set)
    # Products whose result is a normalized value (a norm's output), with the bound on its
    # magnitude: narrowed from a wide type at scale 1, with no statistic
    # (normalized_values.py).
    normalized: dict[ir.Operation, float] = field(default_factory=dict)
    # Values of the original known to take a few constant values (``value_sets``).
    value_sets: dict[ir.Value, frozenset[float] | None] = field(default_factory=dict)
    value_steps: dict[ir.Value, float | None] = field(default_factory=dict)

    @property
    def rounds_as_original(self) -> bool:
        """Whether the results of an op that rounds (``Trait.ROUNDS``) whose own type is
        narrower than their data (a bf16 op) are rounded as the original rounds them: in f32
        data, so that the rewrite computes the same numbers as an original with 16-bit ops."""
        return isinstance(self.data_dtype, ir.F32Type)

    def dtype_of(self, old: ir.Value) -> ir.Type:
        """The data type of an original float value in the rewritten program."""
        if self.widest_own_dtype is not None:
            return self.own_dtypes.get(old, self.data_dtype)
        return self.data_dtype

    def give_own_dtype(self, values: set[ir.Value], dtype: ir.Type, reason: str,
                       computes_in: Callable[[ir.Operation], bool] | None = None,
                       rescaled_when_narrowed: bool = False) -> None:
        """Give ``values`` the data type ``dtype`` (wider than the data dtype) for ``reason``
        (their class), and note the ops that touch them, which compute in it (those
        ``computes_in`` accepts, where given); a value or op in two classes (a square of
        random bits) takes the wider type. ``rescaled_when_narrowed``: the values' data is not
        kept near unit scale (see the field)."""
        own, own_ops, reasons = self.own_dtypes, self.own_dtype_ops, self.own_dtype_reasons
        if rescaled_when_narrowed:
            self.rescaled_when_narrowed.update(values)
        for value in values:
            own[value] = _wider(own.get(value), dtype)
            owner = value.owner
            touching = [] if isinstance(owner, ir.Block) else [owner.operation]
            touching += [use.owner.operation for use in value.uses]
            for op in touching:
                if computes_in is None or computes_in(op):
                    own_ops[op] = _wider(own_ops.get(op), dtype)
                    reasons.setdefault(op, reason)
        if values:
            self.widest_own_dtype = _wider(self.widest_own_dtype, dtype)

    def op_dtype(self, op: ir.Operation) -> ir.Type:
        """Wide if any float operand or result of ``op`` is wide: an op computes in the wider
        type of what it touches, so a square is formed, and its sqrt taken, in it."""
        if self.widest_own_dtype is not None:
            return self.own_dtype_ops.get(op, self.data_dtype)
        return self.data_dtype

    def report_fallback(self, op: ir.Operation, why: str) -> None:
        where = short_location(op.location)
        if self.strict:
            raise RewriteError(f"{where}: {op.name} {why} (scalify strict mode)")
        message = f"{where}: {op.name} {why}; running it unscaled (scale 1)"
        self.context.bump("scalify.fallback-ops")
        self.context.warn(message)
        if self.context.records is not None:
            self.fallback_op = op
            self.context.record(op.name, op.location, "fallback", why)
