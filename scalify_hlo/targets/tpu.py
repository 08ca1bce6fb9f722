"""Compile a StableHLO module or a jitted function for a Cloud TPU, on a machine without one.

XLA's TPU compiler ships in libtpu (``pip install 'scalify-hlo[tpu-aot]'``: the ``jax[tpu]``
wheel that matches jax) and runs on a CPU-only host: ``get_topology_desc`` gives compile-only
devices of a chip and slice shape, and their client compiles for them. The optimized HLO
carries XLA's TPU cost model per kernel (``estimated_cycles``), and ``memory_analysis`` the
buffer sizes: performance can be estimated before anyone runs on a TPU. Every figure this
module returns is XLA's estimate or count, not a measurement on hardware.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from scalify_hlo.errors import ScalifyError
from scalify_hlo.symbols import partition_count
from scalify_hlo.targets.result import TargetCompileResult

# What libtpu reads when it loads: skip the metadata server and the multi-host handshake
# (a CPU-only machine has neither; the accelerator type only silences start-up noise: the
# topology name decides the target), let several processes load it (its lockfile guards a
# real chip; compiling needs none), and keep its logs out of the working directory.
_LIBTPU_ENV = {
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
}
# Single-chip topology names per chip: 2-D tori (v5e, v6e) and 3-D ones (v4, v5p, tpu7x).
_SINGLE_CHIP = {"v4": "1x1x1", "v5e": "1x1", "v5p": "1x1x1", "v6e": "1x1", "tpu7x": "1x1x1"}
TPU_CHIPS = tuple(_SINGLE_CHIP)

_HLO_COMPUTATION = re.compile(r"^(ENTRY )?%([\w.\-]+) \(")
_HLO_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%[\w.\-]+ = (.*?)\s?([a-z][a-z0-9\-]*)\(")
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
_REFS = {name: re.compile(rf"\b{name}=%([\w.\-]+)") for name in
         ("body", "condition", "to_apply", "calls", "true_computation", "false_computation")}
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
COLLECTIVES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                         "collective-permute", "collective-broadcast", "ragged-all-to-all"})
_ARRAY_DIMS = re.compile(r"\b[a-z]\w*\[([^\]]*)\]")


def libtpu_available() -> bool:
    """Whether the ``tpu-aot`` extra (libtpu) is installed."""
    return importlib.util.find_spec("libtpu") is not None


def _prepare_environment() -> None:
    for key, value in _LIBTPU_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("TPU_LOG_DIR", os.path.join(tempfile.gettempdir(), "scalify-libtpu"))


def topology_name(target: str) -> tuple[str, dict[str, Any]]:
    """The ``get_topology_desc`` name and keywords of ``target``: a chip (``v6e``, one chip)
    or a chip and slice shape (``v5e:2x4``)."""
    chip, _, shape = target.partition(":")
    if chip not in _SINGLE_CHIP:
        raise ScalifyError(f"unknown TPU chip '{chip}' (use {', '.join(TPU_CHIPS)}, optionally "
                           f"with a slice shape: v5e:2x4)")
    if shape:
        return target, {}
    return f"{chip}:{_SINGLE_CHIP[chip]}", {"chips_per_host_bounds": (1, 1, 1)}


@functools.cache
def topology(target: str) -> Any:
    """Compile-only devices of ``target`` (see ``topology_name``); needs the tpu-aot extra."""
    if not libtpu_available():
        raise ScalifyError("compiling for a TPU needs libtpu: pip install 'scalify-hlo[tpu-aot]'")
    _prepare_environment()
    from jax.experimental import topologies

    name, keywords = topology_name(target)
    try:
        return topologies.get_topology_desc(topology_name=name, platform="tpu", **keywords)
    except Exception as exc:  # libtpu raises RuntimeError/ValueError with long messages
        raise ScalifyError(f"no TPU topology '{target}': {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def compile_module(source: str | bytes, target: str = "v6e") -> TargetCompileResult:
    """Compile a StableHLO module (text, bytecode or portable artifact) for ``target``.

    A module lowered for N devices (``mhlo.num_partitions``) is compiled SPMD for the first
    N devices of the topology, with the Shardy partitioner that jax lowered it for."""
    from jax.extend import backend as jax_backend
    from jaxlib import _jax

    from scalify_hlo import module_io

    devices = topology(target).devices
    with module_io.ir_context():
        module = module_io.parse_module(source)
        count = partition_count(module)
        if count > len(devices):
            raise ScalifyError(f"the module is partitioned over {count} devices; "
                               f"'{target}' has {len(devices)}")
        options = jax_backend.get_compile_options(1, count, device_assignment=[list(range(count))])
        build = options.executable_build_options
        build.use_spmd_partitioning = count > 1
        build.use_shardy_partitioner = "sdy.mesh" in str(module.operation) if count > 1 else False
        start = time.perf_counter()
        try:
            executable = devices[0].client.compile(
                module, executable_devices=_jax.DeviceList(tuple(devices[:count])),
                compile_options=options)
        except Exception as exc:
            raise ScalifyError(f"XLA:TPU could not compile the module for '{target}': "
                               f"{_first_line(exc)}") from None
        seconds = time.perf_counter() - start
    return read_executable(executable, target, devices[0].device_kind, seconds)


def mesh(target: str, axes: Sequence[str] = ("data",),
         shape: Sequence[int] | None = None) -> Any:
    """A ``jax.sharding.Mesh`` over the devices of ``target`` (one axis by default)."""
    import numpy as np
    from jax.sharding import Mesh

    devices = topology(target).devices
    shape = tuple(shape) if shape is not None else (len(devices),)
    return Mesh(np.array(devices[: int(np.prod(shape))]).reshape(shape), tuple(axes))


def compile_jitted(fn: Callable[..., Any], *args: Any, target: str = "v6e",
                   **jit_keywords: Any) -> TargetCompileResult:
    """Compile ``jax.jit(fn, **jit_keywords)`` at ``args`` for ``target``.

    ``args`` are arrays or ``jax.ShapeDtypeStruct``s; a leaf without a sharding over the
    topology's devices is placed, replicated, on its first device."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    one = NamedSharding(mesh(target, ("one",), (1,)), PartitionSpec())

    def spec(leaf: Any) -> jax.ShapeDtypeStruct:
        sharding = getattr(leaf, "sharding", None)
        on_target = isinstance(sharding, NamedSharding) and all(
            d.platform == "tpu" for d in sharding.mesh.devices.flat)
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype,
                                    sharding=sharding if on_target else one)

    specs = jax.tree.map(spec, args)
    lowered = jax.jit(fn, **jit_keywords).lower(*specs)
    start = time.perf_counter()
    try:
        compiled = lowered.compile()
    except Exception as exc:
        raise ScalifyError(f"XLA:TPU could not compile the function for '{target}': "
                           f"{_first_line(exc)}") from None
    seconds = time.perf_counter() - start
    return read_executable(compiled, target, topology(target).devices[0].device_kind, seconds)


