"""The deviceless H100 compile (``scalify_hlo.gpu_aot``): FP8 dots of the rewrite become
cuBLASLt FP8 GEMMs on the H100 target. Skipped without the ``gpu-aot`` extra, except the
missing-extra error, which is checked everywhere."""

from __future__ import annotations

import pytest

from scalify_hlo import gpu_aot
from scalify_hlo.api import rewrite_text
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import DEFAULT_PIPELINE
from tests.helpers import backward_dots_module

needs_extra = pytest.mark.skipif(not gpu_aot.available(),
                                 reason="the gpu-aot extra is not installed")

# A forward dot and its two backward dots (named as JAX names them, so that the default
# policy gives the gradients E5M2), at sizes cuBLASLt's FP8 GEMMs accept (multiples of 16).
_BACKWARD = backward_dots_module(batch=32, d_in=64, d_out=32)


@needs_extra
def test_rewritten_fp8_dots_become_cublaslt_fp8_gemms() -> None:
    rewritten = rewrite_text(_BACKWARD, DEFAULT_PIPELINE)
    assert rewritten.count("f8E") > 0
    compiled = gpu_aot.compile_h100(rewritten)
    assert compiled.cublas_f8 == 3, compiled.custom_calls
    assert compiled.fusions > 0 and compiled.instructions > compiled.fusions
    assert compiled.compile_s > 0


@needs_extra
def test_original_dots_are_not_fp8_gemms() -> None:
    compiled = gpu_aot.compile_h100(_BACKWARD)
    assert compiled.cublas_f8 == 0 and sum(compiled.custom_calls.values()) == 3


@needs_extra
def test_bad_module_is_a_one_line_error() -> None:
    with pytest.raises(ScalifyError, match="cannot parse the module") as info:
        gpu_aot.compile_h100("func.func @main( {")
    assert "\n" not in str(info.value)


# A sum over a tensor sharded 8 ways (what jax.jit of a sharded step lowers to).
_SHARDED_SUM = """
module @sharded attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @main(%arg0: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
      -> (tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>}) {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %sum = stablehlo.reduce(%arg0 init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
    return %sum : tensor<f32>
  }
}
"""


@needs_extra
def test_a_partitioned_module_compiles_for_as_many_h100s() -> None:
    compiled = gpu_aot.compile_h100(_SHARDED_SUM)
    assert "all-reduce" in compiled.hlo_text
    assert "f32[8]" in compiled.hlo_text  # each GPU sums its shard of 8


def test_missing_extra_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_aot, "available", lambda: False)
    gpu_aot.h100_topology.cache_clear()
    try:
        with pytest.raises(ScalifyError, match=r"needs the gpu-aot extra: pip install"):
            gpu_aot.compile_h100(_BACKWARD)
    finally:
        gpu_aot.h100_topology.cache_clear()


def test_count_hlo_counts_instructions_fusions_and_fp8_gemms() -> None:
    text = """HloModule m

%fused (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %n = f32[] negate(%p)
}

ENTRY %main (a: f8e4m3fn[16,16], b: f8e4m3fn[16,16], s: f32[]) -> f32[16,16] {
  %a = f8e4m3fn[16,16]{1,0} parameter(0)
  %b = f8e4m3fn[16,16]{1,0} parameter(1)
  %s = f32[] parameter(2)
  %f = f32[] fusion(%s), kind=kLoop, calls=%fused
  %g = (f32[16,16], s8[0]) custom-call(%a, %b, %f), custom_call_target="__cublas$lt$matmul$f8"
  ROOT %r = f32[16,16]{1,0} get-tuple-element(%g), index=0
}
"""
    counts = gpu_aot.count_hlo(text)
    assert (counts.instructions, counts.rank0_instructions, counts.fusions,
            counts.cublas_f8) == (8, 4, 1, 1)


def test_a_missing_plugin_package_reads_as_not_installed() -> None:
    """Without the extra there is no ``jax_plugins`` package at all, and find_spec of a name
    under it raises instead of returning None (collection of this file crashed in CI)."""
    assert gpu_aot._installed("no_such_package_here.xla_cuda12") is False
    assert gpu_aot._installed("json") is True
