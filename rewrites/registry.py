"""The pass registry and MLIR-style pipeline strings: ``inline,scalify{data-dtype=f32},simplify``.

Every pass is a frozen dataclass (``ModulePass``) with a name, a one-line description and
typed option fields with defaults, so that the CLI can list them, one parser reads every
pass's options from text, and a pipeline is validated (on construction) before any IR is
touched.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeVar

from jax.extend.mlir import ir

from scalify_hlo.errors import PipelineError, RewriteError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Option:
    """A pass option as the textual syntax and ``scalify-hlo passes`` see it: made from one
    field of the pass's dataclass (``min_size: int`` is ``min-size=<int>``).

    ``type`` is bool, int, float, str, or ``tuple[str, ...]`` (a comma-separated list);
    ``choices`` restricts string values."""

    name: str
    field: str
    type: Any
    default: Any
    help: str
    choices: tuple[str, ...] | None = None

    def parse(self, pass_name: str, raw: str) -> Any:
        """The typed value of ``raw``; choices are checked when the pass is constructed."""
        def bad(expected: str) -> PipelineError:
            return _bad_value(pass_name, self.name, raw, expected)

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
        if self.type == tuple[str, ...]:
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        return raw

    def check(self, pass_name: str, value: Any) -> None:
        """Refuse a value outside ``choices`` (whether parsed or given in Python)."""
        if self.choices is not None and value not in self.choices:
            raise _bad_value(pass_name, self.name, value, "one of " + ", ".join(self.choices))

    def render(self, value: Any) -> str:
        """``value`` as the textual syntax spells it (quoted where the parser needs it)."""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, str):
            return shlex.quote(value) if value else value
        return str(value)

    def describe(self) -> str:
        kind = "|".join(self.choices) if self.choices else (
            "str" if self.type == tuple[str, ...] else self.type.__name__)
        default = str(self.default).lower() if isinstance(self.default, bool) else (
            ",".join(self.default) if isinstance(self.default, tuple) else self.default)
        return f"{self.name}=<{kind}> (default: {default}) {self.help}"


def _bad_value(pass_name: str, option: str, raw: Any, expected: str) -> PipelineError:
    return PipelineError(f"invalid value '{raw}' for option '{option}' of pass '{pass_name}': "
                         f"expected {expected}")


def option(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A field of a pass: its default, a one-line help and, for a string, its choices."""
    return field(default=default, metadata={"help": help, "choices": choices})


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
RECORD_KINDS = ("static", "runtime", "update", "rescale", "fp8", "not-fp8", "wide", "fallback",
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


@dataclass(frozen=True)
class ModulePass:
    """A pass, as xDSL's ``ModulePass``: a frozen dataclass whose fields are its options.

    A subclass sets ``name`` and ``description``, declares its options as typed fields
    (``option(default, help, choices)``) and implements ``apply``. Constructing it validates
    every option (choices, then the pass's own ``validate``), so a pipeline, whether parsed
    from text or built by ``Policy.passes()``, is checked before any IR is touched."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __post_init__(self) -> None:
        for opt in self.options():
            opt.check(self.name, getattr(self, opt.field))
        self.validate()

    def validate(self) -> None:
        """Checks beyond an option's choices; raise PipelineError."""

    def apply(self, module: ir.Module, context: PassContext) -> None:
        raise NotImplementedError

    @classmethod
    def options(cls) -> tuple[Option, ...]:
        """The options, in field order, made from the dataclass fields and their types."""
        return _options_of(cls)

    @classmethod
    def option(cls, name: str) -> Option:
        for opt in cls.options():
            if opt.name == name:
                return opt
        valid = ", ".join(o.name for o in cls.options()) or "none"
        raise PipelineError(f"unknown option '{name}' for pass '{cls.name}' (options: {valid})")

    @classmethod
    def parse_options(cls, tokens: Sequence[str]) -> ModulePass:
        """The pass with options from ``key=value`` tokens (a bool option may be bare)."""
        values = {}
        for token in tokens:
            key, has_value, raw = token.partition("=")
            opt = cls.option(key)
            if not has_value:
                if opt.type is not bool:
                    raise PipelineError(f"option '{key}' of pass '{cls.name}' needs a value")
                raw = "true"
            values[opt.field] = opt.parse(cls.name, raw)
        return cls(**values)

    def text(self, spelled: Sequence[str] = ()) -> str:
        """The pass in the textual syntax: its options that differ from their defaults,
        and those named in ``spelled`` (Policy's pipeline spells out the data dtype)."""
        shown = [f"{opt.name}={opt.render(value)}" for opt in self.options()
                 if (value := getattr(self, opt.field)) != opt.default or opt.name in spelled]
        return f"{self.name}{{{' '.join(shown)}}}" if shown else self.name

    def __str__(self) -> str:
        return self.text()


@functools.cache
def _options_of(cls: type[ModulePass]) -> tuple[Option, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(Option(f.name.replace("_", "-"), f.name, hints[f.name], f.default,
                        f.metadata.get("help", ""), f.metadata.get("choices"))
                 for f in dataclasses.fields(cls))


PASSES: dict[str, type[ModulePass]] = {}

P = TypeVar("P", bound=ModulePass)


def register(name: str, description: str) -> Callable[[type[P]], type[P]]:
    """Class decorator: the pass ``name`` (what pipelines and ``scalify-hlo passes`` call it),
    made a frozen dataclass of its option fields and known to pipelines."""

    def declare(cls: type[P]) -> type[P]:
        if name in PASSES:
            raise ValueError(f"pass '{name}' registered twice")
        cls.name, cls.description = name, description
        declared = dataclass(frozen=True)(cls)
        PASSES[name] = declared
        return declared

    return declare


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


def _parse_element(element: str) -> ModulePass:
    element = element.strip()
    if not element:
        raise PipelineError("empty pass name in pipeline")
    name, _, rest = element.partition("{")
    name = name.strip()
    if rest and not rest.rstrip().endswith("}"):
        raise PipelineError(f"expected '}}' at the end of the options of pass '{name}'")
    cls = PASSES.get(name)
    if cls is None:
        known = ", ".join(sorted(PASSES))
        raise PipelineError(f"unknown pass '{name}' (known passes: {known})")
    body = rest.rstrip()[:-1] if rest else ""
    try:
        tokens = shlex.split(body)
    except ValueError as exc:
        raise PipelineError(f"cannot parse the options of pass '{name}': {exc}") from None
    return cls.parse_options(tokens)


def parse_pipeline(text: str) -> list[ModulePass]:
    """Parse ``a,b{k=v k2=v2},c``; an optional ``builtin.module(...)`` wrapper is accepted."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    if not text:
        return []
    return [_parse_element(part) for part in _split_top_level(text)]


def print_pipeline(passes: Sequence[ModulePass]) -> str:
    """The textual pipeline that ``parse_pipeline`` reads back as ``passes``."""
    return ",".join(str(p) for p in passes)


AfterPassHook = Callable[[ModulePass, ir.Module], None]


def run_pipeline(
    module: ir.Module,
    pipeline: Sequence[ModulePass],
    context: PassContext,
    after_pass: AfterPassHook | None = None,
    verify_each: bool = False,
) -> None:
    """Run the passes in order, then verify the module once.

    With ``verify_each`` (``--verify-each``, as mlir-opt has) the module is verified after
    every pass instead, so that an invalid module is blamed on the pass that made it; off by
    default because a verify of the rewritten module costs more than most passes."""
    try:
        for module_pass in pipeline:
            module_pass.apply(module, context)
            if verify_each:
                _verify(module, f"pass '{module_pass.name}'")
            if after_pass is not None:
                after_pass(module_pass, module)
        if pipeline and not verify_each:
            names = ",".join(module_pass.name for module_pass in pipeline)
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
