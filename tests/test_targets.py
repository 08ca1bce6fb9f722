"""Targets: the chip table behind Policy.for_target / compile_scaled(target=) / --target, and
(with the tpu-aot extra, libtpu) compiling rewritten steps for a TPU topology on this CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from scalify_hlo import Policy, compile_scaled
from scalify_hlo.errors import ScalifyError
from scalify_hlo.targets import table
from scalify_hlo.targets.collectives import serial_collectives
from scalify_hlo.targets.tpu import count_collectives, estimated_cycles, libtpu_available
from testdata import models
from tests.helpers import run_cli

needs_libtpu = pytest.mark.skipif(not libtpu_available(),
                                  reason="needs the tpu-aot extra (libtpu)")

# Per target: (data dtype, FP8 dots). The facts and their sources: docs/how-it-works.md.
EXPECTED = {
    "v5e": ("bfloat16", False), "v5p": ("bfloat16", False), "v6e": ("bfloat16", False),
    "tpu7x": ("bfloat16", True), "h100": ("float16", True), "h200": ("float16", True),
    "blackwell": ("float16", True), "ada": ("float16", True), "ampere": ("float16", False),
    "cpu": ("float16", True),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_policy_for_target_picks_the_chips_data_type_and_dots(name: str) -> None:
    policy = Policy.for_target(name)
    assert (policy.data_dtype, policy.fp8_dots) == EXPECTED[name]


def test_gpu_targets_and_tpu7x_delay_statistics() -> None:
    """On a GPU a statistic that a value waits for splits its kernel in two, so GPU targets
    delay them (statistics="delayed"), and so does tpu7x, whose FP8 operands' amaxes XLA's
    cost model prices lower delayed; the others delay them only on a partitioned step."""
    for name, info in table.TARGETS.items():
        expected = "delayed" if info.platform == "gpu" or name == "tpu7x" else "auto"
        assert Policy.for_target(name).statistics == expected, name
    assert Policy.for_target("h100", statistics="current").statistics == "current"


def test_compile_scaled_for_tpu7x_carries_delayed_exponents_between_calls() -> None:
    """The tpu7x policy (bf16 data, FP8 dots, delayed statistics, nothing packed) runs here
    too: its second call applies the exponents the first measured, and both stay within
    FP8's error of the step in f32."""
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    step = compile_scaled(fn, *args, target="tpu7x")
    assert "delayed-statistics=measure" in step.pipeline and step.delayed_text
    assert "xbf16>" in step.text and "f8E4M3FN" in step.text
    first = step(*args)
    again = step(first[0], *args[1:])  # the outputs fed back: the program that uses them
    reference = jax.jit(fn)
    want_first = reference(*args)
    want_again = reference(want_first[0], *args[1:])
    for got, want in ((first, want_first), (again, want_again)):
        loss, expected = float(got[1].unscale()), float(want[1])
        assert abs(loss - expected) <= 0.05 * abs(expected), (loss, expected)


def test_tpu7x_gpt_step_runs_on_this_cpu_with_its_head_in_f32() -> None:
    """The output head stays out of FP8 and produces f32; on TPU targets its bf16 operands
    are converted to f32 first (XLA:TPU folds the converts), without which XLA:CPU cannot
    run the step ("Unsupported element type for DotThunk": bf16 x bf16 -> f32). Both calls,
    the one that measures its exponents and the one given them, stay within FP8's error of
    the step in f32."""
    fn, args = models.gpt_step(1, 16, 2, 8, vocab=16, batch=2)
    step = compile_scaled(fn, *args, target="tpu7x")
    assert "head-operands=f32" in step.pipeline
    heads = [line for line in step.text.splitlines()
             if "stablehlo.dot_general" in line and "xf32>, tensor<" in line
             and "f8E" not in line]
    assert heads and not any("bf16>, tensor<" in line for line in heads)
    first = step(*args)
    again = step(first[0], first[1], *args[2:])  # params and optimizer state fed back
    reference = jax.jit(fn)
    want_first = reference(*args)
    want_again = reference(want_first[0], want_first[1], *args[2:])
    for got, want in ((first, want_first), (again, want_again)):
        loss, expected = float(got[2].unscale()), float(want[2])
        assert abs(loss - expected) <= 0.05 * abs(expected), (loss, expected)


