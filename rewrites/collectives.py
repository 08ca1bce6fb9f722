"""Scale rules for sharded programs: ``sdy.manual_computation`` (shard_map), sharding
annotations and the collectives inside manual regions.

A manual region runs one copy of its body per device. A scale is one scalar for the whole
(global) tensor, so every device must use the same one wherever values of several devices
meet (a sum, a gather) and wherever a value leaves the region. Scales that enter the region
are replicated scalars and static scales are the same everywhere; a scale the body computes
from its local data (a rescale's amax, a loop-carried scale) may differ per device. Such
scales are *agreed*: one max all-reduce of their i32 exponents (several packed into one
vector) over the devices concerned, then each device's data shifted by its own exponent's
distance to the maximum (exact, a power of two; values that fall below the data type's range
flush as under ``common-scale=max``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.rewrites.device_invariance import DeviceInvariance
from scalify_hlo.rewrites.emitter import MIN_NORMAL_EXP, Emitter, attributes_of
from scalify_hlo.rewrites.regions import is_homogeneous
from scalify_hlo.rewrites.rule_impls import emit_like, rule_same_scale, rule_unscaled
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.shardings import MESH_REF_RE, split_axes
from scalify_hlo.scale import Factor, Scale

_MESH_AXIS_RE = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_DEVICE_IDS_RE = re.compile(r"device_ids\s*=\s*\[([^\]]*)\]")
_CHANNEL = "#stablehlo.channel_handle<handle = 1, type = 1>"
_DYNAMIC = "dynamic"  # a manual computation's result whose scale leaves as an exponent


@dataclass
class ManualRegion:
    """What the rules inside one manual region need: the device groups over its manual axes
    and the runtime scale factors known to be equal on every device of a group."""

    groups: list[list[int]]
    uniform: set[Factor] = field(default_factory=set)
    invariance: DeviceInvariance | None = None  # which body values every device shares

    def is_uniform(self, value: Scaled) -> bool:
        """Static scales and scales built only from uniform factors are the same everywhere,
        and so are those computed from values every device holds (device_invariance.py);
        zeros, infs and NaNs hold at any scale."""
        if value.any_scale:
            return True
        for factor, _ in value.scale.factors:
            if factor in self.uniform:
                continue
            if self.invariance is None or not isinstance(factor.value, ir.Value) or (
                    not self.invariance(factor.value)):
                return False
            self.uniform.add(factor)
        return True


_REGION_ATTR = "_scalify_manual_region"


def manual_region(scope: Scope) -> ManualRegion | None:
    """The manual region ``scope`` is in (its own or an enclosing block's), if any."""
    current: Scope | None = scope
    while current is not None:
        found = getattr(current, _REGION_ATTR, None)
        if found is not None:
            return found
        current = current.parent
    return None


# ----- sharding annotations ---------------------------------------------------------------
def rule_sharding_annotation(scope: Scope, op: ir.Operation) -> None:
    """``sdy.sharding_constraint``: the data gets the annotation, the scale (a replicated
    scalar) is unchanged."""
    rule_same_scale(scope, op)


# ----- the mesh ----------------------------------------------------------------------------
def _mesh_text(op: ir.Operation, ref: str) -> str:
    """The ``#sdy.mesh<...>`` text of a sharding's mesh: inline, or the ``sdy.mesh`` symbol
    it names in the enclosing module."""
    if ref.startswith("mesh<"):
        return ref
    name = ref[1:]
    module = op
    while module.parent is not None:
        module = module.parent
    for candidate in module.regions[0].blocks[0].operations:
        candidate = candidate.operation
        if candidate.name == "sdy.mesh" and \
                ir.StringAttr(candidate.attributes["sym_name"]).value == name:
            return str(candidate.attributes["mesh"])
    raise RewriteError(f"sdy mesh '{name}' not found")


def _manual_groups(mesh: str, manual: set[str]) -> list[list[int]]:
    """Device ids of each group of devices that differ only along the manual axes (what a
    collective over all of them uses: ``use_global_device_ids`` with the mesh's ids)."""
    axes = [(name, int(size)) for name, size in _MESH_AXIS_RE.findall(mesh)]
    count = math.prod(size for _, size in axes)
    ids_match = _DEVICE_IDS_RE.search(mesh)
    ids = ([int(x) for x in ids_match.group(1).split(",")] if ids_match
           else list(range(count)))
    groups: dict[tuple[int, ...], list[int]] = {}
    for linear, coords in enumerate(itertools.product(*(range(s) for _, s in axes))):
        key = tuple(c for (name, _), c in zip(axes, coords, strict=True) if name not in manual)
        groups.setdefault(key, []).append(ids[linear])
    return list(groups.values())


def _groups_attr(groups: list[list[int]]) -> ir.Attribute:
    rows = ", ".join("[" + ", ".join(str(i) for i in g) + "]" for g in groups)
    return ir.Attribute.parse(
        f"dense<[{rows}]> : tensor<{len(groups)}x{len(groups[0])}xi64>")


# ----- agreeing on scales ------------------------------------------------------------------
def agree(scope: Scope, region: ManualRegion, values: Sequence[Scaled],
          groups: list[list[int]]) -> list[Scaled]:
    """``values`` with scales equal on every device of each of ``groups``: those that are
    not already are brought to the group's largest exponent by one combined max
    all-reduce (one per call, whatever the count)."""
    pending = [i for i, v in enumerate(values) if not region.is_uniform(v)]
    if not pending:
        return list(values)
    emit, i32 = scope.emit, scope.state.types.scalar_i32
    packed = emit.vector_of([scope.exponent(values[i].scale) for i in pending])
    reduced = _all_reduce_max(emit, packed, groups)
    scope.state.context.bump("scalify.agreed-scales", len(pending))
    out = list(values)
    for position, index in enumerate(pending):
        agreed = emit.element(reduced, position)
        value = values[index]
        shift = emit.clamp_exponent(emit.binary(
            "stablehlo.subtract", scope.exponent(value.scale), agreed, i32),
            MIN_NORMAL_EXP - 1, 0)
        data = emit.times_factor(value.data, emit.pow2_of_exponent(shift))
        scale = Scale.dynamic(agreed)
        if _covers(groups, region.groups):
            region.uniform.add(scale.factors[0][0])
        out[index] = Scaled(data, scale)
    return out


def _covers(groups: list[list[int]], region_groups: list[list[int]]) -> bool:
    """Whether agreeing within ``groups`` makes a value equal on every device of each of the
    region's groups (each region group inside one of ``groups``)."""
    owner = {device: n for n, group in enumerate(groups) for device in group}
    return all(len({owner.get(d, -1 - d) for d in group}) == 1 for group in region_groups)


def _all_reduce_max(emit: Emitter, value: ir.Value, groups: list[list[int]]) -> ir.Value:
    reduce = emit.op("stablehlo.all_reduce", [value], [value.type], {
        "replica_groups": _groups_attr(groups),
        "channel_handle": ir.Attribute.parse(_CHANNEL),
        "use_global_device_ids": ir.UnitAttr.get(),
    }, regions=1)
    scalar = ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
    block = reduce.regions[0].blocks.append(scalar, scalar)
    inner = Emitter(ir.InsertionPoint(block), emit.loc, types=emit.types)
    inner.op("stablehlo.return", [inner.binary("stablehlo.maximum", *block.arguments)], [])
    return reduce.results[0]


# ----- collectives -------------------------------------------------------------------------
def _collective_groups(op: ir.Operation, region: ManualRegion) -> list[list[int]]:
    """The op's replica groups (device ids), or the region's where it has none."""
    if "replica_groups" not in op.attributes:
        return region.groups
    groups = [[int(x) for x in row] for row in
              _dense_rows(op.attributes["replica_groups"])]
    return groups or region.groups


def _dense_rows(attr: ir.Attribute) -> list[list[int]]:
    """Rows of a rank-2 integer dense attribute (replica groups), read from its text."""
    text = str(attr)
    body = text[text.index("<") + 1:text.rindex(">")]
    rows = re.findall(r"\[([^\[\]]*)\]", body)
    if not rows:  # a splat or a single row
        return [[int(x) for x in re.findall(r"-?\d+", body)]]
    return [[int(x) for x in row.split(",") if x.strip()] for row in rows]


def rule_collective(scope: Scope, op: ir.Operation) -> None:
    """all_reduce, reduce_scatter (sum, max or min), all_gather, all_to_all: each float
    operand at a scale every device of the op's groups shares (agreed if not known to be),
    the op on the data, results at those scales."""
    region = manual_region(scope)
    if region is None or (op.regions and not is_homogeneous(op.regions[0])):
        rule_unscaled(scope, op, report="has no scale rule here (outside a manual region, "
                      "or a reducer that does not commute with scaling)")
        return
    olds = list(op.operands)
    floats = [i for i, v in enumerate(olds) if scope.is_scaled(v)]
    agreed = agree(scope, region, [scope.scaled(olds[i]) for i in floats],
                   _collective_groups(op, region))
    operands = [v if scope.is_scaled(v) else scope.in_original_type(v) for v in olds]
    for i, value in zip(floats, agreed, strict=True):
        operands[i] = value.data
    new = emit_like(scope, op, operands)
    results = list(op.results)
    for index, result in enumerate(results):
        if scope.state.types.is_scalable(result.type):
            # variadic collectives map operand i to result i
            source = agreed[floats.index(index)]
            scope.set(result, Scaled(new.results[index], source.scale, source.any_scale))
        else:
            scope.set(result, new.results[index])


def rule_collective_permute(scope: Scope, op: ir.Operation) -> None:
    """collective_permute: data moves from source to target device, so the scale must move
    with it: a uniform scale stays, another one is permuted beside the data (a device that
    receives nothing gets zeros, valid at any scale)."""
    region = manual_region(scope)
    if region is None or not scope.is_scaled(op.operands[0]):
        rule_unscaled(scope, op, report="has no scale rule outside a manual region")
        return
    value = scope.scaled(op.operands[0])
    new = emit_like(scope, op, [value.data])
    scale = value.scale
    if not region.is_uniform(value):
        moved = scope.emit.op(op.name, [scope.exponent(value.scale)],
                              [scope.state.types.scalar_i32], attributes_of(op))
        scale = Scale.dynamic(moved.results[0])
    scope.set(op.results[0], Scaled(new.results[0], scale, value.any_scale))


# ----- sdy.manual_computation ----------------------------------------------------------
def _shardings(op: ir.Operation, name: str) -> list[ir.Attribute]:
    from jax._src.lib.mlir.dialects import sdy  # the sdy attribute bindings

    return list(sdy.TensorShardingPerValueAttr(op.attributes[name]).shardings)


def _per_value(shardings: list[ir.Attribute]) -> ir.Attribute:
    from jax._src.lib.mlir.dialects import sdy

    return sdy.TensorShardingPerValueAttr.get(shardings)


def _mesh_ref(op: ir.Operation) -> str:
    for name in ("in_shardings", "out_shardings"):
        for sharding in _shardings(op, name):
            match = MESH_REF_RE.search(str(sharding))
            if match:
                return match.group(1)
    raise RewriteError("sdy.manual_computation without operand or result shardings")


def _manual_axes(op: ir.Operation) -> set[str]:
    return set(re.findall(r'"([^"]+)"', str(op.attributes["manual_axes"])))


def _replicated_over(sharding: ir.Attribute, axes: set[str]) -> bool:
    """Whether a ``#sdy.sharding`` splits no dimension over ``axes`` (every device of the
    manual region gets the whole value)."""
    split = split_axes(sharding)
    return split is not None and not split & axes


def rule_manual_computation(scope: Scope, op: ir.Operation) -> None:
    """shard_map's region: (data, scale) pairs through block arguments and ``sdy.return``.

    A runtime scale enters as a replicated rank-0 i32 exponent beside its data (a static one
    stays static inside), the body is rewritten like any block, and a result's scale leaves
    the same way, agreed over the manual axes first when the body computed it per device."""
    mesh_ref = _mesh_ref(op)
    replicated = ir.Attribute.parse(f"#sdy.sharding<{mesh_ref}, []>")
    region = ManualRegion(_manual_groups(_mesh_text(op, mesh_ref), _manual_axes(op)))
    in_shardings, out_shardings = _shardings(op, "in_shardings"), _shardings(op, "out_shardings")
    old_block = op.regions[0].blocks[0]
    old_args = list(old_block.arguments)
    i32 = scope.state.types.scalar_i32
    operands: list[ir.Value] = []
    arg_types: list[ir.Type] = []
    new_in: list[ir.Attribute] = []
    bindings: list[tuple[ir.Value, int, Scaled | None]] = []  # old arg, new position, outer
    for old, arg, sharding in zip(op.operands, old_args, in_shardings, strict=True):
        if not scope.is_scaled(old):
            bindings.append((arg, len(operands), None))
            operands.append(scope.in_original_type(old))
            arg_types.append(arg.type)
            new_in.append(sharding)
            continue
        value = scope.scaled(old)
        inner_type = scope.data_type_of(arg)
        element = ir.RankedTensorType(inner_type).element_type
        bindings.append((arg, len(operands), value))
        operands.append(scope.emit.convert(value.data, element))
        arg_types.append(inner_type)
        new_in.append(sharding)
        if not value.scale.is_static:
            operands.append(scope.exponent(value.scale))
            arg_types.append(i32)
            new_in.append(replicated)
    holder = scope.emit.op(op.name, [], [], {}, regions=1)
    block = holder.regions[0].blocks.append(*arg_types)
    body = Scope(scope.state, block, None)  # isolated from above: nothing outer is visible
    body.emit = Emitter(ir.InsertionPoint(block), scope.emit.loc, constants={},
                        types=scope.state.types)
    setattr(body, _REGION_ATTR, region)
    arguments = list(block.arguments)
    manual = _manual_axes(op)
    known = [arguments[position] for (_, position, _), sharding
             in zip(bindings, in_shardings, strict=True) if _replicated_over(sharding, manual)]
    known += [arguments[position + 1] for _, position, outer in bindings
              if outer is not None and not outer.scale.is_static]
    region.invariance = DeviceInvariance(known, lambda collective: _covers(
        _collective_groups(collective, region), region.groups))
    for arg, position, outer in bindings:
        if outer is None:
            body.set(arg, arguments[position])
        elif outer.scale.is_static:
            body.set(arg, Scaled(arguments[position], outer.scale, outer.any_scale))
        else:
            scale = Scale.dynamic(arguments[position + 1])
            region.uniform.add(scale.factors[0][0])
            body.set(arg, Scaled(arguments[position], scale, outer.any_scale))
    terminator = None
    for inner in old_block.operations:
        inner = inner.operation
        if inner.name == "sdy.return":
            terminator = inner
            break
        body.rewrite_op(inner)
    if terminator is None:
        raise RewriteError("sdy.manual_computation body has no sdy.return")
    body.emit = body.emit.at(terminator.location)
    returned = list(terminator.operands)
    floats = [i for i, v in enumerate(returned) if body.is_scaled(v)]
    agreed = agree(body, region, [body.scaled(returned[i]) for i in floats], region.groups)
    by_index = dict(zip(floats, agreed, strict=True))
    yields: list[ir.Value] = []
    result_types: list[ir.Type] = []
    new_out: list[ir.Attribute] = []
    outer_scales: list[Scale | None | str] = []  # static scale, None (no float), DYNAMIC
    for index, (old, result, sharding) in enumerate(zip(returned, op.results, out_shardings,
                                                        strict=True)):
        value = by_index.get(index)
        if value is None:
            yields.append(body.in_original_type(old))
            result_types.append(result.type)
            new_out.append(sharding)
            outer_scales.append(None)
            continue
        outer_type = scope.data_type_of(result)
        element = ir.RankedTensorType(outer_type).element_type
        yields.append(body.emit.convert(value.data, element))
        result_types.append(outer_type)
        new_out.append(sharding)
        if value.scale.is_static:
            outer_scales.append(value.scale)
        else:
            yields.append(body.exponent(value.scale))
            result_types.append(i32)
            new_out.append(replicated)
            outer_scales.append(_DYNAMIC)
    body.emit.op("sdy.return", yields, [])
    attributes = attributes_of(op)
    attributes["in_shardings"] = _per_value(new_in)
    attributes["out_shardings"] = _per_value(new_out)
    new = scope.emit.op(op.name, operands, result_types, attributes, regions=1)
    block.append_to(new.regions[0])
    holder.erase()
    _bind_manual_results(scope, op, new, by_index, outer_scales)


def _bind_manual_results(scope: Scope, op: ir.Operation, new: ir.Operation,
                         by_index: dict[int, Scaled],
                         outer_scales: list[Scale | None | str]) -> None:
    """Map the original results to the new op's: data alone (static scale or no float), or
    data and exponent."""
    results = list(new.results)
    position = 0
    for index, old in enumerate(op.results):
        scale = outer_scales[index]
        if scale is None:
            scope.set(old, results[position])
            position += 1
        elif isinstance(scale, Scale):
            scope.set(old, Scaled(results[position], scale, by_index[index].any_scale))
            position += 1
        else:
            scope.set(old, Scaled(results[position], Scale.dynamic(results[position + 1]),
                                  by_index[index].any_scale))
            position += 2
