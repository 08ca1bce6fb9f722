"""Which data type and dots each chip gets: the target table behind ``Policy.for_target``.

A target is a chip family. Its data type is the 16-bit type the chip computes in (bf16 on
TPUs, where f16 is not an arithmetic type and f16 data costs a convert at every op; f16 on
GPUs, whose 5-bit exponent the scales make room for and whose extra mantissa bits are free),
and FP8 dots are on only where the chip multiplies FP8 faster than 16-bit: elsewhere they
cost the casts and clamps and gain nothing. The sources of each fact are in
docs/how-it-works.md ("Targets").
"""

from __future__ import annotations

from dataclasses import dataclass

from scalify_hlo.errors import ScalifyError


@dataclass(frozen=True)
class Target:
    """One chip family: what the rewrite gives it and why (``reason``, one line)."""

    name: str
    platform: str  # the jax backend that runs it: tpu, gpu or cpu
    data_dtype: str
    fp8_dots: bool
    reason: str
    # Which scale arithmetic simplify packs (Policy.scale_packing): every epoch on XLA:CPU,
    # which copies each scalar chain into every fusion that reads it (a pack costs a kernel
    # on accelerators, nothing that matters on a CPU, and shortens XLA:CPU's compile); the
    # argument epoch on GPUs, where it saves a rank-0 kernel per value; none on TPUs, where
    # the packs only cost (2-layer GPT, target policy, XLA:TPU's estimates: v6e 513,934 ->
    # 482,028 cycles, 225 -> 210 fusions; tpu7x 850,665 -> 816,119, 429 -> 414; GPT-2-small
    # on tpu7x 14.22M -> 14.12M cycles, 2224 -> 2179 fusions; benchmarks/tpu.py).
    scale_packing: str = "arguments"
    # Scalars per packed vector (Policy.scale_pack_width): XLA:GPU computes a pack of up to
    # about 80 in one kernel, XLA:CPU a pack of more than 8 in a kernel per scalar (the
    # 1-layer GPT, f32 mode: 183 -> 239 XLA:CPU fusions at 64; on an H100 target, delayed
    # statistics: 111 -> 105). (TPUs pack nothing.)
    scale_pack_width: int = 8
    # Where rescale points take their exponent (Policy.statistics): delayed on GPUs, where a
    # statistic that waits for its data splits a kernel in two (on an H100 target, GPT-2-small:
    # 933 fusions against 2266, FP8 floor 737; benchmarks/gpu_statistics.py), and on tpu7x,
    # whose FP8 operands' amaxes are its statistics (scales not packed, XLA:TPU's estimates
    # for the module a loop runs from its second call: GPT-2-small 14.12M -> 13.54M cycles,
    # 1.20x -> 1.15x the bf16 step's, 2179 -> 2056 fusions; 2 layers 816,119 -> 769,337);
    # auto elsewhere (delayed only on a partitioned step: XLA:CPU copies the delayed
    # exponents' chains into every fusion, 2.5x the optimized HLO; bf16 data without FP8
    # dots, the other TPUs', has no run-time statistic).
    statistics: str = "auto"
    # Whether simplify takes a block's statistics in one row reduction (Policy.
    # group_statistics): XLA:GPU runs a group as two kernels; XLA:TPU writes the concatenated
    # rows out, a copy of every tensor they read (tpu7x, 2-layer GPT, target policy: 902,852
    # estimated cycles grouped, 850,665 not; benchmarks/tpu.py).
    group_statistics: bool = True
    # Whether simplify runs the same scalar chain on every element of a vector once on the
    # vector in a step given its exponents (Policy.vectorize_scalar_chains): with delayed
    # statistics (GPUs) those chains' results are handed on, not applied, and GPT-2-small on
    # an H100 target drops 917 -> 893 kernels.
    vectorize_scalar_chains: bool = False
    # Whether simplify makes a data-parallel step's update wait for every gradient
    # (Policy.join_gradients): XLA:GPU otherwise fuses update kernels into the backward pass
    # and chains the gradients' all-reduces (2-layer GPT on 8 H100s: 6 all-reduces, 4 in a
    # row -> 3, 2); on a TPU it buys nothing and costs a third more estimated cycles (v5e:2x4,
    # 1-layer GPT: 221,540 -> 294,724, the same two all-reduces).
    join_gradients: bool = True
    # What the step does with the scales it is given (Policy.argument_scales): fold them into
    # the bf16 data on entry on v6e, whose compiler's time grows with the exponent
    # arithmetic in its kernels (2-layer GPT, XLA:TPU: compile 1.40x -> 1.28x the bf16
    # step's, 0.96x -> 0.99x its estimated cycles, 1.12x -> 1.16x its fusions; GPT-2-small
    # 1.28x -> 1.18x, 0.86x -> 0.87x, 1.09x -> 1.14x; benchmarks/tpu.py). Kept elsewhere:
    # on v5e the same fold costs 11 fusions and no time, on tpu7x 5% more cycles and 12
    # fusions (1.20x -> 1.24x the bf16 step's), and f16 data needs its scales for range.
    argument_scales: str = "keep"
    # The operands of the output head's dots, which stay out of FP8 and produce f32
    # (Policy.fp8_head_operands): f32 on TPUs, bf16 converted, which XLA:TPU folds into the
    # dot (tpu7x: the same estimated cycles and fusions, 752,457 and 385 for the 2-layer
    # GPT, 13,245,252 and 2020 for GPT-2-small) and without which XLA:CPU cannot run the
    # step (no bf16 x bf16 -> f32 dot); the data dtype on GPUs, where XLA:GPU would run the
    # converted dot as an f32 GEMM.
    fp8_head_operands: str = "data"
    # Whether dots with batch dimensions are FP8 too (Policy.fp8_batched_dots): not on tpu7x,
    # where attention's FP8 dots cost more than they gain (XLA:TPU's estimates, GPT-2-small
    # shape: its FP8 dots 1.02M cycles against 0.98M in bf16, plus 1.45M to cast its
    # [8,12,256,256] operands; without them the step's 13.91M -> 12.26M cycles, 1.18x ->
    # 1.04x the bf16 step's, 2020 -> 1976 fusions; 2 layers 766,634 -> 704,725, 385 -> 376).
    # XLA:TPU compiles that step more slowly: 71 s against 63, alternating on this machine.
    fp8_batched_dots: bool = True