def test_a_bf16_policy_runs_on_this_cpu_with_its_head_in_f32() -> None:
    """A policy of bf16 data named by hand (no target) gets the f32 head operands where jax
    runs on a CPU, so its step runs; one with the head in FP8 or f16 data is left alone."""
    fn, args = models.gpt_step(1, 16, 2, 8, vocab=16, batch=2)
    step = compile_scaled(fn, *args, policy=Policy(data_dtype="bfloat16"))
    assert "head-operands=f32" in step.pipeline
    loss, expected = float(step(*args)[2].unscale()), float(jax.jit(fn)(*args)[2])
    assert abs(loss - expected) <= 0.05 * abs(expected), (loss, expected)
    for policy in (Policy(data_dtype="bfloat16", fp8_output_head=True), Policy()):
        assert "head-operands" not in compile_scaled(fn, *args, policy=policy).pipeline


def test_a_bf16_pipeline_named_by_hand_runs_on_this_cpu() -> None:
    """The same for a pipeline string (a bf16 policy's, as a user copies it from
    ``Policy.pipeline()``): it failed at the first call with XLA:CPU's "Unsupported element
    type for DotThunk::Execute: BF16 x BF16 = F32". A pipeline that asks for f32 head
    operands, or that does not parse, is passed on unchanged."""
    fn, args = models.gpt_step(1, 16, 2, 8, vocab=16, batch=2)
    pipeline = Policy(data_dtype="bfloat16").pipeline()
    assert "head-operands" not in pipeline
    step = compile_scaled(fn, *args, pipeline=pipeline)
    assert "head-operands=f32" in step.pipeline
    loss, expected = float(step(*args)[2].unscale()), float(jax.jit(fn)(*args)[2])
    assert abs(loss - expected) <= 0.05 * abs(expected), (loss, expected)
    for unchanged in (Policy(data_dtype="bfloat16", fp8_output_head=True).pipeline(),
                      Policy().pipeline()):
        assert compile_scaled(fn, *args, pipeline=unchanged).pipeline == unchanged
    with pytest.raises(ScalifyError, match="data-dtype"):
        compile_scaled(fn, *args, pipeline="inline,scalify{data-dtype=nope},simplify")


def test_gpu_targets_keep_the_head_in_their_data_type() -> None:
    """XLA:GPU would run a head converted to f32 as an f32 GEMM: GPU targets keep it f16."""
    assert "head-operands" not in Policy.for_target("h100").pipeline()
    assert "head-operands=f32" in Policy.for_target("tpu7x").pipeline()


def test_only_tpu7x_keeps_batched_dots_out_of_fp8() -> None:
    """tpu7x's attention dots cost more in FP8 than in bf16 once their operands' casts are
    counted (XLA:TPU's estimates, targets/table.py): its policy keeps dots with batch
    dimensions in bf16. Every other FP8 target casts them."""
    assert "batched=keep" in Policy.for_target("tpu7x").pipeline()
    for name in ("h100", "ada", "blackwell", "cpu"):
        assert "batched" not in Policy.for_target(name).pipeline(), name
    assert "batched" not in Policy().pipeline()


def test_compile_scaled_for_a_gpu_carries_delayed_exponents_between_calls() -> None:
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    step = compile_scaled(fn, *args, target="h100")
    assert "delayed-statistics=measure" in step.pipeline and step.delayed_text
    first = step(*args)
    again = step(first[0], *args[1:])  # the outputs fed back: the program that uses them
    assert jnp.isfinite(again[1].unscale())


def test_compile_scaled_for_a_gpu_takes_a_function_with_one_delayed_point() -> None:
    """A layer norm and a dot (inference, no gradients): scalify's one delayed point, then
    fp8-dots' two. The second pass's longer vector once left scalify's read of the first
    (a reshape of the vector of one) invalid: an internal error for any such function."""
    def layer_norm_dot(x: jax.Array, w: jax.Array) -> jax.Array:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return ((x - mean) * jax.lax.rsqrt(var + 1e-5)) @ w

    x = jax.random.normal(jax.random.key(0), (4, 16))
    w = jax.random.normal(jax.random.key(1), (16, 8)) / 4
    step = compile_scaled(layer_norm_dot, x, w, target="h100")
    step(x, w)
    out = step(x, w)  # the program that applies the first call's exponents
    assert jnp.allclose(out.unscale(), layer_norm_dot(x, w), atol=0.2)


