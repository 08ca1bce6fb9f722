"""``benchmarks/xla_compile_time.py`` reads XLA's own timers from a compile's log and sizes
the kernels of the optimized HLO; both are parsed from text, checked here on small samples
(the compile itself needs the gpu-aot extra and runs in the benchmark)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.helpers import REPO_ROOT, import_benchmark

SCRIPT = REPO_ROOT / "benchmarks" / "xla_compile_time.py"

# Lines as XLA logs them (TF_CPP_VMODULE=gpu_compiler=1,hlo_pass_pipeline=1): a GPU compile
# on thread 7, and a CPU compile's pass on thread 9 that must not be counted.
LOG = """\
I1128 05:27:24.186301   9 hlo_pass_pipeline.cc:176] HLO pass: priority-fusion time: 3 s (3 s)
I1128 05:27:30.000000   7 hlo_pass_pipeline.cc:176] HLO pass: priority-fusion time: 1.5 s (1.5 s)
I1128 05:27:31.000000   7 hlo_pass_pipeline.cc:176] HLO pass: priority-fusion time: 500 ms (2 s)
I1128 05:27:31.100000   7 hlo_pass_pipeline.cc:176] HLO pass: dce time: 40 us (40 us)
I1128 05:27:49.443750   7 gpu_compiler.cc:2152] GpuCompiler::RunHloPasses for jit_step \
time: 20.7 s (20652505 us)
I1128 05:27:55.000000   7 gpu_compiler.cc:2200] GpuCompiler::RunBackend for jit_step \
time: 81.8 ms (81790 us)
"""

HLO = """\
HloModule jit_step

%fused_add (param_0: f32[4], param_1: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  %param_1 = f32[4]{0} parameter(1)
  ROOT %add = f32[4]{0} add(%param_0, %param_1)
}

%fused_negate (param_0.1: f32[4]) -> f32[4] {
  %param_0.1 = f32[4]{0} parameter(0)
  ROOT %negate = f32[4]{0} negate(%param_0.1)
}

ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %loop_add_fusion = f32[4]{0} fusion(%a, %b), kind=kLoop, calls=%fused_add
  ROOT %loop_negate_fusion = f32[4]{0} fusion(%loop_add_fusion), kind=kLoop, calls=%fused_negate
}
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return import_benchmark("xla_compile_time")


def test_phase_times_read_the_gpu_compile_thread(script: ModuleType) -> None:
    times = script.phase_times(LOG)
    assert times["RunHloPasses"] == pytest.approx(20.7)
    assert times["RunBackend"] == pytest.approx(0.0818)
    assert times["priority-fusion"] == pytest.approx(2.0)  # thread 9's 3 s left out


def test_kernel_sizes(script: ModuleType) -> None:
    sizes = script.kernel_sizes(HLO)
    assert sizes == {"kernels": 2, "instructions": 5, "parameter_instructions": 3 * 2 + 2 * 1,
                     "largest": [3, 2]}


def test_empty_log_has_no_times(script: ModuleType) -> None:
    assert script.phase_times("") == {"priority-fusion": 0.0}
