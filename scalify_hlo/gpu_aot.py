"""Compile for an H100 without a GPU: XLA's GPU compiler run "deviceless" on this machine.

Why: what a GPU pays per step is decided by XLA:GPU (which dots become cuBLASLt FP8 GEMMs, how
many kernels), and the development machines have no GPU. XLA's GPU pipeline (fusion, the GEMM
rewriter, PTX, ptxas) runs on a CPU when it is given a target description instead of a device,
so the optimized HLO, its counts and the compile time can be measured here. Step time cannot.

Needs the optional ``gpu-aot`` extra (``pip install 'scalify-hlo[gpu-aot]'``: the CUDA PJRT
plugin at jax's version, and the nvcc wheel for ptxas and libdevice; no driver). The target is
XLA's H100 SXM spec (``h100_sxm.txtpb``, shipped with the package); its ``runtime_version``
block matters: without it XLA silently emits no FP8 GEMMs.

Triton GEMM: without a device XLA cannot autotune, so with Triton GEMM on (XLA's default)
every dot becomes a Triton fusion, where on a real H100 autotuning may pick cuBLAS. Counting
``__cublas$lt$matmul$f8`` calls therefore needs ``triton_gemm=False`` (the default here);
``triton_gemm=True`` gives XLA's default-flag structure.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalify_hlo.errors import ScalifyError
from scalify_hlo.symbols import partition_count

H100_TARGET = Path(__file__).with_name("h100_sxm.txtpb")
F8_GEMM = "__cublas$lt$matmul$f8"
_MISSING = ("compiling for an H100 needs the gpu-aot extra: pip install "
            "'scalify-hlo[gpu-aot]' (jax-cuda12-plugin and jax-cuda12-pjrt at jax's version, "
            "nvidia-cuda-nvcc-cu12)")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%[\w.\-]+ = (.*?) ([a-z][a-z0-9\-]*)\(")
_RANK0 = re.compile(r"^[a-z]\w*\[\]")


@dataclass(frozen=True)
class GpuCompile:
    """The optimized HLO of one deviceless compile and what it costs a GPU.

    instructions: HLO instructions in every computation (fused ones included), the count
        the issue's "optimized HLO instructions" means; rank0_instructions: those whose
        result is a scalar (scale arithmetic XLA copies into fusions shows up here).
    fusions: instructions with opcode ``fusion`` (each one a kernel, or for ``kCustom`` a
        library call); cublas_f8: ``__cublas$lt$matmul$f8`` custom calls (FP8 GEMMs).
    """

    hlo_text: str
    compile_s: float
    instructions: int
    rank0_instructions: int
    fusions: int
    cublas_f8: int
    custom_calls: dict[str, int]

    def counts(self) -> dict[str, Any]:
        """Everything but the text, for a benchmark's JSON."""
        return {"compile_s": self.compile_s, "instructions": self.instructions,
                "rank0_instructions": self.rank0_instructions, "fusions": self.fusions,
                "cublas_f8": self.cublas_f8, "custom_calls": self.custom_calls}


def available() -> bool:
    """Whether the gpu-aot extra is installed (the CUDA PJRT plugin and ptxas)."""
    return all(_installed(name) for name in ("jax_plugins.xla_cuda12", "jax_cuda12_plugin"))


def _installed(module: str) -> bool:
    """find_spec of a dotted name imports its parent, which raises when the parent is absent
    (no ``jax_plugins`` package at all without the extra)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@functools.cache
def h100_topology(devices: int = 1) -> Any:
    """The H100 SXM target as a JAX topology of ``devices`` GPUs on one host (no GPU
    needed); cached."""
    if not available():
        raise ScalifyError(_MISSING)
    from jax.experimental import topologies

    shape = f"1x1x{devices}"
    # Without a CUDA runtime the plugin refuses to load unless told to skip its version
    # check (or JAX_PLATFORMS excludes cuda); a compile-only topology needs no runtime.
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    try:
        try:
            return topologies.get_topology_desc(platform="cuda", topology=shape,
                                                target_config=H100_TARGET.read_text())
        except NotImplementedError:
            # JAX looked for plugins before the variable was set, and the CUDA one refused
            # to load: load it now (it registers the topology, not a backend JAX uses).
            from jax_plugins import xla_cuda12

            xla_cuda12.initialize()
            return topologies.get_topology_desc(platform="cuda", topology=shape,
                                                target_config=H100_TARGET.read_text())
    except Exception as exc:  # the plugin raises plain runtime errors
        raise ScalifyError(f"cannot load the H100 target: {' '.join(str(exc).split())}; "
                           f"{_MISSING}") from None


def compile_h100(module: str | bytes, triton_gemm: bool = False) -> GpuCompile:
    """Compile a StableHLO module (text or bytecode) for an H100 and count what it became.
    A partitioned module (``mhlo.num_partitions`` N > 1, what ``jax.jit`` of a sharded step
    lowers to) is compiled for N H100s on one host, as JAX's SPMD partitioner would split
    it: its collectives are in the optimized HLO."""
    import numpy as np
    from jax._src import compiler
    from jax._src.lib import xla_client
    from jax.extend.mlir import ir
    from jax.interpreters import mlir as jax_mlir

    with jax_mlir.make_ir_context():
        try:
            parsed = ir.Module.parse(module)
        except ir.MLIRError as exc:
            raise ScalifyError(f"cannot parse the module: {' '.join(str(exc).split())}") from None
        partitions = partition_count(parsed)
        topology = h100_topology(partitions)
        if partitions == 1:
            options = xla_client.CompileOptions()
        else:
            options = compiler.get_compile_options(
                num_replicas=1, num_partitions=partitions,
                device_assignment=np.array(topology.devices).reshape(1, partitions))
        options.env_option_overrides = [("xla_gpu_enable_triton_gemm", triton_gemm)]
        start = time.perf_counter()
        try:
            executable = topology.devices[0].client.compile(
                parsed, xla_client.DeviceList(tuple(topology.devices)), options)
        except Exception as exc:  # XLA's errors are plain runtime errors
            raise ScalifyError(f"XLA:GPU cannot compile the module: "
                               f"{' '.join(str(exc).split())[:500]}") from None
        seconds = time.perf_counter() - start
    text = "\n".join(m.to_string() for m in executable.hlo_modules())
    return count_hlo(text, seconds)


def compile_function_h100(fn: Callable[..., Any], *args: Any,
                          triton_gemm: bool = False) -> GpuCompile:
    """``compile_h100`` of ``jax.jit(fn)`` lowered for CUDA at ``args``' shapes and dtypes
    (arrays or ``jax.ShapeDtypeStruct``s)."""
    import jax

    h100_topology()  # registers the CUDA platform for lowering, or says what is missing
    lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    return compile_h100(lowered.as_text(), triton_gemm)


def count_hlo(hlo_text: str, compile_s: float = 0.0) -> GpuCompile:
    """``GpuCompile`` counts of optimized HLO text."""
    instructions = rank0 = fusions = 0
    calls: Counter[str] = Counter()
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        instructions += 1
        rank0 += bool(_RANK0.match(match.group(1)))
        fusions += match.group(2) == "fusion"
        if match.group(2) == "custom-call" and 'custom_call_target="' in line:
            calls[line.split('custom_call_target="', 1)[1].split('"', 1)[0]] += 1
    return GpuCompile(hlo_text, compile_s, instructions, rank0, fusions,
                      calls.get(F8_GEMM, 0), dict(sorted(calls.items())))
