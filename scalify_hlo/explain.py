"""How each value of a rewritten program is scaled, from the passes' records.

The passes append a ``Record`` (op, location, kind, detail) per op they treat when asked to
(``rewrite_module_source(..., records=True)``). This module turns those records into the two
tables that ``scalify-hlo explain`` prints and ``Report.table()`` returns: counts by kind per
op family (the families of ``rewrites/rules.py``), and per source line (the user's
``file:line`` and the JAX name stack that JAX puts in each op's location) the ops there and
how they are scaled. So a user can find the line whose values went to FP8, were rescaled at
run time, or ran unscaled.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scalify_hlo.rewrites import RECORD_KINDS, Record
from scalify_hlo.rewrites.rules import RULES

FORMATS = ("text", "json")
# Kinds whose details the per-line table lists (a runtime scale's factor count says little).
_DETAILED = {"static", "rescale", "fp8", "not-fp8", "wide", "fallback", "saturated"}
_MAX_DETAILS = 3
# The scalify pass gives every op with a float result exactly one of these (``update``: an
# op of the update tail, run on unscaled values).
_ONE_PER_OP = ("static", "runtime", "update", "fallback")
_NO_RULE = "no rule"
_EXTRA_FAMILIES = {"func.return": "return"}


def family_of(op_name: str) -> str:
    """The rule family of an op (``docs/ops.md``), ``return`` for the entry's results."""
    rule = RULES.get(op_name)
    if rule is not None:
        return rule.family.name
    return _EXTRA_FAMILIES.get(op_name, _NO_RULE)


# ----- locations ----------------------------------------------------------------------
class _LocationParser:
    """A recursive-descent reader of a location as MLIR prints it: ``unknown``,
    ``"file":L:C[ to ...]``, ``"name"[(loc)]``, ``callsite(loc at loc)``,
    ``fused[<...>][loc, ...]``; each becomes a tuple node."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> tuple:
        self.expect("loc(")
        node = self.inner()
        self.expect(")")
        return node

    def expect(self, token: str) -> None:
        if not self.text.startswith(token, self.pos):
            raise ValueError(f"expected {token!r} at {self.pos}")
        self.pos += len(token)

    def peek(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def string(self) -> str:
        self.expect('"')
        chars: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == "\\" and self.pos < len(self.text):
                chars.append(self.text[self.pos])
                self.pos += 1
            elif char == '"':
                return "".join(chars)
            else:
                chars.append(char)
        raise ValueError("unterminated string")

    def number(self) -> int:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if start == self.pos:
            raise ValueError(f"expected a number at {start}")
        return int(self.text[start:self.pos])

    def inner(self) -> tuple:
        if self.peek("unknown"):
            self.pos += len("unknown")
            return ("unknown",)
        if self.peek("callsite("):
            self.pos += len("callsite(")
            callee = self.inner()
            self.expect(" at ")
            caller = self.inner()
            self.expect(")")
            return ("callsite", callee, caller)
        if self.peek("fused"):
            self.pos += len("fused")
            if self.peek("<"):
                self.skip_balanced("<", ">")
            self.expect("[")
            parts = [self.inner()]
            while self.peek(", "):
                self.pos += 2
                parts.append(self.inner())
            self.expect("]")
            return ("fused", parts)
        name = self.string()
        if self.peek(":"):
            self.pos += 1
            line = self.number()
            self.expect(":")
            self.number()
            if self.peek(" to "):  # a range: " to :C" or " to L:C"
                self.pos += len(" to ")
                if not self.peek(":"):
                    self.number()
                self.expect(":")
                self.number()
            return ("file", name, line)
        if self.peek("("):
            self.pos += 1
            child = self.inner()
            self.expect(")")
            return ("name", name, child)
        return ("name", name, None)

    def skip_balanced(self, opening: str, closing: str) -> None:
        depth = 0
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == opening:
                depth += 1
            elif char == closing:
                depth -= 1
                if depth == 0:
                    return
        raise ValueError("unbalanced")


def _frames(node: tuple, into: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (file, line) positions of a location, innermost first (a call site's callee
    comes before its caller)."""
    kind = node[0]
    if kind == "file":
        into.append((node[1], node[2]))
    elif kind == "name" and node[2] is not None:
        _frames(node[2], into)
    elif kind == "callsite":
        _frames(node[1], into)
        _frames(node[2], into)
    elif kind == "fused":
        for part in node[1]:
            _frames(part, into)
    return into


