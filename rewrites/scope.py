"""The state of a scalify rewrite inside one block: the value map and what it has emitted.

An original value maps either to a ``Scaled`` pair (floating tensors) or to one new value
(integers, booleans, tokens, and floats the pass leaves alone such as f64). Materialized
scales and unscaled copies are cached per block, and nested blocks see their parents'.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.module_io import short_location
from scalify_hlo.rewrites.common_scale import CommonScale
from scalify_hlo.rewrites.constant_values import finite_splat, splat_constant_value
from scalify_hlo.rewrites.dynamic_rescale import Rescaler
from scalify_hlo.rewrites.emitter import Emitter, with_element_type
from scalify_hlo.rewrites.scale_builder import ScaleBuilder
from scalify_hlo.rewrites.scalify_state import (
    RESCALE_ATTR,
    RESCALE_DRIFTING_ATTR,
    Mapped,
    Scaled,
    ScalifyState,
)
from scalify_hlo.rewrites.sliced_stacks import SlicedStack, at_one_scale
from scalify_hlo.rewrites.type_converter import TypeConverter
from scalify_hlo.rewrites.walk import Walker, describe_runtime
from scalify_hlo.scale import Scale

__all__ = ["RESCALE_ATTR", "RESCALE_DRIFTING_ATTR", "Mapped", "Scaled",
           "ScalifyState", "Scope", "describe_runtime"]


class Scope(ScaleBuilder, CommonScale, Rescaler, TypeConverter, Walker):
    """The value map of one block, and the block's emitter; its other jobs are the mixins':
    scale materialization (``scale_builder``), the common-scale policy (``common_scale``),
    dynamic rescaling (``dynamic_rescale``), types and flattening (``type_converter``), and
    the walk over ops (``walk``)."""

    def __init__(self, state: ScalifyState, block: ir.Block, parent: Scope | None = None):
        self.state = state
        self.block = block
        self.parent = parent
        self.values: dict[ir.Value, Mapped | SlicedStack] = {}
        self._stacks_at_one_scale: dict[ir.Value, Scaled] = {}
        self._materialized: dict[Scale, ir.Value] = {}
        self._factors: dict[tuple[Scale, str], ir.Value] = {}
        self._unscaled: dict[ir.Value, ir.Value] = {}
        self._converted: dict[tuple[ir.Value, ir.Type], ir.Value] = {}
        self._rescaled_narrow: dict[tuple[ir.Value, ir.Type], Scaled] = {}
        self.emit = Emitter(ir.InsertionPoint(block), ir.Location.unknown(), constants={},
                            types=state.types)
        # The op being rewritten, its results and their types (see ``results_of``).
        self._op: ir.Operation | None = None
        self._results: list[ir.Value] = []
        self._result_types: list[ir.Type] = []

    # ----- the value map -------------------------------------------------------------
    def _raw(self, old: ir.Value) -> Mapped | SlicedStack | None:
        found = self.values.get(old)  # the common case, before walking up the scopes
        if found is not None:
            return found
        scope = self.parent
        while scope is not None:
            found = scope.values.get(old)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def lookup(self, old: ir.Value) -> Mapped | None:
        found = self._raw(old)
        if type(found) is SlicedStack:
            return self._at_one_scale(old, found)
        return found

    def get(self, old: ir.Value) -> Mapped:
        found = self.values.get(old)
        if found is None or type(found) is SlicedStack:
            found = self.lookup(old)
            if found is None:
                raise RewriteError(f"{short_location(self.emit.loc)}: value used before "
                                   f"definition")
        return found

    def stack_of(self, old: ir.Value) -> SlicedStack | None:
        """The sliced stack an original value maps to (``sliced_stacks``), if it is one."""
        found = self._raw(old)
        return found if type(found) is SlicedStack else None

    def set_stack(self, old: ir.Value, stack: SlicedStack) -> None:
        self.values[old] = stack

    def _at_one_scale(self, old: ir.Value, stack: SlicedStack) -> Scaled:
        """A sliced stack used by any op but a slice write or read: at one scale, once per
        block."""
        found = self._stacks_at_one_scale.get(old)
        if found is None:
            found = self._stacks_at_one_scale[old] = at_one_scale(self, stack)
        return found

    def is_scaled(self, old: ir.Value) -> bool:
        return isinstance(self.get(old), Scaled)

    def scaled(self, old: ir.Value) -> Scaled:
        """The (data, scale) of a float operand, its data in the current op's data type."""
        found = self.get(old)
        if not isinstance(found, Scaled):
            raise RewriteError(f"{short_location(self.emit.loc)}: expected a floating value")
        target = self.state.current_dtype
        if target is None or found.data_element() == target:
            return found
        key = (old, target)  # types are uniqued: equal types are equal keys
        data = self._converted.get(key)
        if data is None:
            value = splat_constant_value(old)
            if value is None and old in self.state.rescaled_when_narrowed and not isinstance(
                    target, ir.F32Type):
                return self._narrowed(key, found)
            if value is not None and found.scale.is_static:
                # A constant is made again in the wider type, not widened from f16: Adam's
                # 0.999 is 0.99902 in f16, which moves 1 - b2 by 2.5%.
                target_type = with_element_type(found.data.type, target)
                data = self.emit.splat(finite_splat(value, found.scale.exp, target_type),
                                       target_type)
            else:
                data = self.emit.convert(found.data, target)
            self._converted[key] = data
        converted = Scaled(data, found.scale, found.any_scale)
        converted.__dict__["_element"] = target
        return converted

    def _narrowed(self, key: tuple[ir.Value, ir.Type], found: Scaled) -> Scaled:
        """A wide value whose data may sit anywhere, in the narrow type ``key[1]``: rescaled
        by its amax first, once per block (see ``ScalifyState.rescaled_when_narrowed``).
        Never the previous call's exponent (delayed-statistics): a schedule computed from
        constants folds its statistic at compile time, and a stale one saturates."""
        narrowed = self._rescaled_narrow.get(key)
        if narrowed is None:
            narrowed = self.narrowed(found, key[1])
            narrowed.__dict__["_element"] = key[1]
            self._rescaled_narrow[key] = narrowed
        return narrowed

    def set(self, old: ir.Value, new: Mapped) -> None:
        self.values[old] = new

    def in_original_type(self, old: ir.Value) -> ir.Value:
        """The new value of an operand in its original type (unscaling floats)."""
        found = self.get(old)
        if isinstance(found, Scaled):
            return self.unscaled(old)
        return found

    def child(self, block: ir.Block) -> Scope:
        child = Scope(self.state, block, self)
        child.emit = Emitter(ir.InsertionPoint(block), self.emit.loc, constants={},
                             types=self.state.types)
        return child
