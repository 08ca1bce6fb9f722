"""Every op the rewriter knows by name: one record each, its family and its traits.

The *family* is the rule that propagates the op's scale (``rules.py`` says what each family
does to data and scale and which function rewrites it); an op without one runs unscaled.
The *traits* are the facts about an op that passes other than the rule ask: whether a
region of it commutes with scaling, whether it only moves data, and so on (``Trait``). A
pass asks ``ops_with(Trait.X)`` (once, at import) or ``has_trait(name, Trait.X)``; it keeps
no op names of its own. Custom calls are keyed by their target (``CUSTOM_CALL_TARGETS``).

Adding an op to an existing family is one ``_op(...)`` line here plus its case in
``tests/op_cases.py``; ``tests/test_op_table.py`` checks every name is a registered op.
This module imports nothing from the IR or the passes, so every pass can import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto


class Family(Enum):
    """The scale-propagation rule an op follows (its ``FamilyRule`` in ``rules.py``)."""

    SAME_SCALE = auto()
    MERGE = auto()
    CHOOSE = auto()
    SELECT = auto()
    ADDITIVE = auto()
    COMPARE = auto()
    WITH_REGION = auto()
    SCATTER = auto()
    SCALE_INVARIANT = auto()
    REMAINDER = auto()
    MULTIPLY = auto()
    DIVIDE = auto()
    SQUARE = auto()
    DOT = auto()
    REDUCE = auto()
    SELECT_AND_SCATTER = auto()
    SQRT = auto()
    NONLINEAR = auto()
    CONSTANT = auto()
    PRODUCER = auto()
    CONVERT = auto()
    CUSTOM_CALL = auto()
    BARRIER = auto()
    WHILE = auto()
    CASE = auto()
    SHARDING = auto()
    MANUAL = auto()
    COLLECTIVE = auto()
    PERMUTE = auto()


class Trait(Enum):
    """A fact about an op that a pass asks; the value says what it means (``docs/ops.md``)."""

    HOMOGENEOUS = ("f(c*x, c*y) = c*f(x, y) for a power of two c (or scale-free): a reducer, "
                   "comparator or update region made of these runs on scaled data unchanged "
                   "(regions.is_homogeneous)")
    SUMS = ("adds or subtracts its operands: a region with one on floats sums "
            "(regions.is_additive); a runtime + constant one may drift (drift.py)")
    KEEPS_RANGE = ("float results keep the data range of its float operands (the largest): "
                   "a data drift goes through it unchanged (drift.py)")
    JOINS_WIDE_CLASS = ("float results join the class of its float operands (all, or those "
                        "in `wide_operands`): a square or a float made from bits among them "
                        "makes the results wide too (square_values.py)")
    LAYOUT_ONLY = ("only moves, retypes or annotates data: a dot operand reached through it "
                   "keeps its producer's forward/backward role (fp8_dots.py); a custom call "
                   "with such a target passes (data, scale) through (rule_custom_call)")
    ZERO_FILL_THROUGH = ("a constant operand gives a constant result (a zero fill a zero "
                         "fill): the checks for a loop's zero-filled initial value and for a "
                         "select's constant operand look through it (program_constants.py)")
    ELEMENTWISE = ("maps each element to an element of its result alone: a transpose of its "
                   "result is the op on transposed operands, which moves a transpose up to the "
                   "dot it follows (dot_transposes.py)")
    RANGE_BOUNDED = ("a nonlinear op whose float results stay within f16's range for every "
                     "finite f32 operand (|tanh| <= 1, |log| < 104): stored at scale 1 "
                     "(rule_nonlinear)")
    BOUNDED_WHERE_NONPOSITIVE = ("at most 1 in magnitude where its operand is never positive "
                                 "(a softmax's exp(x - max x)): stored at scale 1 there, "
                                 "measured elsewhere (value_signs.py, rule_nonlinear)")
    OPERAND_BOUNDED = ("|f(x)| <= max(|x|, 1) (floor, round): its results fit at the larger "
                       "of its operand's static scale and 1 (rule_nonlinear)")
    VANISHES_AT_ZERO = ("f(0) = 0 and |f(x)| <= 2|x| where its results are not measured (tanh, "
                        "sine; expm1 of a nonpositive operand): where its operand's scale is "
                        "below 1 in f16 data, its results are stored a binade above that "
                        "scale, not at 1, so that small values keep their bits; measured "
                        "results (tan, sinh) at no smaller scale (rules_small.py)")
    PERIODIC = ("its result follows its operand's absolute error, not its relative one "
                "(sin(1000 + 0.5)): with f16 data the operand and the elementwise ops it is "
                "computed from hold f32 data (angle_values.py)")
    HOISTABLE = ("pure elementwise, no regions or side effects: a scalar instance with "
                 "loop-invariant operands is hoisted out of its loop (loop_scales.py), and "
                 "XLA copies one into its users (scale_epochs.py)")
    ROUNDS = ("makes new values, rounded to its result type (sums, products, dots, nonlinear "
              "functions): where the data type has more significand bits than the "
              "op's own type (a bf16 op in f32 data), its results are rounded to that type's "
              "significand, as the original rounds them (walk.py; ops without a rule too)")


# Families whose every op makes new values in its own type: a nonlinear op, computed in the
# original type, is rounded again because XLA may drop a convert pair around it
# (``xla_allow_excess_precision``: bf16 -> f32 -> bf16 -> f32 is then one convert). A
# narrowing convert rounds in its own rule (``rule_convert``).
_MAKE_NEW_VALUES = frozenset({Family.NONLINEAR, Family.PRODUCER})


@dataclass(frozen=True)
class OpRecord:
    name: str
    family: Family | None  # None: no scale rule (integer and boolean ops, terminators)
    traits: frozenset[Trait]
    # With JOINS_WIDE_CLASS: the operands joined with the result (empty: all of them).
    wide_operands: tuple[int, ...] = ()
    # With VANISHES_AT_ZERO: |f(+-inf)| where finite (tanh(inf) = 1), 0 where not: a small
    # result scale must still hold it (an infinite operand's data is inf at any scale; a
    # finite one's result data is at most its own, |f(x)| <= 2|x|).
    infinity_limit: float = 0.0


def _op(name: str, family: Family | None, *traits: Trait,
        wide_operands: tuple[int, ...] = (), infinity_limit: float = 0.0) -> OpRecord:
    if Trait.HOISTABLE in traits:  # pure elementwise by definition
        traits += (Trait.ELEMENTWISE,)
    if family in _MAKE_NEW_VALUES:
        traits += (Trait.ROUNDS,)
    return OpRecord(name, family, frozenset(traits), wide_operands, infinity_limit)


F = Family
(HOMOGENEOUS, SUMS, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY, ZERO_FILL_THROUGH, HOISTABLE,
 ELEMENTWISE, RANGE_BOUNDED, BOUNDED_WHERE_NONPOSITIVE, OPERAND_BOUNDED, VANISHES_AT_ZERO,
 PERIODIC, ROUNDS) = (
    Trait.HOMOGENEOUS, Trait.SUMS, Trait.KEEPS_RANGE, Trait.JOINS_WIDE_CLASS,
    Trait.LAYOUT_ONLY, Trait.ZERO_FILL_THROUGH, Trait.HOISTABLE, Trait.ELEMENTWISE,
    Trait.RANGE_BOUNDED, Trait.BOUNDED_WHERE_NONPOSITIVE, Trait.OPERAND_BOUNDED,
    Trait.VANISHES_AT_ZERO, Trait.PERIODIC, Trait.ROUNDS)

# Grouped by family, in the order docs/ops.md lists the families.
RECORDS = (
    _op("stablehlo.reshape", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY,
        ZERO_FILL_THROUGH),
    _op("stablehlo.transpose", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY,
        ZERO_FILL_THROUGH),
    _op("stablehlo.broadcast_in_dim", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY,
        ZERO_FILL_THROUGH),
    _op("stablehlo.slice", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY),
    _op("stablehlo.dynamic_slice", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS,
        wide_operands=(0,)),
    _op("stablehlo.gather", F.SAME_SCALE, KEEPS_RANGE),
    _op("stablehlo.reverse", F.SAME_SCALE, KEEPS_RANGE, JOINS_WIDE_CLASS),
    _op("stablehlo.negate", F.SAME_SCALE, HOMOGENEOUS, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE),
    _op("stablehlo.abs", F.SAME_SCALE, HOMOGENEOUS, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE),
    _op("chlo.top_k", F.SAME_SCALE),
    _op("stablehlo.concatenate", F.MERGE, KEEPS_RANGE, JOINS_WIDE_CLASS),
    _op("stablehlo.dynamic_update_slice", F.MERGE, KEEPS_RANGE, JOINS_WIDE_CLASS,
        wide_operands=(0, 1)),
    _op("stablehlo.pad", F.MERGE, KEEPS_RANGE, JOINS_WIDE_CLASS),
    _op("stablehlo.clamp", F.CHOOSE, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE,
        wide_operands=(1,)),
    _op("stablehlo.maximum", F.CHOOSE, HOMOGENEOUS, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE),
    _op("stablehlo.minimum", F.CHOOSE, HOMOGENEOUS, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE),
    _op("stablehlo.select", F.SELECT, HOMOGENEOUS, KEEPS_RANGE, JOINS_WIDE_CLASS, HOISTABLE,
        wide_operands=(1, 2)),
    _op("stablehlo.add", F.ADDITIVE, HOMOGENEOUS, SUMS, KEEPS_RANGE, JOINS_WIDE_CLASS,
        HOISTABLE, ROUNDS),
    _op("stablehlo.subtract", F.ADDITIVE, HOMOGENEOUS, SUMS, KEEPS_RANGE, JOINS_WIDE_CLASS,
        HOISTABLE, ROUNDS),
    _op("stablehlo.compare", F.COMPARE, HOMOGENEOUS, HOISTABLE),
    _op("stablehlo.sort", F.WITH_REGION),
    _op("stablehlo.scatter", F.SCATTER, ROUNDS),
    _op("stablehlo.sign", F.SCALE_INVARIANT, HOISTABLE),
    _op("stablehlo.atan2", F.SCALE_INVARIANT, ELEMENTWISE, ROUNDS),
    _op("stablehlo.remainder", F.REMAINDER, KEEPS_RANGE, HOISTABLE),
    _op("stablehlo.multiply", F.MULTIPLY, HOISTABLE, ROUNDS),
    _op("stablehlo.divide", F.DIVIDE, HOISTABLE, ROUNDS),
    _op("chlo.square", F.SQUARE, ELEMENTWISE, ROUNDS),
    *(_op(name, F.DOT, ROUNDS) for name in ("stablehlo.dot_general", "stablehlo.convolution")),
    *(_op(name, F.REDUCE, ROUNDS) for name in ("stablehlo.reduce", "stablehlo.reduce_window")),
    _op("stablehlo.select_and_scatter", F.SELECT_AND_SCATTER, ROUNDS),
    # sqrt and rsqrt do not keep the range, but they are where Adam adds eps: sqrt(nu) + eps
    # must stay wide, or eps (1e-8) flushes next to the largest |g| in f16 and 0 / (0 + eps)
    # is 0 / 0.
    _op("stablehlo.sqrt", F.SQRT, JOINS_WIDE_CLASS, HOISTABLE, ROUNDS),
    _op("stablehlo.rsqrt", F.SQRT, JOINS_WIDE_CLASS, HOISTABLE, ROUNDS),
    # Hoistable: pure elementwise, cheap enough to copy into users. bitcast_convert is
    # homogeneous only between integers: regions.is_homogeneous checks its types.
    # The results of the nonlinear ops that are none of RANGE_BOUNDED, OPERAND_BOUNDED and
    # (with a nonpositive operand) BOUNDED_WHERE_NONPOSITIVE can pass f16's range where f32
    # holds them (exp(12), x ** 4.5, cosh): with f16 data their largest magnitude is measured.
    _op("stablehlo.exponential", F.NONLINEAR, HOISTABLE, BOUNDED_WHERE_NONPOSITIVE),
    _op("stablehlo.log", F.NONLINEAR, HOISTABLE, RANGE_BOUNDED),
    *(_op(name, F.NONLINEAR, HOISTABLE, OPERAND_BOUNDED) for name in (
        "stablehlo.floor", "stablehlo.ceil", "stablehlo.round_nearest_even")),
    *(_op(name, F.NONLINEAR, HOISTABLE) for name in (
        "stablehlo.power", "stablehlo.bitcast_convert")),
    # chlo's special functions and the rest: elementwise, nonlinear, not hoisted.
    _op("stablehlo.exponential_minus_one", F.NONLINEAR, ELEMENTWISE, BOUNDED_WHERE_NONPOSITIVE,
        VANISHES_AT_ZERO, infinity_limit=1.0),
    # log1p, atanh and erf_inv vanish at 0 too, but grow past 2|x| (near -1, 1 and 1).
    *(_op(name, F.NONLINEAR, ELEMENTWISE, RANGE_BOUNDED) for name in (
        "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.is_finite", "chlo.erfc",
        "chlo.erf_inv", "chlo.acos", "chlo.acosh", "chlo.atanh")),
    _op("stablehlo.cosine", F.NONLINEAR, ELEMENTWISE, RANGE_BOUNDED, PERIODIC),
    *(_op(name, F.NONLINEAR, ELEMENTWISE, RANGE_BOUNDED, VANISHES_AT_ZERO,
          infinity_limit=limit)
      for name, limit in (("stablehlo.tanh", 1.0), ("chlo.erf", 1.0), ("chlo.atan", math.pi / 2),
                          ("chlo.asin", 0.0), ("chlo.asinh", 0.0))),
    _op("stablehlo.sine", F.NONLINEAR, ELEMENTWISE, RANGE_BOUNDED, VANISHES_AT_ZERO, PERIODIC),
    *(_op(name, F.NONLINEAR, ELEMENTWISE, OPERAND_BOUNDED) for name in (
        "stablehlo.cbrt", "stablehlo.round_nearest_afz", "stablehlo.reduce_precision")),
    *(_op(name, F.NONLINEAR, ELEMENTWISE) for name in (
        "chlo.lgamma", "chlo.digamma", "chlo.cosh")),
    *(_op(name, F.NONLINEAR, ELEMENTWISE, VANISHES_AT_ZERO, PERIODIC) for name in (
        "stablehlo.tan", "chlo.tan")),
    _op("chlo.sinh", F.NONLINEAR, ELEMENTWISE, VANISHES_AT_ZERO),
    # Random: nonlinear, no trait.
    *(_op(name, F.NONLINEAR) for name in ("stablehlo.rng", "stablehlo.rng_bit_generator")),
    _op("stablehlo.constant", F.CONSTANT),
    _op("stablehlo.iota", F.PRODUCER),
    # Homogeneous only between integers: regions.is_homogeneous checks its types.
    _op("stablehlo.convert", F.CONVERT, KEEPS_RANGE, JOINS_WIDE_CLASS, LAYOUT_ONLY,
        ZERO_FILL_THROUGH, HOISTABLE),
    _op("stablehlo.custom_call", F.CUSTOM_CALL),
    _op("stablehlo.optimization_barrier", F.BARRIER, KEEPS_RANGE),
    _op("stablehlo.while", F.WHILE),
    *(_op(name, F.CASE) for name in ("stablehlo.case", "stablehlo.if")),
    *(_op(name, F.SHARDING) for name in ("sdy.sharding_constraint", "sdy.reshard")),
    _op("sdy.manual_computation", F.MANUAL),
    *(_op(name, F.COLLECTIVE, ROUNDS) for name in (
        "stablehlo.all_reduce", "stablehlo.reduce_scatter")),
    *(_op(name, F.COLLECTIVE) for name in ("stablehlo.all_gather", "stablehlo.all_to_all")),
    _op("stablehlo.collective_permute", F.PERMUTE),
    # No scale rule: integer and boolean ops, and the region terminator.
    *(_op(name, None, HOMOGENEOUS, HOISTABLE) for name in (
        "stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.not")),
    *(_op(name, None, HOISTABLE) for name in (
        "stablehlo.shift_left", "stablehlo.shift_right_arithmetic",
        "stablehlo.shift_right_logical")),
    _op("stablehlo.return", None, HOMOGENEOUS),
)
OPS: dict[str, OpRecord] = {record.name: record for record in RECORDS}

# custom_call targets that only move or annotate data (sharding, layout): scale-transparent.
CUSTOM_CALL_TARGETS: dict[str, frozenset[Trait]] = {
    target: frozenset({LAYOUT_ONLY}) for target in (
        "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
        "MoveToHost", "MoveToDevice", "LayoutConstraint",
    )
}


def ops_with(trait: Trait) -> frozenset[str]:
    """The names of the ops that have ``trait``."""
    return frozenset(name for name, record in OPS.items() if trait in record.traits)


def has_trait(op_name: str, trait: Trait) -> bool:
    record = OPS.get(op_name)
    return record is not None and trait in record.traits


def target_has_trait(target: str, trait: Trait) -> bool:
    """Whether a custom call to ``target`` has ``trait``."""
    return trait in CUSTOM_CALL_TARGETS.get(target, frozenset())


def infinity_limit(op_name: str) -> float:
    """``|f(+-inf)|`` of a ``VANISHES_AT_ZERO`` op where finite, else 0."""
    return OPS[op_name].infinity_limit


def wide_operands(op_name: str) -> tuple[int, ...]:
    """The operands a JOINS_WIDE_CLASS op joins with its result (empty: all of them)."""
    return OPS[op_name].wide_operands


def ops_in_family(family: Family) -> tuple[str, ...]:
    """The names of the ops of ``family``, in table order."""
    return tuple(name for name, record in OPS.items() if record.family is family)


# Ops whose regions hold values of the program (a loop's body, a branch), not a reducer or
# a comparator of elements: their results are their regions' returned values.
CONTROL_FLOW_OPS = frozenset(ops_in_family(Family.WHILE) + ops_in_family(Family.CASE))