def _source(node: tuple) -> str:
    """``file:line`` of the innermost frame that is not scalify-hlo's own: ops that JAX
    attributes to no line of the user's function (a step's constants) carry the frame of
    the call that exported it, ``compile_scaled``'s, under the user's call to it."""
    frames = _frames(node, [])
    if not frames:
        return ""
    file, line = next((f for f in frames if not _is_own(f[0])), frames[0])
    return f"{file}:{line}"


_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_own(file: str) -> bool:
    return os.path.abspath(file).startswith(_OWN_DIR) if os.path.isabs(file) else False


def _stack(node: tuple) -> str:
    """JAX's name stack: the outermost name (its child is the traceback); an inlined op's
    location ``callsite(op's name at call's name)`` joins the two."""
    kind = node[0]
    if kind == "name":
        return node[1]
    if kind == "callsite":
        return "/".join(part for part in (_stack(node[2]), _stack(node[1])) if part)
    if kind == "fused":
        return next((s for s in map(_stack, node[1]) if s), "")
    return ""


@functools.lru_cache(maxsize=4096)
def split_location(text: str) -> tuple[str, str]:
    """(source line ``file:line``, name stack) of a printed location; ``""`` for a part it
    does not have (an op without debug info), the raw text where it cannot be read."""
    try:
        node = _LocationParser(text).parse()
    except (ValueError, IndexError, RecursionError):
        return "", text
    return _source(node), _stack(node)


def _context(stack: str) -> str:
    """The name stack without its last element (the primitive): where in the program
    (``jit(step)/jvp()`` forward, ``jit(step)/transpose(jvp())`` backward)."""
    depth = 0
    for index in range(len(stack) - 1, -1, -1):
        char = stack[index]
        if char == ")":
            depth += 1
        elif char == "(":
            depth -= 1
        elif char == "/" and depth == 0:
            return stack[:index]
    return stack


# ----- the tables ---------------------------------------------------------------------
@dataclass
class _Group:
    """Records that share a key (a family, or a source line and name stack)."""

    first: int
    kinds: dict[str, int] = field(default_factory=dict)
    details: dict[str, dict[str, int]] = field(default_factory=dict)
    # per op name, per kind: records
    ops: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, record: Record) -> None:
        self.kinds[record.kind] = self.kinds.get(record.kind, 0) + 1
        details = self.details.setdefault(record.kind, {})
        details[record.detail] = details.get(record.detail, 0) + 1
        per_kind = self.ops.setdefault(record.op, {})
        per_kind[record.kind] = per_kind.get(record.kind, 0) + 1

    def op_counts(self) -> dict[str, int]:
        """Ops per op name: its static, runtime, update and fallback records (one per op scalify
        rewrites), else its most frequent kind (a pipeline without scalify, the return's
        rescaled results)."""
        counts = {}
        for op, kinds in self.ops.items():
            once = sum(kinds.get(kind, 0) for kind in _ONE_PER_OP)
            counts[op] = once or max(kinds.values())
        return counts


def _ordered_kinds(kinds: Iterable[str]) -> list[str]:
    known = [k for k in RECORD_KINDS if k in kinds]
    return known + sorted(k for k in kinds if k not in RECORD_KINDS)


