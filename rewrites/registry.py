"""The pass registry and MLIR-style pipeline strings: ``inline,scalify{data-dtype=f32},simplify``.

Every pass declares a name, a one-line description and typed options with defaults, so that
the CLI can list them and a pipeline string is validated before any IR is touched.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jax.extend.mlir import ir

from scalify_hlo.errors import PipelineError, RewriteError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Option:
    """A typed pass option; ``choices`` restricts string values."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None

    def parse(self, pass_name: str, raw: str) -> Any:
        def bad(expected: str) -> PipelineError:
            return PipelineError(
                f"invalid value '{raw}' for option '{self.name}' of pass '{pass_name}': "
                f"expected {expected}"
            )

        if self.type is bool:
            lowered = raw.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise bad("true or false")
        if self.type is int:
            try:
                return int(raw)
            except ValueError:
                raise bad("an integer") from None
        if self.type is float:
            try:
                return float(raw)
            except ValueError:
                raise bad("a number") from None
        if self.choices is not None and raw not in self.choices:
            raise bad("one of " + ", ".join(self.choices))
        return raw

    def describe(self) -> str:
        kind = "|".join(self.choices) if self.choices else self.type.__name__
        default = str(self.default).lower() if isinstance(self.default, bool) else self.default
        return f"{self.name}=<{kind}> (default: {default}) {self.help}"


class Record(NamedTuple):
    """How a pass treated one op, for ``scalify-hlo explain`` and ``Report.records``.

    ``kind`` is one of ``RECORD_KINDS``; ``location`` is the op's location as MLIR prints it
    (JAX puts the user's source line and the name stack there), read while the IR is alive.
    A named tuple: made for nearly every op of an explained rewrite.
    """

    op: str
    location: str
    kind: str
    detail: str = ""


# What a record says about an op, in the order tables list them.
RECORD_KINDS = ("static", "runtime", "rescale", "fp8", "not-fp8", "wide", "fallback",
                "saturated")


@dataclass
class PassContext:
    """What passes report while running: warnings for the user, named statistics, and, when
    someone asks for them (``records`` is a list, not None), a record per op of how it was
    scaled. ``record`` does nothing while ``records`` is None, and the scalify pass tests it
    once per op before it looks at the op's scales: a rewrite that nobody explains pays an
    attribute read per op."""

    warnings: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    records: list[Record] | None = None
    # Printed locations by location attribute (attributes compare by value, locations by
    # handle): ops share a few hundred locations, and printing one (a JAX traceback of
    # callsites) costs more than the rest of a record.
    _location_texts: dict[ir.Attribute, str] = field(default_factory=dict, repr=False)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def bump(self, name: str, by: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + by

    def record(self, op_name: str, location: ir.Location, kind: str, detail: str = "") -> None:
        """Append a record if records are being kept."""
        if self.records is not None:
            key = location.attr
            text = self._location_texts.get(key)
            if text is None:
                text = self._location_texts[key] = str(location)
            self.records.append(Record(op_name, text, kind, detail))


PassFn = Callable[[ir.Module, dict[str, Any], PassContext], None]


@dataclass(frozen=True)
class PassInfo:
    name: str
    description: str
    run: PassFn
    options: tuple[Option, ...] = ()

    def option(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        valid = ", ".join(o.name for o in self.options) or "none"
        raise PipelineError(f"unknown option '{name}' for pass '{self.name}' (options: {valid})")

    def defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}


@dataclass(frozen=True)
class PassInvocation:
    """A pass with its options resolved, as one element of a pipeline."""

    info: PassInfo
    options: dict[str, Any]

    def __str__(self) -> str:
        changed = {k: v for k, v in self.options.items() if v != self.info.defaults()[k]}
        if not changed:
            return self.info.name
        rendered = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                            for k, v in changed.items())
        return f"{self.info.name}{{{rendered}}}"


PASSES: dict[str, PassInfo] = {}


def register(info: PassInfo) -> PassInfo:
    if info.name in PASSES:
        raise ValueError(f"pass '{info.name}' registered twice")
    PASSES[info.name] = info
    return info


def _split_top_level(text: str) -> list[str]:
    """Split at commas that are not inside braces, parentheses or quoted option values."""
    parts, depth, current = [], 0, []
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is not None:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "'\"" and depth > 0:
            quote = char
            current.append(char)
            continue
        if char in "{(":
            depth += 1
        elif char in "})":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced '{char}' in pipeline '{text}'")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if quote is not None:
        raise PipelineError(f"unterminated quote in pipeline '{text}'")
    if depth != 0:
        raise PipelineError(f"unbalanced braces in pipeline '{text}'")
    parts.append("".join(current))
    return parts


def _parse_element(element: str) -> PassInvocation:
    element = element.strip()
    if not element:
        raise PipelineError("empty pass name in pipeline")
    name, _, rest = element.partition("{")
    name = name.strip()
    if rest and not rest.rstrip().endswith("}"):
        raise PipelineError(f"expected '}}' at the end of the options of pass '{name}'")
    info = PASSES.get(name)
    if info is None:
        known = ", ".join(sorted(PASSES))
        raise PipelineError(f"unknown pass '{name}' (known passes: {known})")
    options = info.defaults()
    body = rest.rstrip()[:-1] if rest else ""
    try:
        tokens = shlex.split(body)
    except ValueError as exc:
        raise PipelineError(f"cannot parse the options of pass '{name}': {exc}") from None
    for token in tokens:
        key, has_value, raw = token.partition("=")
        option = info.option(key)
        if not has_value:
            if option.type is not bool:
                raise PipelineError(f"option '{key}' of pass '{name}' needs a value")
            raw = "true"
        options[key] = option.parse(name, raw)
    return PassInvocation(info, options)


def parse_pipeline(text: str) -> list[PassInvocation]:
    """Parse ``a,b{k=v k2=v2},c``; an optional ``builtin.module(...)`` wrapper is accepted."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    if not text:
        return []
    return [_parse_element(part) for part in _split_top_level(text)]


AfterPassHook = Callable[[PassInvocation, ir.Module], None]


def run_pipeline(
    module: ir.Module,
    pipeline: Sequence[PassInvocation],
    context: PassContext,
    after_pass: AfterPassHook | None = None,
    verify_each: bool = False,
) -> None:
    """Run the passes in order, then verify the module once.

    With ``verify_each`` (``--verify-each``, as mlir-opt has) the module is verified after
    every pass instead, so that an invalid module is blamed on the pass that made it; off by
    default because a verify of the rewritten module costs more than most passes."""
    try:
        for invocation in pipeline:
            invocation.info.run(module, invocation.options, context)
            if verify_each:
                _verify(module, f"pass '{invocation.info.name}'")
            if after_pass is not None:
                after_pass(invocation, module)
        if pipeline and not verify_each:
            names = ",".join(invocation.info.name for invocation in pipeline)
            _verify(module, f"pipeline '{names}'", " (--verify-each names the pass)")
    finally:
        context._location_texts.clear()  # no IR handle outlives the pipeline's context


def _verify(module: ir.Module, culprit: str, hint: str = "") -> None:
    try:
        module.operation.verify()
    except ir.MLIRError as exc:
        diagnostics = getattr(exc, "error_diagnostics", None) or []
        detail = diagnostics[0].message if diagnostics else str(exc)
        raise RewriteError(f"internal error: {culprit} produced an invalid module{hint}: "
                           + " ".join(detail.split())) from None
