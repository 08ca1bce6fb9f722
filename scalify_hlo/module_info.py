"""What running a module on the host needs beyond its entry signature: the names of its
arguments and results, the original signature when it is a scaled rewrite, and which
arguments hold squares (random inputs for those must be non-negative).

A scaled rewrite records its original entry type in ``scalify.original_type``
(``scalify_hlo.names``); ``run`` then takes inputs in the original signature, as ``compare``
does. Squares: random unit-normal values for Adam's second moment make ``sqrt(nu)`` NaN in the
original program too, so an argument whose name says ``nu`` (optax's name) or whose value
flows into a ``sqrt``/``rsqrt`` through adds, multiplies and divides by scalars, converts,
broadcasts and reshapes (and into private functions it is passed to) gets ``|x|``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jax.extend.mlir import ir

from scalify_hlo import module_io
from scalify_hlo.names import (
    ORIGINAL_TYPE_ATTR,
    argument_names,
    result_names,
)
from scalify_hlo.rewrites.delayed_statistics import delayed_count_of
from scalify_hlo.signature import EntrySignature, signature_of_type
from scalify_hlo.symbols import entry_function

# Path components that name a second moment (optax's Adam, AdamW, RMSProp...: ``nu``).
SQUARE_NAMES = ("nu",)
_SQUARE_NAME_RE = re.compile(
    r"(?:^|[.\[\]'\"])(?:" + "|".join(SQUARE_NAMES) + r")(?=$|[.\[\]'\"])")
_ROOTS = frozenset({"stablehlo.sqrt", "stablehlo.rsqrt"})
# Ops whose result is non-negative wherever their operand is (given the other operand).
_PASS_THROUGH = frozenset({"stablehlo.add", "stablehlo.convert", "stablehlo.broadcast_in_dim",
                           "stablehlo.reshape"})
# operand position -> ops through which it passes when the other operand is a scalar.
_BY_SCALAR = {"stablehlo.multiply": (0, 1), "stablehlo.divide": (0,)}


@dataclass(frozen=True)
class ModuleInfo:
    """Names (None where the module has none), the original signature of a scaled rewrite
    (None for a plain module) and the entry arguments that hold squares."""

    input_names: tuple[str | None, ...]
    result_names: tuple[str | None, ...]
    original: EntrySignature | None
    square_inputs: frozenset[int]
    # Exponents of delayed statistics the entry function returns last (0: none).
    delayed: int = 0


def module_info(source: str | bytes, filename: str = "-") -> ModuleInfo:
    """Parse ``source`` once and describe its entry function."""
    with module_io.ir_context():
        module = module_io.parse_module(source, filename)
        func = entry_function(module)
        names = argument_names(func)
        original = _original_signature(func)
        functions = _functions(module)
        arguments = func.regions[0].blocks[0].arguments
        squares = frozenset(index for index, arg in enumerate(arguments)
                            if is_square_name(names[index]) or _reaches_root(arg, functions))
        return ModuleInfo(tuple(names), tuple(result_names(func)), original, squares,
                          delayed_count_of(func))


def _original_signature(func: ir.Operation) -> EntrySignature | None:
    """The signature recorded in ``scalify.original_type`` (None if absent or not a
    function type)."""
    if ORIGINAL_TYPE_ATTR not in func.attributes:
        return None
    attr = func.attributes[ORIGINAL_TYPE_ATTR]
    if not isinstance(attr, ir.TypeAttr) or not isinstance(attr.value, ir.FunctionType):
        return None
    return signature_of_type(attr.value)


def is_square_name(name: str | None) -> bool:
    """Whether a path names a second moment (``opt_state[0].nu['w']``)."""
    return name is not None and _SQUARE_NAME_RE.search(name) is not None


def _functions(module: ir.Module) -> dict[str, ir.Operation]:
    functions = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            functions[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return functions


def _reaches_root(start: ir.Value, functions: dict[str, ir.Operation]) -> bool:
    """Whether ``start`` flows into a sqrt/rsqrt through ``_PASS_THROUGH`` ops, multiplies
    and divides by scalars, and calls."""
    seen: set[ir.Value] = set()
    pending = [start]
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            op, position = use.owner, use.operand_number
            name = op.name
            if name in _ROOTS:
                return True
            if name in _PASS_THROUGH or (position in _BY_SCALAR.get(name, ()) and
                                         _is_scalar(op.operands[1 - position])):
                pending += list(op.results)
            elif name == "func.call":
                callee = functions.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
                if callee is not None and len(callee.regions[0].blocks):
                    pending.append(callee.regions[0].blocks[0].arguments[position])
    return False


def _is_scalar(value: ir.Value) -> bool:
    """A rank-0 value, a broadcast of one, or a splat constant."""
    if not isinstance(value.type, ir.RankedTensorType):
        return False
    if ir.RankedTensorType(value.type).rank == 0:
        return True
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    name = owner.name
    if name == "stablehlo.broadcast_in_dim":
        return ir.RankedTensorType(owner.operands[0].type).rank == 0
    if name == "stablehlo.constant":
        return ir.DenseElementsAttr(owner.attributes["value"]).is_splat
    return False
