"""Pytree paths of a module's entry arguments and results (``params['w']``, ``result[1]``).

JAX names what it exports: each argument by its location (``loc("params['w']")``, or a
``jax.arg_info`` attribute in older exports) and each result by ``jax.result_info``. The
scaled rewrite names the two halves of a split value ``<path>.data`` and ``<path>.scale``
(``docs/scaled-signature.md``) and records the original entry type in ``scalify.original_type``,
so that a scaled module can be run and described on its own. Messages name a value by its
index and, where known, its path: ``output 15 (result[1][0].mu['w'])``.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.extend.mlir import ir

ARG_NAME_ATTR = "jax.arg_info"
RESULT_NAME_ATTR = "jax.result_info"
# The entry function type before ``scalify`` split it (a function attribute of the rewrite).
ORIGINAL_TYPE_ATTR = "scalify.original_type"
DATA_SUFFIX, SCALE_SUFFIX = ".data", ".scale"
# On an argument's or result's data half: how its data encodes the value. ``sqrt``: the data
# holds the signed square root, ``original = x * |x|`` with ``x = data * scale``
# (docs/scaled-signature.md).
ENCODING_ATTR = "scalify.encoding"
SQRT_ENCODING = "sqrt"


def location_name(loc: ir.Location) -> str | None:
    """The name of a name location (``loc("params['w']")``), else None (a file location
    ``loc("-":1:2)`` names no value)."""
    return loc.name_str if isinstance(loc, ir.NameLoc) else None


def string_attr(attrs: ir.Attribute | None, index: int, name: str) -> str | None:
    """The string attribute ``name`` of entry ``index`` of an ``arg_attrs``/``res_attrs``."""
    if attrs is None:
        return None
    array = ir.ArrayAttr(attrs)
    if index >= len(array):
        return None
    entry = ir.DictAttr(array[index])
    if name not in entry:
        return None
    attr = entry[name]
    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def _func_attr(func: ir.Operation, name: str) -> ir.Attribute | None:
    return func.attributes[name] if name in func.attributes else None


def argument_names(func: ir.Operation) -> list[str | None]:
    """Per entry argument, its path: ``jax.arg_info``, else its name location."""
    block = func.regions[0].blocks[0]
    attrs = _func_attr(func, "arg_attrs")
    return [string_attr(attrs, index, ARG_NAME_ATTR) or location_name(arg.location)
            for index, arg in enumerate(block.arguments)]


def result_names(func: ir.Operation) -> list[str | None]:
    """Per entry result, its path (``jax.result_info``)."""
    attrs = _func_attr(func, "res_attrs")
    count = len(ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results)
    return [string_attr(attrs, index, RESULT_NAME_ATTR) for index in range(count)]


def half_name(name: str | None, suffix: str) -> str | None:
    """``name`` of a split value's data or scale half (``p['w'].scale``)."""
    if name is None:
        return None
    return name if name.endswith(suffix) else f"{name}{suffix}"


def whole_name(name: str | None) -> str | None:
    """The path of the value a data half belongs to (``p['w'].data`` -> ``p['w']``)."""
    if name is None:
        return None
    return name.removesuffix(DATA_SUFFIX)


def label(index: int, names: Sequence[str | None]) -> str:
    """``15 (opt_state[0].mu['w'])``, or ``15`` when the value has no name."""
    name = names[index] if index < len(names) else None
    return f"{index} ({name})" if name else str(index)