# What every GPU target gets beyond its data type and dots (the fields' comments say why).
_GPU = {"statistics": "delayed", "scale_pack_width": 64, "vectorize_scalar_chains": True}
# What every TPU target gets beyond its data type and dots.
_TPU = {"group_statistics": False, "scale_packing": "none", "join_gradients": False,
        "fp8_head_operands": "float32"}
_BF16_INT8_MXU = "bf16 and int8 MXU; XLA's cost model prices an FP8 dot as a bf16 one"

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("v4", "tpu", "bfloat16", False, "TPU v4: bf16 MXU, no FP8 arithmetic", **_TPU),
    Target("v5e", "tpu", "bfloat16", False, f"TPU v5e: {_BF16_INT8_MXU}", **_TPU),
    Target("v5p", "tpu", "bfloat16", False, f"TPU v5p: {_BF16_INT8_MXU}", **_TPU),
    Target("v6e", "tpu", "bfloat16", False, f"TPU v6e (Trillium): {_BF16_INT8_MXU}", **_TPU,
           argument_scales="fold"),
    Target("tpu7x", "tpu", "bfloat16", True,
           "TPU7x (Ironwood): FP8 MXU at twice the bf16 rate", **_TPU, statistics="delayed",
           fp8_batched_dots=False),
    Target("tpu", "tpu", "bfloat16", False, "a TPU this table does not know: bf16, no FP8",
           **_TPU),
    Target("ada", "gpu", "float16", True,
           "NVIDIA Ada (sm_89: L4, L40, RTX 40xx): FP8 tensor cores; XLA emits cuBLASLt FP8 "
           "GEMMs from compute capability 8.9", **_GPU),
    Target("h100", "gpu", "float16", True, "NVIDIA H100 (sm_90): FP8 tensor cores",
           **_GPU),
    Target("h200", "gpu", "float16", True, "NVIDIA H200 (sm_90): FP8 tensor cores",
           **_GPU),
    Target("blackwell", "gpu", "float16", True,
           "NVIDIA Blackwell (sm_100, sm_120: B200, GB200, RTX 50xx): FP8 tensor cores",
           **_GPU),
    Target("ampere", "gpu", "float16", False,
           "NVIDIA Ampere (sm_80, sm_86: A100, A10, RTX 30xx): no FP8 tensor cores; XLA runs "
           "FP8 dots as f16/bf16 dots", **_GPU),
    Target("gpu", "gpu", "float16", False,
           "a GPU without FP8 tensor cores (compute capability below 8.9), or not NVIDIA",
           **_GPU),
    Target("cpu", "cpu", "float16", True,
           "XLA:CPU: emulates FP8 (f32 dots), so FP8 dots here preview an FP8 chip's numerics; "
           "the default policy's numerics, every scale epoch packed (faster XLA:CPU compiles)",
           scale_packing="all"),
)}

# jax device_kind of each TPU (what a TPU VM's jax.devices()[0].device_kind says).
_TPU_KINDS = {"TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5e": "v5e", "TPU v5": "v5p",
              "TPU v5p": "v5p", "TPU v6 lite": "v6e", "TPU v6e": "v6e", "TPU7x": "tpu7x"}
# NVIDIA compute capability (major, minor) from which each GPU target applies, newest first.
_GPU_CAPABILITIES = ((10, 0, "blackwell"), (9, 0, "h100"), (8, 9, "ada"))


def target(name: str) -> Target:
    """The target called ``name`` (case-insensitive; a TPU topology such as ``v5e:2x4``
    names its chip); a one-line error naming the known ones otherwise."""
    chip = name.strip().lower().partition(":")[0]
    if chip not in TARGETS:
        raise ScalifyError(f"unknown target '{name}' (use {', '.join(TARGETS)})")
    return TARGETS[chip]


def tpu_target(device_kind: str) -> Target:
    """The target of a TPU by its jax ``device_kind``."""
    return TARGETS[_TPU_KINDS.get(device_kind.strip(), "tpu")]


def gpu_target(device_kind: str, compute_capability: str | None) -> Target:
    """The target of a GPU by its device kind (H200 apart) and NVIDIA compute capability
    (``"9.0"``); a GPU without one (ROCm) gets the generic GPU target."""
    if "H200" in device_kind.upper():
        return TARGETS["h200"]
    try:
        major, minor = (int(p) for p in str(compute_capability).split(".")[:2])
    except ValueError:
        return TARGETS["gpu"]
    for need_major, need_minor, name in _GPU_CAPABILITIES:
        if (major, minor) >= (need_major, need_minor):
            return TARGETS[name]
    return TARGETS["ampere"] if (major, minor) >= (8, 0) else TARGETS["gpu"]


def default_target() -> Target:
    """The target of jax's default backend and its first device."""
    import jax

    backend = jax.default_backend()
    if backend == "tpu":
        return tpu_target(jax.devices()[0].device_kind)
    if backend in ("gpu", "cuda", "rocm"):
        device = jax.devices()[0]
        return gpu_target(device.device_kind, getattr(device, "compute_capability", None))
    return TARGETS["cpu"]
