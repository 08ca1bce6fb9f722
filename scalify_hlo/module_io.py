"""The IR layer: one scoped MLIR context, parsing and printing of StableHLO modules.

Everything that touches MLIR text, bytecode or portable artifacts goes through here, so that
diagnostics become one-line ``FILE:LINE:COL: message`` errors and the context is never left
entered (an unmatched ``__enter__`` aborts the interpreter at exit).
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import mlir as jax_mlir

from scalify_hlo.errors import ScalifyError

BYTECODE_MAGIC = b"ML\xefR"
SPLIT_MARKER = "// -----"


class IRError(ScalifyError):
    """A module cannot be read, verified or written; the message is a single line."""


class EmitFormat(StrEnum):
    """How a module is written out."""

    TEXT = "text"
    BYTECODE = "bytecode"
    PORTABLE = "portable"


@contextlib.contextmanager
def ir_context() -> Iterator[ir.Context]:
    """A fresh context with func, stablehlo, chlo, sdy and mhlo loaded, entered for the block."""
    ctx = jax_mlir.make_ir_context()
    ctx.allow_unregistered_dialects = False
    with ctx, ir.Location.unknown():
        yield ctx


_LOC_RE = re.compile(r'loc\("(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')


def _one_line(text: str) -> str:
    return " ".join(text.split())


def format_diagnostics(err: ir.MLIRError, filename: str, line_offset: int = 0) -> str:
    """The first error of an MLIRError as ``FILE:LINE:COL: message``."""
    diags = list(getattr(err, "error_diagnostics", []) or [])
    if not diags:
        return f"{filename}: {_one_line(str(err))}"
    diag = diags[0]
    message = _one_line(diag.message)
    match = _LOC_RE.search(str(diag.location))
    if match and match.group("file") in ("-", "", filename):
        line = int(match.group("line")) + line_offset
        return f"{filename}:{line}:{match.group('col')}: {message}"
    if match:
        return f"{match.group('file')}:{match.group('line')}:{match.group('col')}: {message}"
    return f"{filename}: {message} (at {_one_line(str(diag.location))})"


def _is_portable_artifact(module: ir.Module) -> bool:
    body = module.body.operations
    return any(op.operation.name.startswith("vhlo.") for op in body)


def parse_module(source: str | bytes, filename: str = "-", line_offset: int = 0) -> ir.Module:
    """Parse MLIR text, MLIR bytecode or a StableHLO portable artifact, and verify it.

    Must be called inside ``ir_context()``.
    """
    if isinstance(source, bytes):
        if source.startswith(BYTECODE_MAGIC):
            return _parse_bytecode(source, filename)
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IRError(
                f"{filename}: not MLIR text, bytecode or a portable artifact "
                f"(invalid UTF-8 at byte {exc.start})"
            ) from None
    if "\x00" in source:
        raise IRError(f"{filename}: not MLIR text (contains NUL bytes)")
    if not source.strip():
        raise IRError(f"{filename}: empty input, expected a module")
    if _nesting_depth(source) > MAX_NESTING_DEPTH:
        raise IRError(f"{filename}: nesting deeper than {MAX_NESTING_DEPTH} levels")
    try:
        module = ir.Module.parse(source)
    except ir.MLIRError as exc:
        raise IRError(format_diagnostics(exc, filename, line_offset)) from None
    return _verified(module, filename, line_offset)


# MLIR's parsers recurse per nesting level: deeper input overflows the C stack.
MAX_NESTING_DEPTH = 512
# The depth step of each byte: +1 for an opener, -1 for a closer (a table lookup per byte is
# half the cost of two ``np.isin`` scans).
_DEPTH_STEPS = np.zeros(256, dtype=np.int64)
_DEPTH_STEPS[np.frombuffer(b"([{<", dtype=np.uint8)] = 1
_DEPTH_STEPS[np.frombuffer(b")]}>", dtype=np.uint8)] = -1


def _nesting_depth(text: str) -> int:
    """Deepest bracket nesting (stray closers clamp at 0), vectorized: inputs are megabytes."""
    codes = np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8)
    steps = _DEPTH_STEPS[codes]
    if not steps.any():
        return 0
    depth = np.cumsum(steps)
    depth -= np.minimum.accumulate(np.minimum(depth, 0))
    return int(depth.max())


def _probe_bytecode(data: bytes, filename: str, timeout_s: float | None = None) -> str | None:
    """Parse untrusted bytecode in a forked child first and return its error, if any.

    MLIR's bytecode reader can abort the process on malformed input (a diagnostic that is
    not UTF-8 ends in std::terminate), and some inputs that raise an ordinary error corrupt
    the heap on the way, so the process dies later. Neither can be caught in Python, so the
    parent only parses bytecode that the child parsed cleanly, and reports the child's error
    (sent back through a pipe) otherwise. The child gets 2 s plus 1 s per MB: a heap it
    corrupted can also make it spin in malloc forever."""
    if not hasattr(os, "fork"):
        return None
    if timeout_s is None:
        timeout_s = 2.0 + len(data) / 1e6
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, report by exit status, never return into the caller
        code = 3
        try:
            os.close(read_end)
            quiet = os.open(os.devnull, os.O_WRONLY)  # its abort message is not the user's
            os.dup2(quiet, 2)
            try:
                ir.Module.parse(data)
                code = 0
            except ir.MLIRError as exc:
                message = format_diagnostics(exc, filename).encode("utf-8", "replace")
                os.write(write_end, message[:4096])  # below the pipe's buffer: no deadlock
                code = 2
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    try:
        while True:
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return f"{filename}: malformed MLIR bytecode (the bytecode reader did not finish)"
            time.sleep(0.005)
        os.set_blocking(read_end, False)
        try:
            while chunk := os.read(read_end, 65536):
                chunks.append(chunk)
        except BlockingIOError:
            pass
    finally:
        os.close(read_end)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 2 and chunks:
        return _one_line(b"".join(chunks).decode("utf-8", "replace"))
    return f"{filename}: malformed MLIR bytecode (the bytecode reader failed)"


def _parse_bytecode(data: bytes, filename: str) -> ir.Module:
    error = _probe_bytecode(data, filename)
    if error is not None:
        raise IRError(error)
    try:
        module = ir.Module.parse(data)
    except ir.MLIRError as exc:
        raise IRError(format_diagnostics(exc, filename)) from None
    if _is_portable_artifact(module):
        try:
            module = stablehlo.deserialize_portable_artifact(ir.Context.current, data)
        except Exception as exc:  # the binding raises plain exceptions here
            raise IRError(f"{filename}: invalid portable artifact: {_one_line(str(exc))}") from None
    return _verified(module, filename, 0)


def _verified(module: ir.Module, filename: str, line_offset: int) -> ir.Module:
    verify(module, filename, line_offset)
    return module


def verify(module: ir.Module, filename: str = "-", line_offset: int = 0) -> None:
    """Raise IRError with the first verifier diagnostic if the module is invalid."""
    try:
        module.operation.verify()
    except ir.MLIRError as exc:
        raise IRError(format_diagnostics(exc, filename, line_offset)) from None


def module_to_text(module: ir.Module, debug_info: bool = False, verified: bool = False) -> str:
    """The module as text; ``verified`` skips the printer's own verification (which decides
    between the custom and the generic form), a full verify on a large module."""
    return module.operation.get_asm(enable_debug_info=debug_info, assume_verified=verified)


def write_module(module: ir.Module, fmt: EmitFormat, debug_info: bool = False,
                 verified: bool = False) -> bytes:
    """Serialize a module as text, MLIR bytecode, or a versioned StableHLO portable artifact;
    ``verified``: the caller has just verified it (see ``module_to_text``)."""
    fmt = EmitFormat(fmt)
    if fmt is EmitFormat.TEXT:  # bytes straight from the printer: no str round trip
        return module.operation.get_asm(binary=True, enable_debug_info=debug_info,
                                        assume_verified=verified)
    if fmt is EmitFormat.BYTECODE:
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        return buffer.getvalue()
    try:
        return stablehlo.serialize_portable_artifact(module, stablehlo.get_current_version())
    except Exception as exc:
        raise IRError(f"cannot write a portable artifact: {_one_line(str(exc))}") from None


@dataclass(frozen=True)
class SourceChunk:
    """One `// -----` separated piece of an input file and the line it starts on (0-based)."""

    text: str
    first_line: int


def split_input(text: str) -> list[SourceChunk]:
    """Split at lines that start with ``// -----``, as mlir-opt's --split-input-file does."""
    chunks: list[SourceChunk] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith(SPLIT_MARKER):
            chunks.append(SourceChunk("".join(current), start))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append(SourceChunk("".join(current), start))
    return chunks