def test_bf16_targets_do_not_rescale_like_f16() -> None:
    # Rescale points are for f16's 5-bit exponent; bf16 data keeps f32's range.
    assert Policy.for_target("v6e").rescale_at == ()
    assert "rescale" not in Policy.for_target("tpu7x").pipeline()
    assert "fp8-dots" in Policy.for_target("tpu7x").pipeline()
    assert "fp8-dots" not in Policy.for_target("v5e").pipeline()


def test_topology_names_and_case_name_their_chip() -> None:
    assert table.target("v5e:2x4").name == "v5e"
    assert table.target("TPU7x").name == "tpu7x"


def test_overrides_and_bad_names_are_one_line_errors() -> None:
    assert Policy.for_target("h100", min_dot_size=64).min_dot_size == 64
    with pytest.raises(ScalifyError, match="unknown target 'v9z'"):
        Policy.for_target("v9z")
    with pytest.raises(ScalifyError, match="unknown policy field 'data_type'"):
        Policy.for_target("v6e", data_type="float16")


@pytest.mark.parametrize(("capability", "kind", "name"), [
    ("8.9", "NVIDIA L4", "ada"), ("9.0", "NVIDIA H100 80GB HBM3", "h100"),
    ("9.0", "NVIDIA H200", "h200"), ("10.0", "NVIDIA B200", "blackwell"),
    ("12.0", "NVIDIA GeForce RTX 5090", "blackwell"), ("8.0", "NVIDIA A100-SXM4-80GB", "ampere"),
    ("7.0", "Tesla V100", "gpu"), (None, "AMD Instinct MI300X", "gpu"),
])
def test_gpu_target_follows_the_compute_capability(capability: str | None, kind: str,
                                                   name: str) -> None:
    assert table.gpu_target(kind, capability).name == name


@pytest.mark.parametrize(("kind", "name"), [
    ("TPU v5 lite", "v5e"), ("TPU v5", "v5p"), ("TPU v6 lite", "v6e"), ("TPU7x", "tpu7x"),
    ("TPU v9", "tpu")])
def test_tpu_target_follows_the_device_kind(kind: str, name: str) -> None:
    assert table.tpu_target(kind).name == name


def test_default_target_is_the_backends_and_keeps_the_default_policy_on_cpu() -> None:
    assert jax.default_backend() == "cpu"
    assert table.default_target().name == "cpu"
    assert Policy.for_target() == Policy(scale_packing="all")  # only how scales are packed
    assert Policy.for_target().pipeline().endswith(",simplify{pack-scales=all}")
    assert Policy.for_target("h100").scale_packing == Policy().scale_packing == "arguments"
    with pytest.raises(ScalifyError, match="unknown scale_packing 'some'"):
        Policy(scale_packing="some")


def test_gpu_targets_pack_scales_wider() -> None:
    """XLA:GPU computes a pack of up to about 80 scalars in one kernel, XLA:CPU one of more
    than 8 in a kernel per scalar: GPUs get 64 to a vector, the others the default 8."""
    for name, t in table.TARGETS.items():
        assert t.scale_pack_width == (64 if t.platform == "gpu" else 8), name
    assert Policy.for_target("h100").pipeline().endswith(
        ",simplify{pack-width=64 vectorize=true}")
    assert Policy().scale_pack_width == 8
    with pytest.raises(ScalifyError, match="scale_pack_width must be >= 2"):
        Policy(scale_pack_width=1)


