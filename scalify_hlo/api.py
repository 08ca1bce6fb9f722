"""Rewriting modules from text or bytes: the layer the CLI and the Python API share."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from jax.extend.mlir import ir

from scalify_hlo import module_io
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites import (
    ModulePass,
    PassContext,
    Record,
    parse_pipeline,
    run_pipeline,
)

DumpHook = Callable[[str, str], None]
InspectHook = Callable[[ir.Module], None]


@dataclass
class ChunkResult:
    """The outcome of rewriting one module (one ``// -----`` chunk of a file)."""

    output: bytes | None
    error: str | None = None
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    context: PassContext = field(default_factory=PassContext)


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one rewrite.

    A rewrite keeps tens of thousands of small objects alive at once (the value map, its
    scales, the bindings' handles), so the collector's generational thresholds fire full
    collections that traverse all of them and find nothing to free: about a tenth of the
    rewrite of a GPT-2-sized step. Reference counting still frees everything as usual;
    cycles made meanwhile are collected by the next collection after the rewrite.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def rewrite_module_source(
    source: str | bytes,
    pipeline: str | Sequence[ModulePass] = DEFAULT_PIPELINE,
    *,
    filename: str = "-",
    line_offset: int = 0,
    emit: module_io.EmitFormat = module_io.EmitFormat.TEXT,
    debug_info: bool = False,
    dump_after_pass: DumpHook | None = None,
    inspect: InspectHook | None = None,
    records: bool = False,
    count_ops: bool = False,
    verify_each: bool = False,
) -> ChunkResult:
    """Parse, verify, run the pipeline and serialize one module.

    The module is verified once after parsing and once after the pipeline (after each pass
    with ``verify_each``: slower, but names the pass that made an invalid module), so the
    printer may assume it valid. ``count_ops`` fills ``ops_before`` and ``ops_after`` (a
    walk of each module; callers that report no statistics turn it off). ``inspect`` is called with
    the rewritten module before it is written: a caller that needs facts about it (its
    signature, which results share a value) reads them there instead of parsing the output
    again, a second parse and verify of a module several times the size of the input.

    With ``records``, the passes keep a record per op of how it was scaled
    (``result.context.records``, read by ``scalify-hlo explain`` and ``Report.records``);
    without, they keep none and pay nothing for it.

    User errors come back in ``ChunkResult.error`` rather than raised, so that a multi-chunk
    input can report one chunk's failure and still process the others.
    """
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    result = ChunkResult(output=None)
    if records:
        result.context.records = []
    with _cyclic_gc_paused(), module_io.ir_context():
        try:
            module = module_io.parse_module(source, filename, line_offset)
            if count_ops:
                result.ops_before = module_io.count_ops(module)

            def after(module_pass: ModulePass, current) -> None:
                if dump_after_pass is not None:
                    dump_after_pass(str(module_pass), module_io.module_to_text(current, debug_info))

            run_pipeline(module, passes, result.context, after, verify_each)
            if count_ops:
                result.ops_after = module_io.count_ops(module)
            if inspect is not None:
                inspect(module)
            result.output = module_io.write_module(module, emit, debug_info, verified=True)
        except ScalifyError as exc:
            result.error = module_io.relocate(str(exc), filename, line_offset)
    result.context.warnings = [module_io.relocate(w, filename, line_offset)
                               for w in result.context.warnings]
    if result.context.records:
        result.context.records = _relocated(result.context.records, filename, line_offset)
    return result


def _relocated(records: list[Record], filename: str, line_offset: int) -> list[Record]:
    """Records whose ops sit in the parsed text (no location of their own) point at
    ``filename`` and the chunk's line, as warnings do."""
    texts: dict[str, str] = {}
    relocated = []
    for record in records:
        text = texts.get(record.location)
        if text is None:
            text = texts[record.location] = module_io.relocate_location(record.location,
                                                                     filename, line_offset)
        relocated.append(record if text is record.location
                         else record._replace(location=text))
    return relocated


def rewrite_text(text: str, pipeline: str = DEFAULT_PIPELINE, debug_info: bool = False) -> str:
    """Rewrite MLIR text with a pipeline and return the text; raises ScalifyError on failure."""
    result = rewrite_module_source(text, pipeline, debug_info=debug_info)
    if result.error is not None:
        raise ScalifyError(result.error)
    assert result.output is not None
    return result.output.decode()
