"""The precision policy: what a user chooses, turned into a pass pipeline.

A ``Policy`` is the Python face of the pass options: ``Policy().passes()`` are the pass
objects, ``Policy().pipeline()`` the same as text. ``scalify-hlo rewrite`` runs the default
recipe with current statistics (``DEFAULT_PIPELINE``): a module it writes stands alone,
while delayed statistics need a caller that hands each call the exponents of the one before
(``compile_scaled`` does).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from scalify_hlo.dtypes import DATA_DTYPE_ALIASES, DATA_DTYPES, FP8_FORMAT_ALIASES, FP8_FORMATS
from scalify_hlo.errors import ScalifyError
from scalify_hlo.rewrites import ModulePass
from scalify_hlo.rewrites.fp8_dots import SCALINGS as FP8_SCALINGS
from scalify_hlo.rewrites.fp8_dots import Fp8Dots
from scalify_hlo.rewrites.inline import Inline
from scalify_hlo.rewrites.rescale import (
    RESCALE_METHODS,
    RESCALE_POINTS,
    SCALE_ROUNDINGS,
    Rescale,
)
from scalify_hlo.rewrites.scalify import (
    ARGUMENT_SCALES,
    SQUARE_ENCODINGS,
    SQUARE_ROUNDINGS,
    UPDATE_ROUNDINGS,
    Scalify,
)
from scalify_hlo.rewrites.scalify import STATE_FORMATS as _STATE_FORMATS
from scalify_hlo.rewrites.simplify import PACK_SCALES, Simplify

# A field's name (user-facing or MLIR) -> the MLIR name a pass option takes.
_DATA_DTYPE_NAMES = DATA_DTYPE_ALIASES | {name: name for name in DATA_DTYPES}
_FP8_FORMAT_NAMES = FP8_FORMAT_ALIASES | {name: name for name in FP8_FORMATS}
# Policy.fp8_head_operands -> fp8-dots' head-operands option.
_HEAD_OPERANDS = {"data": "data", "float32": "f32"}
_STATE_FORMAT_NAMES = _FP8_FORMAT_NAMES | {name: name for name in _STATE_FORMATS}


@dataclass(frozen=True)
class Policy:
    """How a training step is rewritten.

    data_dtype: element type of the data halves (float32, bfloat16 or float16).
    fp8_dots: cast the operands of eligible dot_generals to FP8.
    forward_format / gradient_format: FP8 formats of activations and weights / of gradients.
    fp8_scaling: auto (amax where the FP8 format does not hold every power of two of the
        data dtype: every pair today, E5M2 flushing f16's subnormals below 2^-16), amax
        (each FP8 operand brought to its format's top binade by a power of two from its
        own amax, undone on the dot's output: data that propagation left far from unit
        scale keeps its bits) or none (the data cast as it is; E4M3FN holds 2^-9..448).
    min_dot_size: dots with fewer multiply-adds (M*N*K per batch) stay in the data dtype.
    fp8_output_head: False (the default): the step's output head (the dots that produce the
        loss, a classifier's logits, and their gradient dots) stays in the data dtype, as
        FP8 recipes at scale keep it; True: it is cast like every other dot.
    fp8_head_operands: the operands of a kept head dot: data (the data dtype) or float32
        (converted, exact; TPU targets: XLA:TPU folds the converts, and XLA:CPU cannot run
        the bf16 head with its f32 result otherwise, so a TPU policy's step runs on a CPU).
    fp8_batched_dots: True (the default): dots with batch dimensions (attention's QK^T and
        PV, an activation times an activation per example) are cast too; False: they stay in
        the data dtype, as FP8 recipes for linear layers leave attention (``for_target``:
        tpu7x, where their casts cost more than their FP8 dots gain; targets/table.py).
    exclude: a regular expression; dots whose location matches stay in the data dtype.
    rescale_at: points where scales are recomputed from the data at run time. None: at the
        backward pass's dot and sum outputs for f16 data (its 5-bit exponent cannot absorb
        how far static scales drift through a deep backward pass, 2^20 in a 4-layer
        transformer, nor the sums whose terms cancel, a LayerNorm's ``sum(dy * xhat)``,
        which come out far below their static scale) and at the drifting outputs: results
        outside the update (scalify's ``update`` option) whose scale, fed back, moves from
        step to step (moving averages: 0.99 * v is at half v's scale, so v's scale halves
        every step and its data doubles until f16 overflows; an amax per such result and
        step). Nowhere for f32/bf16.
    rescale_method: amax (the largest magnitude) or rms, rounded to a power of two.
    scale_rounding: nearest power of two, or up (data magnitudes stay <= the statistic).
    square_dtype: data type of squares and what they are added to (Adam's second moment):
        auto (float32 for f16 data, else the data type), float32, bfloat16 or float16. f16
        cannot hold the square of a tensor whose entries span more than 12 binades; bfloat16
        keeps memory at 16 bits but rounds the moving average coarsely.
    square_encoding: how squares cross the step boundary (the second moment between steps):
        sqrt (the data holds the signed square root in the data dtype, the step squares it
        in square_dtype inside), none (as computed), or auto (sqrt for f16 data with
        square_dtype auto: Adam's state in 16 bits; square_dtype="float32" keeps f32).
    square_rounding: nearest or stochastic rounding of a stored square root to the data
        dtype (stochastic keeps a moving average's sub-ulp changes in expectation).
    square_format: none (a stored square root is data of the data dtype) or an FP8 format
        (float8_e4m3fn, float8_e5m2) for it; needs square_encoding to store roots.
    moment_format: none (first moments are data of the data dtype) or an FP8 format for the
        first moments between steps (Adam's and LAMB's mu, SGD momentum's trace: state that
        the step returns as c * itself + d * gradient, found without marking), with a
        power-of-two scale from their amax: weights f16, mu FP8, nu's root f16 is 5 of the
        12 bytes per parameter of f32 state.
    moment_rounding: stochastic (the default) or nearest rounding of a first moment to its
        FP8 format: E4M3FN's 3 significand bits make nearest rounding drop the changes of a
        moving average with b1 = 0.9 that are below 6% of it; stochastic rounding keeps them
        in expectation (measured: MNIST and char-GPT train slightly better, how-it-works.md).
    update_rounding: auto (the default: stochastic for bf16 data), stochastic or nearest
        rounding of the update's results (new weights and optimizer state, computed in f32)
        to bf16 data: bf16 drops a weight's updates below 2^-9 of it, and under the tpu7x
        policy transformer_lm trained 3.1% worse than jax.jit with nearest rounding, 0.3%
        with stochastic (docs/robustness.md). ``auto`` rounds a first moment whose decay is
        at most 15/16 (Adam's mu) to nearest all the same: it lags the gradient by at most
        2^-8 / (1 - decay) and never drifts, and its hash is a third of the dither's cost
        (docs/how-it-works.md, "The update"). f16 data rounds to nearest (stochastic needs
        bf16 data).
    statistics: current (each rescale point applies the exponent it measures), delayed
        (the entry function's top-level rescale points and FP8 amaxes apply the exponent the
        previous call measured and return theirs for the next: no data waits for a
        statistic, so a sharded step's statistics are independent all-reduces that XLA
        combines, one or two per step instead of a chain of one per statistic; the first
        call measures and applies, as ``current``) or auto (the default: delayed where the
        exported step is partitioned over several devices, where the chain is one
        all-reduce per statistic; current on one device, where it costs kernels, not
        latency, and the step keeps one program).
        ``compile_scaled`` carries the exponents in the bank of scales from one call to the
        next when a call's outputs are fed back.
    scale_packing: which scalar scale arithmetic ``simplify`` computes once into packed
        vectors that kernels read instead of recomputing it (``pack-scales``): arguments
        (the scales computed from the step's arguments alone: one kernel on XLA:GPU instead
        of a rank-0 kernel each), all (every scale epoch: XLA:CPU copies each chain into
        every fusion that uses it, and packed the 2-layer GPT step compiles about a fifth
        faster at the same step time, while on a GPU each pack is one more kernel; what
        ``for_target`` picks for XLA:CPU) or none (what it picks for TPUs, where XLA's cost
        model prices a pack above the scalars it replaces). Bit-exact either way.
    scale_pack_width: scalars per packed vector (``pack-width``, at least 2): XLA:CPU runs
        the concatenate of a wider one as a kernel per scalar, XLA:GPU as one kernel, so
        ``for_target`` gives GPUs 64 (the 2-layer GPT on an H100 target, delayed
        statistics: 189 -> 181 kernels) and everything else 8.
    group_statistics: take the statistics of a block that can be taken at one point in one
        row reduction (``simplify``'s ``group-statistics``): two kernels a group on XLA:GPU
        instead of one or two per statistic; XLA:TPU writes the concatenated rows out (a
        copy of every tensor it reads), so ``for_target`` turns it off on TPUs, which then
        take only the statistics of one tensor's slices together (``slice-statistics``: a
        fused qkv projection's three amaxes in one reduction that XLA:TPU fuses into the
        projection). Bit-exact for maxima; sums are regrouped (their last bits).
    vectorize_scalar_chains: in a step given the exponents of the call before (delayed
        statistics from the second call on), run the same chain of scalar ops on every
        element of a vector (those exponents, a statistics group's results) once on the
        vector (``simplify``'s ``vectorize``; ``for_target`` turns it on for GPUs). There
        the chains' results are handed on, not applied, and XLA:GPU compiled each chain into
        multi-output scalar kernels (GPT-2-small, H100 target: 917 -> 893 kernels, 108k ->
        87k HLO instructions). A step that applies what it measures is left as it is: XLA
        copies a scalar chain into the kernels that read it but runs each vector op as a
        kernel of its own (the default policy's 1-layer GPT on an H100 target: 246 -> 260).
        Bit-exact.
    join_gradients: in a data-parallel step (every gradient summed in full on every
        device), make every op that reads a gradient wait for all of them (``simplify``'s
        ``join-gradients``; bit-exact): XLA:GPU otherwise fuses update kernels into the
        backward pass and chains the gradients' all-reduces (2-layer GPT on 8 H100s,
        default policy: 6 all-reduces, 4 in a row -> 3, 2). ``for_target`` turns it off on
        TPUs, where it costs what it buys nothing for (v5e:2x4, 1-layer GPT, data parallel,
        XLA:TPU's estimate: 221,540 -> 294,724 cycles, 122 -> 138 fusions, the same two
        all-reduces).
    argument_scales: keep (the default: each argument enters as its data at a run-time
        scale) or fold (where the data dtype has f32's exponent range, float32 or bfloat16:
        each argument is multiplied by its scale on entry and the step runs on values at
        their original magnitude, without unit scaling's static shifts). Folded, the
        exponent arithmetic that carried the arguments' scales through the step is gone at
        rewrite time: the 2-layer GPT in f32 mode compiles for an H100 in 3.8 CPU s
        instead of 12.4 (the original: 3.1 s), with 3,088 optimized HLO instructions instead of
        5,471 (2,736; benchmarks/argument_scales.py). The price: a value ``data * scale``
        below f32's normal range is subnormal once folded, and XLA flushes it to zero, as the
        original step would; kept, the scale holds it (a user's scale of 2^-140).
        ``for_target`` folds on v6e only (targets/table.py says why).
    """

    data_dtype: str = "float16"
    fp8_dots: bool = True
    forward_format: str = "float8_e4m3fn"
    gradient_format: str = "float8_e5m2"
    fp8_scaling: str = "auto"
    min_dot_size: int = 0
    fp8_output_head: bool = False
    fp8_head_operands: str = "data"
    fp8_batched_dots: bool = True
    exclude: str = ""
    rescale_at: tuple[str, ...] | None = None
    rescale_method: str = "amax"
    scale_rounding: str = "nearest"
    square_dtype: str = "auto"
    square_encoding: str = "auto"
    square_rounding: str = "nearest"
    square_format: str = "none"
    moment_format: str = "none"
    moment_rounding: str = "stochastic"
    update_rounding: str = "auto"
    scale_packing: str = "arguments"
    scale_pack_width: int = 8
    statistics: str = "auto"
    group_statistics: bool = True
    vectorize_scalar_chains: bool = False
    join_gradients: bool = True
    argument_scales: str = "keep"

    def __post_init__(self) -> None:
        if self.rescale_at is None:
            default = (("gradients", "drifting-outputs") if self.data_dtype == "float16"
                       else ())
            object.__setattr__(self, "rescale_at", default)
        object.__setattr__(self, "rescale_at", tuple(self.rescale_at))
        if self.data_dtype not in _DATA_DTYPE_NAMES:
            raise ScalifyError(f"unsupported data_dtype '{self.data_dtype}' "
                               f"(use float32, bfloat16 or float16)")
        for name in (self.forward_format, self.gradient_format):
            if name not in _FP8_FORMAT_NAMES:
                raise ScalifyError(f"unsupported FP8 format '{name}' "
                                   f"(use float8_e4m3fn or float8_e5m2)")
        if self.fp8_head_operands not in _HEAD_OPERANDS:
            raise ScalifyError(f"unknown fp8_head_operands '{self.fp8_head_operands}' "
                               f"(use {' or '.join(_HEAD_OPERANDS)})")
        if self.fp8_scaling not in FP8_SCALINGS:
            raise ScalifyError(f"unknown fp8_scaling '{self.fp8_scaling}' "
                               f"(use {', '.join(FP8_SCALINGS)})")
        unknown = [p for p in self.rescale_at if p not in RESCALE_POINTS]
        if unknown:
            raise ScalifyError(f"unknown rescale point '{unknown[0]}' "
                               f"(use {', '.join(RESCALE_POINTS)})")
        if self.rescale_method not in RESCALE_METHODS:
            raise ScalifyError(f"unknown rescale method '{self.rescale_method}' (amax or rms)")
        if self.scale_rounding not in SCALE_ROUNDINGS:
            raise ScalifyError(f"unknown scale rounding '{self.scale_rounding}' (nearest or up)")
        if self.square_dtype != "auto" and self.square_dtype not in _DATA_DTYPE_NAMES:
            raise ScalifyError(f"unsupported square_dtype '{self.square_dtype}' "
                               f"(use auto, float32, bfloat16 or float16)")
        for field, name in (("square_format", self.square_format),
                            ("moment_format", self.moment_format)):
            if name != "none" and name not in _FP8_FORMAT_NAMES:
                raise ScalifyError(f"unsupported {field} '{name}' "
                                   f"(use none, float8_e4m3fn or float8_e5m2)")
        for field, choices in (("square_encoding", SQUARE_ENCODINGS),
                               ("square_rounding", SQUARE_ROUNDINGS),
                               ("moment_rounding", SQUARE_ROUNDINGS),
                               ("update_rounding", UPDATE_ROUNDINGS),
                               ("scale_packing", PACK_SCALES), ("statistics", STATISTICS),
                               ("argument_scales", ARGUMENT_SCALES)):
            if getattr(self, field) not in choices:
                raise ScalifyError(f"unknown {field} '{getattr(self, field)}' "
                                   f"(use {', '.join(choices)})")
        if self.min_dot_size < 0:
            raise ScalifyError("min_dot_size must be >= 0")
        if self.scale_pack_width < 2:
            raise ScalifyError("scale_pack_width must be >= 2")
        self.passes()  # what only the passes check (the exclude pattern) fails here too

    @classmethod
    def for_target(cls, name: str | None = None, **overrides: Any) -> Policy:
        """The policy for a chip (``scalify_hlo.targets.table.TARGETS``: ``v6e``, ``tpu7x``,
        ``h100``, ...; None: jax's default backend and device): the data type the chip
        computes in, FP8 dots only where it multiplies FP8 faster, on XLA:CPU every scale
        epoch packed (``scale_packing="all"``), and on GPUs delayed statistics (XLA:GPU
        splits a kernel at each statistic a value waits for). ``overrides`` set any other field
        (``Policy.for_target("h100", min_dot_size=2**20)``)."""
        from scalify_hlo.targets.table import default_target, target

        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ScalifyError(f"unknown policy field '{unknown[0]}' (use {', '.join(known)})")
        chosen = default_target() if name is None else target(name)
        # Every choice the target makes is a field of the same name (its name, platform and
        # reason are not).
        fields = {f.name: getattr(chosen, f.name) for f in dataclasses.fields(chosen)
                  if f.name in known}
        return cls(**(fields | overrides))

    def passes(self) -> list[ModulePass]:
        """The pass objects this policy runs, validated (``rewrite_module_source`` takes
        them as they are)."""
        passes: list[ModulePass] = [Inline()]
        if self.rescale_at:
            passes.append(Rescale(at=self.rescale_at, method=self.rescale_method,
                                  rounding=self.scale_rounding))
        square_dtype = ("auto" if self.square_dtype == "auto"
                        else _DATA_DTYPE_NAMES[self.square_dtype])
        passes.append(Scalify(data_dtype=_DATA_DTYPE_NAMES[self.data_dtype],
                              square_dtype=square_dtype, square_encoding=self.square_encoding,
                              square_rounding=self.square_rounding,
                              square_format=_STATE_FORMAT_NAMES[self.square_format],
                              moment_format=_STATE_FORMAT_NAMES[self.moment_format],
                              moment_rounding=self.moment_rounding,
                              update_rounding=self.update_rounding,
                              delayed_statistics=_DELAYED_MODE[self.statistics],
                              argument_scales=self.argument_scales))
        if self.fp8_dots:
            passes.append(Fp8Dots(forward_format=_FP8_FORMAT_NAMES[self.forward_format],
                                  gradient_format=_FP8_FORMAT_NAMES[self.gradient_format],
                                  scaling=self.fp8_scaling, min_size=self.min_dot_size,
                                  exclude=self.exclude,
                                  output_head="fp8" if self.fp8_output_head else "keep",
                                  head_operands=_HEAD_OPERANDS[self.fp8_head_operands],
                                  batched="fp8" if self.fp8_batched_dots else "keep",
                                  delayed_statistics=_DELAYED_MODE[self.statistics]))
        passes.append(Simplify(pack_scales=self.scale_packing,
                               pack_width=self.scale_pack_width,
                               group_statistics=self.group_statistics,
                               vectorize=self.vectorize_scalar_chains,
                               join_gradients=self.join_gradients))
        return passes

    def pipeline(self) -> str:
        """The passes as pipeline text, spelling out the data dtype, the FP8 formats and
        where, how and to what rescaling rounds even at their defaults, so that it reads in
        full (``scalify-hlo rewrite --help`` shows the default)."""
        return ",".join(p.text(_SPELLED_OUT.get(p.name, ())) for p in self.passes())


# Where rescale points take their exponent (Policy.statistics), and the passes' option for
# each (a delayed step's first program measures; compile_scaled builds the one that uses).
_DELAYED_MODE = {"auto": "auto", "current": "none", "delayed": "measure"}
STATISTICS = tuple(_DELAYED_MODE)

# Options the policy's pipeline text names even at their defaults.
_SPELLED_OUT = {"rescale": ("at", "method", "rounding"), "scalify": ("data-dtype",),
                "fp8-dots": ("forward-format", "gradient-format")}

# What the CLI runs without --pipeline: Policy()'s recipe, its statistics current, so that
# `run` and `compare` can run what `rewrite` wrote, partitioned or not.
DEFAULT_PIPELINE = Policy(statistics="current").pipeline()
