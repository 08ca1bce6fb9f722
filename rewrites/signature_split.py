"""The entry function's signature after scalify: each float argument and result becomes a
(data, scale) pair, with its attributes (names, shardings, aliasing, encoding) carried over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jax.extend.mlir import ir

from scalify_hlo.flat_pairs import flat_positions
from scalify_hlo.names import (
    ARG_NAME_ATTR,
    DATA_SUFFIX,
    ENCODING_ATTR,
    SCALE_SUFFIX,
    SQRT_ENCODING,
    argument_names,
    half_name,
)
from scalify_hlo.rewrites.emitter import is_scalable_type
from scalify_hlo.rewrites.scope import Scope
from scalify_hlo.rewrites.shardings import MESH_REF_RE


def dict_attr(attrs: ir.Attribute | None, index: int) -> dict[str, ir.Attribute]:
    if attrs is None:
        return {}
    entry = ir.DictAttr(ir.ArrayAttr(attrs)[index])
    return {named.name: named.attr for named in (entry[i] for i in range(len(entry)))}


def replicated_attrs(data_attrs: dict[str, ir.Attribute], rank: int = 0
                     ) -> dict[str, ir.Attribute]:
    """The sharding attributes of a value of ``rank`` replicated on the mesh of
    ``data_attrs``: a scale is replicated wherever its data is sharded (and so is the
    vector of delayed exponents)."""
    attrs: dict[str, ir.Attribute] = {}
    if "mhlo.sharding" in data_attrs:
        attrs["mhlo.sharding"] = ir.StringAttr.get("{replicated}")
    if "sdy.sharding" in data_attrs:
        match = MESH_REF_RE.search(str(data_attrs["sdy.sharding"]))
        if match:
            dims = ", ".join(["{}"] * rank)
            attrs["sdy.sharding"] = ir.Attribute.parse(
                f"#sdy.sharding<{match.group(1)}, [{dims}]>")
    return attrs


def _with_suffix(attrs: dict[str, ir.Attribute], suffix: str) -> dict[str, ir.Attribute]:
    if "jax.result_info" in attrs:
        attrs = dict(attrs)
        info = ir.StringAttr(attrs["jax.result_info"]).value
        attrs["jax.result_info"] = ir.StringAttr.get(f"{info}{suffix}")
    return attrs


def _with_name(attrs: dict[str, ir.Attribute], name: str | None) -> dict[str, ir.Attribute]:
    """``attrs`` with ``jax.arg_info = name``: an argument keeps its path when the module is
    printed without locations (where JAX's export keeps it)."""
    if name is None:
        return attrs
    return {**attrs, ARG_NAME_ATTR: ir.StringAttr.get(name)}


def _encoded(attrs: dict[str, ir.Attribute], is_encoded: bool) -> dict[str, ir.Attribute]:
    """``attrs`` with ``scalify.encoding = "sqrt"`` for a data half stored as a square root."""
    if not is_encoded:
        return attrs
    return {**attrs, ENCODING_ATTR: ir.StringAttr.get(SQRT_ENCODING)}


def scale_location(loc: ir.Location) -> ir.Location:
    text = str(loc)
    match = re.match(r'loc\("([^"]*)"\)$', text)
    return ir.Location.name(f"{match.group(1)}.scale") if match else loc


class SignatureSplit:
    """How the entry function's arguments and results map to the flattened signature."""

    def __init__(self, func: ir.Operation, scope: Scope,
                 encoded: frozenset[ir.Value] = frozenset(),
                 stored: Mapping[ir.Value, ir.Type] | None = None) -> None:
        function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        self.inputs = list(function_type.inputs)
        self.results = list(function_type.results)
        block = func.regions[0].blocks[0]
        returned = returned_values(block)
        # Which arguments and results cross the boundary as signed square roots, in the
        # data dtype (``square_from_root``, ``root_from_square``); ``stored`` gives the data
        # element type of state stored otherwise (FP8 moments, ``boundary_storage``).
        self.encoded_inputs = [a in encoded for a in block.arguments]
        self.encoded_results = ([v in encoded for v in returned] if returned is not None
                                else [False] * len(self.results))
        storage = scope.state.data_dtype
        types = scope.state.types
        stored = stored or {}

        def data_type(old: ir.Value, is_encoded: bool) -> ir.Type:
            if old in stored:
                return types.with_element_type(old.type, stored[old])
            return (types.with_element_type(old.type, storage) if is_encoded
                    else scope.data_type_of(old))

        self.input_data_types = [data_type(a, e) for a, e in
                                 zip(block.arguments, self.encoded_inputs, strict=True)]
        self.result_data_types = ([data_type(v, e) for v, e in
                                   zip(returned, self.encoded_results, strict=True)]
                                  if returned is not None else
                                  [scope.data_type(t) for t in self.results])
        self._returned = returned or []
        self.arg_attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
        self.arg_names = argument_names(func)
        self.res_attrs = func.attributes["res_attrs"] if "res_attrs" in func.attributes else None
        self.result_positions = flat_positions(is_scalable_type(t) for t in self.results)

    def result_data_type(self, value: ir.Value) -> ir.Type:
        """The element type of a returned value's data half in the new signature."""
        return ir.RankedTensorType(
            self.result_data_types[self._returned.index(value)]).element_type

    def new_inputs(self) -> list[ir.Type]:
        return self._flat(self.inputs, self.input_data_types)

    def new_results(self) -> list[ir.Type]:
        return self._flat(self.results, self.result_data_types)

    @staticmethod
    def _flat(types: list[ir.Type], data_types: list[ir.Type]) -> list[ir.Type]:
        flat: list[ir.Type] = []
        for t, data_type in zip(types, data_types, strict=True):
            flat.append(data_type)
            if is_scalable_type(t):
                flat.append(ir.RankedTensorType.get([], ir.F32Type.get()))
        return flat

    def _remap_aliasing(self, attrs: dict[str, ir.Attribute]) -> dict[str, ir.Attribute]:
        if "tf.aliasing_output" in attrs:
            old = ir.IntegerAttr(attrs["tf.aliasing_output"]).value
            if 0 <= old < len(self.result_positions):
                attrs = dict(attrs)
                attrs["tf.aliasing_output"] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), self.result_positions[old])
        return attrs

    def new_arg_attrs(self) -> ir.ArrayAttr:
        entries: list[ir.Attribute] = []
        for index, t in enumerate(self.inputs):
            attrs = self._remap_aliasing(dict_attr(self.arg_attrs, index))
            name = self.arg_names[index]
            if not is_scalable_type(t):
                entries.append(ir.DictAttr.get(_with_name(attrs, name)))
                continue
            data_attrs = _with_name(attrs, half_name(name, DATA_SUFFIX))
            entries.append(ir.DictAttr.get(_encoded(data_attrs, self.encoded_inputs[index])))
            entries.append(ir.DictAttr.get(_with_name(replicated_attrs(attrs),
                                                      half_name(name, SCALE_SUFFIX))))
        return ir.ArrayAttr.get(entries)

    def scale_arguments(self) -> list[int]:
        """The indices of the scale arguments in the new signature."""
        scaled = [is_scalable_type(t) for t in self.inputs]
        return [position + 1 for position, is_scaled in zip(flat_positions(scaled), scaled,
                                                            strict=True) if is_scaled]

    def new_res_attrs(self) -> ir.ArrayAttr:
        entries: list[ir.Attribute] = []
        for index, t in enumerate(self.results):
            attrs = dict_attr(self.res_attrs, index)
            if is_scalable_type(t):
                entries.append(ir.DictAttr.get(_encoded(_with_suffix(attrs, ".data"),
                                                        self.encoded_results[index])))
                scale_attrs = replicated_attrs(attrs)
                if "jax.result_info" in attrs:
                    scale_attrs["jax.result_info"] = attrs["jax.result_info"]
                entries.append(ir.DictAttr.get(_with_suffix(scale_attrs, ".scale")))
            else:
                entries.append(ir.DictAttr.get(attrs))
        return ir.ArrayAttr.get(entries)


def returned_values(block: ir.Block) -> list[ir.Value] | None:
    ops = block.operations
    count = len(ops)  # the last op by index: listing them all makes a handle per op
    if count and ops[count - 1].operation.name == "func.return":
        return list(ops[count - 1].operation.operands)
    return None