@dataclass
class Explanation:
    """The tables of one rewrite's records (and its warnings, which say why)."""

    records: Sequence[Record]
    pipeline: str = ""
    warnings: Sequence[str] = ()

    def families(self) -> list[dict[str, Any]]:
        """Per op family: ops and records by kind (an op can count under several kinds: a
        dot is scaled at run time, rescaled and cast to FP8)."""
        groups: dict[str, _Group] = {}
        for index, record in enumerate(self.records):
            family = family_of(record.op)
            groups.setdefault(family, _Group(index)).add(record)
        rows = [{"family": family, "ops": sum(group.op_counts().values()),
                 "kinds": {k: group.kinds[k] for k in _ordered_kinds(group.kinds)}}
                for family, group in groups.items()]
        return sorted(rows, key=lambda row: (-row["ops"], row["family"]))

    def lines(self) -> list[dict[str, Any]]:
        """Per source line and name-stack context, in program order: the ops there and
        how they are scaled (kind, detail, count)."""
        groups: dict[tuple[str, str], _Group] = {}
        for index, record in enumerate(self.records):
            source, stack = split_location(record.location)
            groups.setdefault((source, _context(stack)), _Group(index)).add(record)
        rows = []
        for (source, context), group in sorted(groups.items(), key=lambda kv: kv[1].first):
            scaling = [{"kind": kind, "detail": detail, "count": count}
                       for kind in _ordered_kinds(group.details)
                       for detail, count in group.details[kind].items()]
            rows.append({"source": source, "stack": context, "ops": group.op_counts(),
                         "scaling": scaling})
        return rows

    def to_json(self) -> dict[str, Any]:
        records = []
        for record in self.records:
            source, stack = split_location(record.location)
            records.append({"op": record.op, "family": family_of(record.op), "kind":
                            record.kind, "detail": record.detail, "source": source,
                            "stack": stack})
        return {"pipeline": self.pipeline, "kinds": list(RECORD_KINDS),
                "families": self.families(), "lines": self.lines(), "records": records,
                "warnings": list(self.warnings)}

    def to_text(self) -> str:
        families = self.families()
        if not families:
            return "no records: the pipeline scaled no floating value"
        kinds = _ordered_kinds({k for row in families for k in row["kinds"]})
        header = ["family", "ops", *kinds]
        body = [[row["family"], str(row["ops"]), *(str(row["kinds"].get(k, 0)) for k in kinds)]
                for row in families]
        total = ["total", str(sum(row["ops"] for row in families)),
                 *(str(sum(row["kinds"].get(k, 0) for row in families)) for k in kinds)]
        parts = ["by op family (an op can count under several kinds)",
                 _table(header, [*body, total], numeric_from=1), "",
                 "by source line (name stack without the primitive)",
                 _table(["source line", "name stack", "how scaled", "ops"],
                        [[_display_path(row["source"]) or "-", row["stack"] or "-",
                          _scaling_text(row["scaling"]), _ops_text(row["ops"])]
                         for row in self.lines()])]
        return "\n".join(parts)

    def render(self, fmt: str) -> str:
        if fmt == "json":
            return json.dumps(self.to_json(), indent=1)
        return self.to_text()


def _display_path(source: str) -> str:
    """A source line with its file relative to the working directory when inside it."""
    path, _, line = source.rpartition(":")
    if not path or not os.path.isabs(path):
        return source
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return source
    return source if relative.startswith("..") else f"{relative}:{line}"


def _short_op(name: str) -> str:
    return name.removeprefix("stablehlo.")


def _ops_text(ops: dict[str, int]) -> str:
    return ", ".join(f"{_short_op(op)}" + (f" x{count}" if count > 1 else "")
                     for op, count in ops.items())


def _scaling_text(scaling: list[dict[str, Any]]) -> str:
    totals: dict[str, int] = {}
    details: dict[str, list[str]] = {}
    for entry in scaling:
        kind = entry["kind"]
        totals[kind] = totals.get(kind, 0) + entry["count"]
        if kind in _DETAILED and entry["detail"]:
            details.setdefault(kind, []).append(entry["detail"])
    parts = []
    for kind, count in totals.items():
        listed = details.get(kind, [])
        shown = "; ".join(listed[:_MAX_DETAILS]) + ("; ..." if len(listed) > _MAX_DETAILS
                                                      else "")
        parts.append(f"{kind} {count}" + (f" ({shown})" if shown else ""))
    return ", ".join(parts)


def _table(header: list[str], rows: list[list[str]], numeric_from: int | None = None) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            last = i == len(cells) - 1
            if numeric_from is not None and i >= numeric_from:
                out.append(cell.rjust(widths[i]))
            else:
                out.append(cell if last else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join(line(cells) for cells in [header, *rows])
