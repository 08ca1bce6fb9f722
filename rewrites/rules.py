"""The one table that says how every StableHLO (and CHLO) op propagates scales.

``RULES`` maps an op name to a ``Rule``: its family (what ``docs/ops.md`` groups by), the
function that rewrites it, and what happens to data and scale. An op that is not here runs
unscaled and is reported (or rejected under ``scalify{strict=true}``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo.rewrites import collectives
from scalify_hlo.rewrites import rule_impls as impl
from scalify_hlo.rewrites.scope import Scope


@dataclass(frozen=True)
class Family:
    name: str
    data: str
    scale: str
    apply: Callable[[Scope, ir.Operation], None]


SAME_SCALE = Family("same-scale", "same op on data (float operands first brought to a common "
                    "power-of-two scale, exactly)", "the common scale (max of the inputs; "
                    "under common-scale=first, the f32 default, the first operand's that "
                    "is one runtime factor as it is, an argument's own scale say, else the "
                    "first operand's)",
                    impl.rule_same_scale)
MERGE = Family("merge", "pieces of the operands put together, no arithmetic between them: "
               "operands at a common scale", "as same-scale, except that common-scale=max "
               "takes the midpoint of the exponents for f32-range data (f32, bf16), so "
               "operands 2^200 apart both stay representable",
               impl.rule_merge)
_PICKED = ("operands far apart: f32/bf16 data at the midpoint of the exponents (exact up "
           "to 2^250 apart); f16 data: the op in f32 at the midpoint, the result's scale "
           "from its own amax (a result taken from one operand keeps its values at any "
           "spread)")
SELECT = Family("select", "branches at a common scale; a constant branch takes the runtime "
                "branch's scale, down to the lowest scale at which the constant stays in the "
                "data type's range (a sentinel beyond that range at scale 1, a mask's -1e9, "
                "saturates to the largest finite value instead: a fully masked softmax row "
                "stays finite, as in the original); a predicate that is one value for all elements "
                "picks a branch's data and scale as they are; branches with unrelated "
                "scales (two runtime ones, or static ones too far apart for f16): each "
                "element's binade (data exponent bits plus its branch's scale exponent, in "
                "i32) is picked and one integer max sets the result's scale, then the "
                "branches' data are shifted to it exactly (picked values exact at any "
                "spread); otherwise " + _PICKED,
                "the runtime branch's scale (or that floor), the picked branch's, the "
                "midpoint, or the largest picked binade", impl.rule_select)
CHOOSE = Family("choose", "max/min/clamp: the result is one of the operands; one runtime "
                "scale: constants follow it as in select; " + _PICKED,
                "the runtime operand's scale, the midpoint, or the result's amax",
                impl.rule_choose)
ADDITIVE = Family("additive", "operands rescaled to the common scale, then added; under "
                  "common-scale=first a runtime + constant add whose result later "
                  "elementwise products raise to a power of 2 or more (a series' "
                  "y = x/2 - 2) is then rescaled (amax)", "the common scale (as "
                  "same-scale), or the rescaled one", impl.rule_additive)
COMPARE = Family("compare", "operands at the midpoint of their exponents in a type that "
                 "holds both (f32 for f16 data), compared: the unscaled answer at any spread up "
                 "to 2^250", "none (boolean result)", impl.rule_compare)
WITH_REGION = Family("region", "same op when its region commutes with scaling (max, min, "
                     "select, compare, add), else unscaled and reported", "common scale",
                     impl.rule_with_region)
SCATTER = Family("scatter", "operands and updates at a common scale when the update region "
                 "overwrites, adds or takes max/min", "common scale", impl.rule_scatter)
SCALE_INVARIANT = Family("scale-invariant", "same op at a common scale", "1",
                         impl.rule_scale_invariant)
_EXACT_CONSTANT = ("; with a splat constant that 16-bit data rounds (0.99, 0.9, 1/3), in "
                   "f32 on the exact constant, rounded once to the data type (a moving "
                   "average's momentum, SGD's, dropout's 1/keep)")
MULTIPLY = Family("multiply", "same op on data" + _EXACT_CONSTANT, "product of scales",
                  impl.rule_multiply)
DIVIDE = Family("divide", "same op on data" + _EXACT_CONSTANT, "quotient of scales",
                impl.rule_divide)
SQUARE = Family("square", "same op on data", "square of the scale", impl.rule_square)
DOT = Family("dot", "op on data times 2^-k, 2^k ~ sqrt(contracted size)",
             "product of scales times 2^k", impl.rule_dot)
REDUCE = Family("reduce", "same op at a common scale; a sum over N elements times 2^-k, "
                "2^k ~ sqrt(N), accumulated in f32 for f16/bf16 data",
                "common scale (times 2^k for sums)", impl.rule_reduce)
SELECT_AND_SCATTER = Family("select-and-scatter", "same op: operand at its own scale, source "
                            "and init at a common one", "source's scale",
                            impl.rule_select_and_scatter)
SQRT = Family("sqrt", "same op, with a factor 2 moved into the data when the exponent is odd",
              "scale^(+-1/2), static or at runtime", impl.rule_sqrt)
NONLINEAR = Family("nonlinear", "unscaled in the original type, op applied, re-encoded",
                   "1", impl.rule_nonlinear)
CONSTANT = Family("constant", "constant / 2^e", "2^e from the largest finite magnitude "
                  "(static)", impl.rule_constant)
PRODUCER = Family("producer", "op as is, converted to the data dtype", "1; an iota longer than "
                  "the data type's range: the static power of two that brings it in",
                  impl.rule_producer)
CONVERT = Family("convert", "float->float: data kept (narrowing rounds as the original); "
                 "float->int: unscaled first; int->float: scale 1, or where the integers can "
                 "pass the data type's range (int32 in f16) the smallest power of two that "
                 "keeps their largest magnitude in it, measured at run time",
                 "unchanged, 1 or runtime",
                 impl.rule_convert)
CUSTOM_CALL = Family("custom-call", "layout-only targets (Sharding, ...) pass data through; "
                     "others run unscaled and are reported", "unchanged or 1",
                     impl.rule_custom_call)
BARRIER = Family("barrier", "data through the barrier", "unchanged (symbolic)",
                 impl.rule_optimization_barrier)
WHILE = Family("control-flow", "(data, scale) pairs carried through block arguments and "
               "yields", "loop-carried value", impl.rule_while)
CASE = Family("control-flow", "every branch yields (data, scale) pairs",
              "runtime value from the branch taken", impl.rule_case)
SHARDING = Family("sharding", "sharding annotation on the data", "unchanged (a replicated "
                  "scalar)", collectives.rule_sharding_annotation)
MANUAL = Family("manual-region", "(data, scale) pairs through the region: a runtime scale "
                "enters as a replicated i32 exponent operand, a static one stays static; "
                "the body is rewritten like any block", "the body's, agreed over the manual "
                "axes (one combined max all-reduce) where the body computed it per device",
                collectives.rule_manual_computation)
COLLECTIVE = Family("collective", "inside a manual region: the op on data at a scale every "
                    "device of its groups shares (scales computed per device are agreed "
                    "first: one max all-reduce of their exponents, packed in one vector); "
                    "sum, max and min reducers", "the shared scale",
                    collectives.rule_collective)
PERMUTE = Family("collective-permute", "inside a manual region: data moved as is",
                 "a scale shared by all devices stays; another one is permuted beside the "
                 "data", collectives.rule_collective_permute)

_FAMILY_OPS: dict[Family, tuple[str, ...]] = {
    SAME_SCALE: (
        "stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim",
        "stablehlo.slice", "stablehlo.dynamic_slice", "stablehlo.gather", "stablehlo.reverse",
        "stablehlo.negate", "stablehlo.abs", "stablehlo.remainder", "chlo.top_k",
    ),
    MERGE: (
        "stablehlo.concatenate", "stablehlo.dynamic_update_slice", "stablehlo.pad",
    ),
    CHOOSE: ("stablehlo.clamp", "stablehlo.maximum", "stablehlo.minimum"),
    SELECT: ("stablehlo.select",),
    ADDITIVE: ("stablehlo.add", "stablehlo.subtract"),
    COMPARE: ("stablehlo.compare",),
    WITH_REGION: ("stablehlo.sort",),
    SCATTER: ("stablehlo.scatter",),
    SCALE_INVARIANT: ("stablehlo.sign", "stablehlo.atan2"),
    MULTIPLY: ("stablehlo.multiply",),
    DIVIDE: ("stablehlo.divide",),
    SQUARE: ("chlo.square",),
    DOT: ("stablehlo.dot_general", "stablehlo.convolution"),
    REDUCE: ("stablehlo.reduce", "stablehlo.reduce_window"),
    SELECT_AND_SCATTER: ("stablehlo.select_and_scatter",),
    SQRT: ("stablehlo.sqrt", "stablehlo.rsqrt"),
    NONLINEAR: (
        "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log",
        "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.tanh", "stablehlo.sine",
        "stablehlo.cosine", "stablehlo.tan", "stablehlo.cbrt", "stablehlo.power",
        "stablehlo.floor", "stablehlo.ceil", "stablehlo.round_nearest_afz",
        "stablehlo.round_nearest_even", "stablehlo.is_finite", "stablehlo.reduce_precision",
        "stablehlo.bitcast_convert", "stablehlo.rng", "stablehlo.rng_bit_generator",
        "chlo.erf", "chlo.erfc", "chlo.erf_inv", "chlo.tan", "chlo.lgamma", "chlo.digamma",
        "chlo.sinh", "chlo.cosh", "chlo.asin", "chlo.acos", "chlo.atan", "chlo.asinh",
        "chlo.acosh", "chlo.atanh",
    ),
    CONSTANT: ("stablehlo.constant",),
    PRODUCER: ("stablehlo.iota",),
    CONVERT: ("stablehlo.convert",),
    CUSTOM_CALL: ("stablehlo.custom_call",),
    BARRIER: ("stablehlo.optimization_barrier",),
    WHILE: ("stablehlo.while",),
    CASE: ("stablehlo.case", "stablehlo.if"),
    SHARDING: ("sdy.sharding_constraint",),
    MANUAL: ("sdy.manual_computation",),
    COLLECTIVE: ("stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.all_gather",
                 "stablehlo.all_to_all"),
    PERMUTE: ("stablehlo.collective_permute",),
}


@dataclass(frozen=True)
class Rule:
    op: str
    family: Family

    def __call__(self, scope: Scope, op: ir.Operation) -> None:
        self.family.apply(scope, op)


RULES: dict[str, Rule] = {
    op: Rule(op, family) for family, ops in _FAMILY_OPS.items() for op in ops
}

# func.call is not a rule: the scalify pass inlines calls first (see scalify.py).
INLINED_OPS = ("func.call",)
