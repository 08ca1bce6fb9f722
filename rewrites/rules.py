"""How each family of ops propagates scales: the rules the op table (``op_table.py``) names.

``FAMILY_RULES`` gives each ``op_table.Family`` its ``FamilyRule``: what happens to data and
scale (what ``docs/ops.md`` groups by) and the function that rewrites it. ``RULES`` maps an
op name to its ``Rule``, for every op of ``op_table.OPS`` that has a family. An op without
one runs unscaled and is reported (or rejected under ``scalify{strict=true}``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.rewrites import collectives
from scalify_hlo.rewrites import rule_impls as impl
from scalify_hlo.rewrites.op_table import OPS, Family
from scalify_hlo.rewrites.rules_remainder import rule_remainder
from scalify_hlo.rewrites.scope import Scope


@dataclass(frozen=True)
class FamilyRule:
    """What a family does to data and scale (``docs/ops.md``) and the function that does it."""

    name: str
    data: str
    scale: str
    apply: Callable[[Scope, ir.Operation], None]


SAME_SCALE = FamilyRule("same-scale", "same op on data (float operands first brought to a common "
                        "power-of-two scale, exactly)", "the common scale (max of the inputs; "
                        "under common-scale=first, the f32 default, the first operand's that "
                        "is one runtime factor as it is, an argument's own scale say, else the "
                        "first operand's)",
                        impl.rule_same_scale)
MERGE = FamilyRule("merge", "pieces of the operands put together, no arithmetic between them: "
                   "operands at a common scale", "as same-scale, except that common-scale=max "
                   "takes the midpoint of the exponents for f32-range data (f32, bf16), so "
                   "operands 2^200 apart both stay representable",
                   impl.rule_merge)
_PICKED = ("operands far apart: f32/bf16 data at the midpoint of the exponents (exact up "
           "to 2^250 apart); f16 data: the op in f32 at the midpoint, the result's scale "
           "from its own amax (a result taken from one operand keeps its values at any "
           "spread)")
SELECT = FamilyRule("select", "branches at a common scale; a constant branch takes the runtime "
                    "branch's scale, down to the lowest scale at which the constant stays in the "
                    "data type's range (a sentinel beyond that range at scale 1, a mask's -1e9, "
                    "saturates to the largest finite value instead: a fully masked softmax row "
                    "stays finite, as in the original; in f16 data one read only by max "
                    "reduces, a masked max's, sets no floor, as choose's constants taken only "
                    "past the data); a predicate that is one value for all "
                    "elements picks a branch's data and scale as they are; branches with unrelated "
                    "scales (two runtime ones, or static ones too far apart for f16): each "
                    "element's binade (data exponent bits plus its branch's scale exponent, in "
                    "i32) is picked and one integer max sets the result's scale, then the "
                    "branches' data are shifted to it exactly (picked values exact at any "
                    "spread); otherwise " + _PICKED,
                    "the runtime branch's scale (or that floor), the picked branch's, the "
                    "midpoint, or the largest picked binade", impl.rule_select)
CHOOSE = FamilyRule("choose", "max/min/clamp: the result is one of the operands; one runtime "
                    "scale: constants follow it as in select, except that in f16 data a "
                    "constant the op takes only where the data passes it (max's c <= 0, "
                    "min's c >= 0: a clip's bounds, max(x, -1e9)) sets no floor: it saturates "
                    "at the data's scale, so data far below it keeps its values; " + _PICKED,
                    "the runtime operand's scale, the midpoint, or the result's amax",
                    impl.rule_choose)
ADDITIVE = FamilyRule("additive", "operands rescaled to the common scale (never below a "
                      "constant operand's), then added; under "
                      "common-scale=first a runtime + constant add whose result later "
                      "elementwise products raise to a power of 2 or more (a series' "
                      "y = x/2 - 2) is then rescaled (amax)", "the common scale (as "
                      "same-scale), or the rescaled one", impl.rule_additive)
COMPARE = FamilyRule("compare", "operands at the midpoint of their exponents in a type that "
                     "holds both (f32 for f16 data), compared: the unscaled answer at any "
                     "spread up to 2^250", "none (boolean result)", impl.rule_compare)
WITH_REGION = FamilyRule("region", "same op when its region commutes with scaling (max, min, "
                         "select, compare, add), else unscaled and reported", "common scale",
                         impl.rule_with_region)
SCATTER = FamilyRule("scatter", "operands and updates at a common scale when the update region "
                     "overwrites, adds or takes max/min", "common scale", impl.rule_scatter)
SCALE_INVARIANT = FamilyRule("scale-invariant", "same op at a common scale", "1",
                             impl.rule_scale_invariant)
REMAINDER = FamilyRule("remainder", "same op at a common scale; operands far apart in f16 "
                       "data: in f32 at the midpoint of their exponents (exact at any spread)",
                       "the common scale; far apart: the smaller operand's",
                       rule_remainder)
_EXACT_CONSTANT = ("; with a splat constant that 16-bit data rounds (0.99, 0.9, 1/3), in "
                   "f32 on the exact constant, rounded once to the data type (a moving "
                   "average's momentum, SGD's, dropout's 1/keep)")
MULTIPLY = FamilyRule("multiply", "same op on data" + _EXACT_CONSTANT, "product of scales",
                      impl.rule_multiply)
DIVIDE = FamilyRule("divide", "same op on data" + _EXACT_CONSTANT, "quotient of scales",
                    impl.rule_divide)
SQUARE = FamilyRule("square", "same op on data", "square of the scale", impl.rule_square)
DOT = FamilyRule("dot", "op on data times 2^-k, 2^k ~ sqrt(contracted size)",
                 "product of scales times 2^k", impl.rule_dot)
REDUCE = FamilyRule("reduce", "same op at a common scale; a sum over N elements times 2^-k, "
                    "2^k ~ sqrt(N), accumulated in f32 for f16/bf16 data; a max or min "
                    "reduce's constant init on the far side of 0 (finfo.min) follows the "
                    "data's scale, saturated, in f16 steps (as choose)",
                    "common scale (times 2^k for sums)", impl.rule_reduce)
SELECT_AND_SCATTER = FamilyRule("select-and-scatter", "same op: operand at its own scale, source "
                                "and init at a common one", "source's scale",
                                impl.rule_select_and_scatter)
SQRT = FamilyRule("sqrt", "same op, with a factor 2 moved into the data when the exponent is odd",
                  "scale^(+-1/2), static or at runtime", impl.rule_sqrt)
NONLINEAR = FamilyRule("nonlinear", "unscaled in the original type, op applied, re-encoded",
                       "1", impl.rule_nonlinear)
CONSTANT = FamilyRule("constant", "constant / 2^e", "2^e from the largest finite magnitude "
                      "(static)", impl.rule_constant)
PRODUCER = FamilyRule("producer", "op as is, converted to the data dtype", "1; an iota longer than "
                      "the data type's range: the static power of two that brings it in",
                      impl.rule_producer)
CONVERT = FamilyRule("convert", "float->float: data kept (narrowing rounds as the original); "
                     "float->int: unscaled first; int->float: scale 1, or where the integers can "
                     "pass the data type's range (int32 in f16) the smallest power of two that "
                     "keeps their largest magnitude in it, measured at run time",
                     "unchanged, 1 or runtime",
                     impl.rule_convert)
CUSTOM_CALL = FamilyRule("custom-call", "layout-only targets (Sharding, ...) pass data through; "
                         "others run unscaled and are reported", "unchanged or 1",
                         impl.rule_custom_call)
BARRIER = FamilyRule("barrier", "data through the barrier", "unchanged (symbolic)",
                     impl.rule_optimization_barrier)
WHILE = FamilyRule("control-flow", "(data, scale) pairs carried through block arguments and "
                   "yields", "loop-carried value", impl.rule_while)
CASE = FamilyRule("control-flow", "every branch yields (data, scale) pairs",
                  "runtime value from the branch taken", impl.rule_case)
SHARDING = FamilyRule("sharding", "sharding annotation on the data", "unchanged (a replicated "
                      "scalar)", collectives.rule_sharding_annotation)
MANUAL = FamilyRule("manual-region", "(data, scale) pairs through the region: a runtime scale "
                    "enters as a replicated i32 exponent operand, a static one stays static; "
                    "the body is rewritten like any block", "the body's, agreed over the manual "
                    "axes (one combined max all-reduce) where the body computed it per device",
                    collectives.rule_manual_computation)
COLLECTIVE = FamilyRule("collective", "inside a manual region: the op on data at a scale every "
                        "device of its groups shares (scales computed per device are agreed "
                        "first: one max all-reduce of their exponents, packed in one vector); "
                        "sum, max and min reducers", "the shared scale",
                        collectives.rule_collective)
PERMUTE = FamilyRule("collective-permute", "inside a manual region: data moved as is",
                     "a scale shared by all devices stays; another one is permuted beside the "
                     "data", collectives.rule_collective_permute)

FAMILY_RULES: dict[Family, FamilyRule] = {
    Family.SAME_SCALE: SAME_SCALE, Family.MERGE: MERGE, Family.CHOOSE: CHOOSE,
    Family.SELECT: SELECT, Family.ADDITIVE: ADDITIVE, Family.COMPARE: COMPARE,
    Family.WITH_REGION: WITH_REGION, Family.SCATTER: SCATTER,
    Family.SCALE_INVARIANT: SCALE_INVARIANT, Family.REMAINDER: REMAINDER,
    Family.MULTIPLY: MULTIPLY, Family.DIVIDE: DIVIDE,
    Family.SQUARE: SQUARE, Family.DOT: DOT, Family.REDUCE: REDUCE,
    Family.SELECT_AND_SCATTER: SELECT_AND_SCATTER, Family.SQRT: SQRT,
    Family.NONLINEAR: NONLINEAR, Family.CONSTANT: CONSTANT, Family.PRODUCER: PRODUCER,
    Family.CONVERT: CONVERT, Family.CUSTOM_CALL: CUSTOM_CALL, Family.BARRIER: BARRIER,
    Family.WHILE: WHILE, Family.CASE: CASE, Family.SHARDING: SHARDING, Family.MANUAL: MANUAL,
    Family.COLLECTIVE: COLLECTIVE, Family.PERMUTE: PERMUTE,
}


@dataclass(frozen=True)
class Rule:
    op: str
    family: FamilyRule


RULES: dict[str, Rule] = {
    name: Rule(name, FAMILY_RULES[record.family])
    for name, record in OPS.items() if record.family is not None
}

# func.call is not a rule: the scalify pass inlines calls first (see scalify.py).
INLINED_OPS = ("func.call",)