def test_tpu_targets_take_statistics_apart() -> None:
    """XLA:TPU writes group-statistics' concatenated rows out (a copy of every tensor they
    read): TPU targets turn grouping off, the other targets keep it."""
    for name, t in table.TARGETS.items():
        assert t.group_statistics == (t.platform != "tpu"), name
    assert Policy.for_target("v6e").pipeline().endswith(
        ",simplify{pack-scales=none group-statistics=false join-gradients=false}")
    assert Policy().group_statistics and "group-statistics" not in Policy().pipeline()
    text = Policy.for_target("tpu7x").pipeline()
    assert "simplify{pack-scales=none group-statistics=false join-gradients=false}" in text
    assert Policy.for_target("tpu7x", group_statistics=True).pipeline().endswith(
        "simplify{pack-scales=none join-gradients=false}")
    listed = run_cli("targets")
    assert listed.returncode == 0, listed.stderr
    lines = {line.partition(":")[0]: line for line in listed.stdout.splitlines()}
    assert "auto statistics, not grouped, scales not packed:" in lines["v5e"]
    assert "not grouped" not in lines["h100"] and "not grouped" not in lines["cpu"]
    assert "every scale epoch packed:" in lines["cpu"] and "packed" not in lines["h100"]


def _assert_bit_identical(got_outputs: object, want_outputs: object) -> None:
    """Two steps' outputs, every leaf (data and scales) equal bit for bit."""
    got, want = jax.tree.leaves(got_outputs), jax.tree.leaves(want_outputs)
    assert len(got) == len(want) > 2
    assert all(jnp.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_cpu_target_packs_every_scale_epoch_and_computes_the_same_step() -> None:
    """On XLA:CPU every epoch is packed (faster compiles): the step is bit for bit the
    default policy's, and its module has a pack per epoch, not only the arguments'."""
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    on_cpu = compile_scaled(fn, *args)
    default = compile_scaled(fn, *args, policy=Policy())
    assert on_cpu.text.count("optimization_barrier") > default.text.count(
        "optimization_barrier") >= 1
    _assert_bit_identical(on_cpu(*args), default(*args))


def test_only_tpu_targets_leave_gradients_unjoined() -> None:
    """join-gradients keeps XLA:GPU from chaining a data-parallel step's gradient
    all-reduces; on a TPU it costs estimated cycles and buys nothing (policy.py)."""
    for name, t in table.TARGETS.items():
        assert t.join_gradients == (t.platform != "tpu"), name
    assert "join-gradients=false" in Policy.for_target("v5e").pipeline()
    assert "join-gradients" not in Policy.for_target("h100").pipeline()
    assert "join-gradients" not in Policy().pipeline()


def test_tpu_targets_pack_no_scales_and_compute_the_same_step() -> None:
    """XLA:TPU's cost model prices the packs (a vector kernel the scalars wait for) above
    the scalars they replace: TPU targets pack nothing; the step is bit for bit the one
    with the argument epoch packed."""
    for name, t in table.TARGETS.items():
        assert (t.scale_packing == "none") == (t.platform == "tpu"), name
    assert "pack-scales=none" in Policy.for_target("v5e").pipeline()
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    unpacked = compile_scaled(fn, *args, target="v5e")
    packed = compile_scaled(fn, *args, policy=Policy.for_target(
        "v5e", scale_packing="arguments"))
    assert "optimization_barrier" not in unpacked.text
    assert "optimization_barrier" in packed.text
    _assert_bit_identical(unpacked(*args), packed(*args))


def test_v6e_folds_the_scales_it_is_given() -> None:
    """v6e multiplies each argument by its scale on entry (its compile time grows with the
    exponent arithmetic in its kernels): no exponent is read or built in its step, which
    trains as the step that keeps its scales does; the other targets keep theirs."""
    for name, t in table.TARGETS.items():
        assert (t.argument_scales == "fold") == (name == "v6e"), name
    assert "argument-scales=fold" in Policy.for_target("v6e").pipeline()
    lines = {line.partition(":")[0]: line for line in run_cli("targets").stdout.splitlines()}
    assert "arguments' scales folded:" in lines["v6e"] and "folded" not in lines["v5e"]
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    folded = compile_scaled(fn, *args, target="v6e")
    kept = compile_scaled(fn, *args, policy=Policy.for_target("v6e", argument_scales="keep"))
    assert "shift_left" not in folded.text and "shift_left" in kept.text
    state = {"folded": folded.scale_args(*args), "kept": kept.scale_args(*args)}
    for _ in range(3):
        losses = {}
        for mode, step in (("folded", folded), ("kept", kept)):
            params, loss = step(*state[mode])
            state[mode] = (params, *state[mode][1:])
            losses[mode] = float(loss.unscale())
        assert losses["folded"] == pytest.approx(losses["kept"], rel=2e-2)


def test_tpu7x_fences_its_statistics_as_scalars_and_computes_the_same_step() -> None:
    """XLA:TPU copies each element of a vector out in a kernel of slices: where nothing is
    packed, the statistics a delayed step hands on go through its barrier as scalars, and
    the step is bit for bit the one with them packed."""
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    scalars = compile_scaled(fn, *args, target="tpu7x")
    packed = compile_scaled(fn, *args, policy=Policy.for_target(
        "tpu7x", scale_packing="arguments"))
    barriers = [line for line in scalars.delayed_text.splitlines()
                if "optimization_barrier" in line]
    assert len(barriers) == 1 and ": tensor<f32>, tensor<f32>, tensor<f32> " in barriers[0]
    assert "tensor<3xf32> loc" in packed.delayed_text
    first, first_packed = scalars(*args), packed(*args)
    _assert_bit_identical(first, first_packed)
    _assert_bit_identical(scalars(first[0], *args[1:]), packed(first_packed[0], *args[1:]))


def test_tpu7x_takes_a_fused_projections_pieces_in_one_reduction() -> None:
    """A GPT's fused qkv projection sliced into q, k and v: on tpu7x the three amaxes are
    one reduction of the projection (slice-statistics), whose vector goes through the
    delayed step's barrier whole. (Structure; the maxima are checked bit for bit in
    test_slice_statistics.) q, k and v are FP8 operands of attention's dots, which tpu7x's
    own policy keeps in bf16 (fp8_batched_dots): asked to cast them, it measures them."""
    fn, args = models.gpt_step(1, 16, 2, 8, vocab=16, batch=2)
    step = compile_scaled(fn, *args, policy=Policy.for_target("tpu7x", fp8_batched_dots=True))
    barrier = next(line for line in step.delayed_text.splitlines()
                   if "optimization_barrier" in line)
    assert "tensor<3xf32>" in barrier, barrier
    assert "tensor<3xf32>" not in compile_scaled(fn, *args, policy=Policy.for_target(
        "tpu7x", fp8_batched_dots=True, group_statistics=True)).delayed_text


def test_compile_scaled_with_a_target_rewrites_for_its_data_type() -> None:
    fn, args = models.mlp_step(batch=4, sizes=(8, 16, 4))
    step = compile_scaled(fn, *args, target="v6e")
    assert "xbf16>" in step.text and "xf16>" not in step.text and "f8E" not in step.text
    params, loss = step(*args)
    assert jnp.isfinite(loss.unscale())
    with pytest.raises(ScalifyError, match="not both"):
        compile_scaled(fn, *args, target="v6e", policy=Policy())


DOT = """func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
"""


def test_cli_rewrite_target() -> None:
    tpu7x = run_cli("rewrite", "--target", "tpu7x", "-", stdin=DOT)
    assert tpu7x.returncode == 0, tpu7x.stderr
    assert "bf16" in tpu7x.stdout and "f8E4M3FN" in tpu7x.stdout
    # A module the CLI writes stands alone: current statistics, also for a GPU and a
    # partitioned module (compile_scaled delays them there).
    partitioned = "module attributes {mhlo.num_partitions = 2 : i32} {\n" + DOT + "}\n"
    h100 = run_cli("rewrite", "--target", "h100", "-", stdin=partitioned)
    assert h100.returncode == 0, h100.stderr
    assert "f8E4M3FN" in h100.stdout and "delayed_exponents" not in h100.stdout
    bad = run_cli("rewrite", "--target", "v9z", "-", stdin=DOT)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: unknown target 'v9z'"), bad.stderr


TRIPS = 'backend_config={"known_trip_count":{"n":"4"}}'
# A while loop of 4 trips around a fusion of 10 cycles, a fusion of 7 outside, an all-reduce
# of a scalar and one of a vector (the optimized HLO's text, as XLA:TPU prints it).
HLO = """HloModule m

%fused (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %n = f32[] negate(%p), backend_config={"estimated_cycles":"999"}
}

%body (t: (s32[], f32[])) -> (s32[], f32[]) {
  %t = (s32[], f32[]) parameter(0)
  %f = f32[] fusion(%t), kind=kLoop, calls=%fused, backend_config={"estimated_cycles":"10"}
  ROOT %r = (s32[], f32[]) tuple(%t, %f)
}

%cond (t: (s32[], f32[])) -> pred[] {
  %t = (s32[], f32[]) parameter(0)
  ROOT %c = pred[] fusion(%t), kind=kLoop, calls=%fused, backend_config={"estimated_cycles":"1"}
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %w = (s32[], f32[]) while(%a), condition=%cond, body=%body, """ + TRIPS + """
  %s = f32[]{:T(128)} all-reduce-start(%a), to_apply=%fused
  %d = f32[]{:T(128)} all-reduce-done(%s)
  %v = f32[8]{0} all-reduce(%a), to_apply=%fused
  ROOT %x = f32[8] fusion(%a), kind=kLoop, calls=%fused, backend_config={"estimated_cycles":"7"}
}
"""


def test_estimated_cycles_weight_loop_bodies_by_their_trip_count() -> None:
    # body 4 x 10, condition 5 x 1, entry 7; the fused computation's own 999 is not a kernel.
    assert estimated_cycles(HLO) == (52, 0)
    unknown = HLO.replace(", " + TRIPS, "")
    assert estimated_cycles(unknown) == (18, 1)


def test_collectives_count_async_pairs_once_and_scalars_apart() -> None:
    assert count_collectives(HLO) == {"all-reduce": 2, "all-reduce (scalar)": 1}


# Two all-reduces that do not wait for each other, then one that waits for both (through a
# fusion), and an async pair that waits for that one: a chain of three.
CHAINED = """HloModule m

ENTRY %main (a: f32[8]) -> f32[] {
  %a = f32[8] parameter(0)
  %r1 = f32[] all-reduce(%a), to_apply=%add
  %r2 = f32[] all-reduce(%a), to_apply=%add
  %f = f32[] fusion(%r1, %r2), kind=kLoop, calls=%fused
  %r3 = (f32[], f32[]) all-reduce(%f, %r1), to_apply=%add
  %g = f32[] get-tuple-element(%r3), index=0
  %s = f32[] all-reduce-start(%g), to_apply=%add
  ROOT %d = f32[] all-reduce-done(%s)
}
"""


def test_serial_collectives_is_the_longest_chain_of_collectives() -> None:
    assert serial_collectives(CHAINED) == 3
    assert serial_collectives(HLO) == 1  # the loop's body is not followed
    assert serial_collectives("HloModule m") == 0


@needs_libtpu
def test_rewritten_mlp_step_compiles_for_v6e_2x2() -> None:
    from scalify_hlo.targets import tpu

    fn, args = models.mlp_step(batch=8, sizes=(32, 64, 10))
    policy = Policy.for_target("v6e:2x2")
    assert (policy.data_dtype, policy.fp8_dots) == ("bfloat16", False)
    step = compile_scaled(fn, *args, policy=policy)
    result = tpu.compile_module(step.text, "v6e:2x2")
    assert result.device_kind == "TPU v6 lite"
    assert result.estimated_cycles > 0 and result.fusions > 0
    assert result.argument_bytes > 0


@needs_libtpu
def test_data_parallel_step_compiles_for_a_v6e_2x2_mesh_with_one_gradient_all_reduce() -> None:
    from jax.sharding import NamedSharding, PartitionSpec

    from scalify_hlo.api import rewrite_text
    from scalify_hlo.targets import tpu

    fn, args = models.mlp_step(batch=8, sizes=(32, 64, 10))
    mesh = tpu.mesh("v6e:2x2")
    batch, whole = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh,
                                                                            PartitionSpec())
    params, x, y = args
    specs = (jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype, sharding=whole),
                          params),
             jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=batch),
             jax.ShapeDtypeStruct(y.shape, y.dtype, sharding=batch))
    text = jax.jit(fn).lower(*specs).as_text(debug_info=True)
    scaled = tpu.compile_module(rewrite_text(text, Policy.for_target("v6e").pipeline()),
                                "v6e:2x2")
    assert scaled.collectives.get("all-reduce", 0) >= 1