# What count_ops counts, as ``--stats`` and ``ScaledStep.report()`` both name it.
OPS_COUNTED = "operations (all in the module, functions and returns included)"


def count_ops(module: ir.Module) -> dict[str, int]:
    """Operation counts by name over the whole module, the module op itself excluded: the one
    way the tool counts ops (``OPS_COUNTED``)."""
    names: list[str] = []
    record = names.append
    advance = ir.WalkResult.ADVANCE

    def visit(op: ir.Operation) -> ir.WalkResult:
        record(op.name)  # as little Python per op as the walk allows; counted in C below
        return advance

    module.operation.walk(visit)
    counts = collections.Counter(names)
    counts.pop("builtin.module", None)
    return dict(sorted(counts.items()))


_FILE_LOC_RE = re.compile(r'"(?P<file>[^"]+)":(?P<line>\d+):(?P<col>\d+)')
_NAME_LOC_RE = re.compile(r'loc\("(?P<name>[^"]*)"')


def short_location(loc: ir.Location) -> str:
    """``file:line:col`` of the innermost source position in a location, else its name."""
    text = str(loc)
    match = _FILE_LOC_RE.search(text)
    if match:
        return f"{match.group('file')}:{match.group('line')}:{match.group('col')}"
    name = _NAME_LOC_RE.search(text)
    if name:
        return name.group("name")
    return "<unknown location>"


_CHUNK_POSITION_RE = re.compile(r"(?<![\w/.])-:(\d+):(\d+)")


def relocate(message: str, filename: str, line_offset: int) -> str:
    """Point ``-:LINE:COL`` (a position in the parsed text) at ``FILE:LINE+offset:COL``."""
    return _CHUNK_POSITION_RE.sub(
        lambda m: f"{filename}:{int(m.group(1)) + line_offset}:{m.group(2)}", message)


_LOCATION_POSITION_RE = re.compile(r'"-":(\d+):(\d+)')


def relocate_location(text: str, filename: str, line_offset: int) -> str:
    """``relocate`` for a printed location: ``"-":LINE:COL`` (the position MLIR gives an op
    of parsed text without a location of its own) as ``"FILE":LINE+offset:COL``."""
    if '"-":' not in text:
        return text
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
    return _LOCATION_POSITION_RE.sub(
        lambda m: f'"{quoted}":{int(m.group(1)) + line_offset}:{m.group(2)}', text)