def read_executable(executable: Any, target: str, device_kind: str,
                    compile_s: float) -> TargetCompileResult:
    """The figures of a compiled executable (``jax.stages.Compiled`` or an XLA one)."""
    if hasattr(executable, "runtime_executable"):  # jax.stages.Compiled
        text, memory = executable.as_text(), executable.memory_analysis()
    else:
        text = executable.hlo_modules()[0].to_string()
        memory = executable.get_compiled_memory_stats()
    cycles, unweighted = estimated_cycles(text)
    return TargetCompileResult(
        target=target, device_kind=device_kind, estimated_cycles=cycles,
        unweighted_loops=unweighted, fusions=count_opcode(text, "fusion"),
        collectives=count_collectives(text),
        argument_bytes=int(memory.argument_size_in_bytes),
        output_bytes=int(memory.output_size_in_bytes),
        temp_bytes=int(memory.temp_size_in_bytes),
        alias_bytes=int(memory.alias_size_in_bytes), compile_s=compile_s)


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    """The instruction lines of each computation of an HLO module's text, and the entry's
    name."""
    computations: dict[str, list[str]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = _HLO_COMPUTATION.match(line)
        if header:
            current = computations.setdefault(header.group(2), [])
            if header.group(1):
                entry = header.group(2)
        elif current is not None and line.startswith("  "):
            current.append(line)
    return computations, entry


def _callees(line: str, opcode: str, times: int) -> tuple[list[tuple[str, int]], bool]:
    """The computations one instruction runs, with how often per run of the instruction, and
    whether it is a loop of unknown trip count. A fusion's computation is not followed: its
    cost is on the fusion; nor a reducer (``to_apply`` of anything but ``call``)."""
    if opcode == "while":
        trips = _TRIP_COUNT.search(line)
        body, condition = (int(trips.group(1)), int(trips.group(1)) + 1) if trips else (1, 1)
        found = [(m.group(1), times * body) for m in [_REFS["body"].search(line)] if m]
        found += [(m.group(1), times * condition)
                  for m in [_REFS["condition"].search(line)] if m]
        return found, trips is None
    names = []
    if opcode == "conditional":
        names = [m.group(1) for key in ("true_computation", "false_computation")
                 for m in [_REFS[key].search(line)] if m]
        branches = _BRANCHES.search(line)
        if branches:
            names += [b.strip().lstrip("%") for b in branches.group(1).split(",")]
    elif opcode == "call":
        names = [m.group(1) for m in [_REFS["to_apply"].search(line)] if m]
    elif opcode != "fusion":
        names = [m.group(1) for m in [_REFS["calls"].search(line)] if m]
    return [(name, times) for name in names], False


def estimated_cycles(text: str) -> tuple[int, int]:
    """XLA's estimated cycles of one run of an optimized HLO module, and the number of loops
    whose trip count the HLO does not give (their bodies counted once).

    Sums ``estimated_cycles`` over the instructions of the computations that run (the entry,
    loop bodies and conditions, branches, called and async computations), each times how
    often its computation runs: a loop's body times its ``known_trip_count``."""
    computations, entry = _computations(text)
    total, unweighted = 0, 0
    pending = [(entry, 1)]
    while pending:
        name, times = pending.pop()
        for line in computations.get(name, []):
            instruction = _HLO_INSTRUCTION.match(line)
            if instruction is None:
                continue
            cycles = _CYCLES.search(line)
            if cycles:
                total += times * int(cycles.group(1))
            callees, unknown = _callees(line, instruction.group(2), times)
            pending += callees
            unweighted += unknown
    return total, unweighted


def count_opcode(text: str, opcode: str) -> int:
    """Instructions with ``opcode`` in every computation of an optimized HLO module."""
    computations, _ = _computations(text)
    return sum(1 for lines in computations.values() for line in lines
               if (m := _HLO_INSTRUCTION.match(line)) and m.group(2) == opcode)


def count_collectives(text: str) -> dict[str, int]:
    """Collectives by opcode (an async ``-start``/``-done`` pair once), and the scalar ones
    (every result rank 0) again under ``<opcode> (scalar)``."""
    counts: dict[str, int] = {}
    computations, _ = _computations(text)
    for lines in computations.values():
        for line in lines:
            instruction = _HLO_INSTRUCTION.match(line)
            if instruction is None:
                continue
            opcode = instruction.group(2).removesuffix("-start")
            if opcode not in COLLECTIVES:
                continue
            counts[opcode] = counts.get(opcode, 0) + 1
            dims = _ARRAY_DIMS.findall(instruction.group(1))
            if dims and not any(dims):
                counts[f"{opcode} (scalar)"] = counts.get(f"{opcode} (scalar)", 0) + 1
    return dict(sorted(counts.items()))
