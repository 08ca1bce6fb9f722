"""The type converter of the 1:N (data, scale) mapping: which type a value's data has in the
rewritten program, how a value crosses between the scaled and the original
representation, and how (data, scale) pairs flatten into signatures, loops and branches.
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.flat_pairs import flat_positions
from scalify_hlo.module_io import short_location
from scalify_hlo.rewrites.emitter import Emitter, dtype_name, element_type, is_scalable_type
from scalify_hlo.rewrites.scalify_state import Scaled
from scalify_hlo.rewrites.sliced_stacks import SlicedStack
from scalify_hlo.scale import EXPONENT_RANGES, LARGEST_FINITE, ONE, UNSET_EXPONENT, Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scalify_state import ScalifyState
    from scalify_hlo.rewrites.scope import Scope


class TypeConverter:
    """Data types, unscaling and encoding, flattening (a mixin of ``Scope``)."""

    state: ScalifyState
    emit: Emitter
    parent: Scope | None

    def unscaled(self, old: ir.Value) -> ir.Value:
        """``data * scale`` in the original element type (computed in f32 when narrower)."""
        cached = self._cached("_unscaled", old)
        if cached is not None:
            return cached
        value = self.scaled(old)
        original = element_type(old)
        emit = self.emit
        scale = value.scale  # any exponent: applied in steps of normal powers of two
        data = value.data
        factor = scale.single_factor
        if scale.is_static:
            wide = self.state.types.f32 if scale.exp != 0 else original
            result = emit.convert(emit.scale_tensor_static(emit.convert(data, wide), scale.exp),
                                  original)
        elif factor is not None and factor.is_f32:  # an argument's scale, a normal power of
            f32 = self.state.types.f32  # two: one multiply by it as it is, no exponent read
            result = emit.convert(emit.times_factor(emit.convert(data, f32), factor.value),
                                  original)
        else:
            result = emit.convert(self.apply_exactly(data, scale), original)
        self._unscaled[old] = result
        return result

    def current_data_dtype(self) -> ir.Type:
        return self.state.current_dtype or self.state.data_dtype

    def encode(self, value: ir.Value, scale: Scale | None = None) -> Scaled:
        """A value of the original program as data in the data dtype at ``scale``: static,
        or a runtime scale whose inverse is an f32 normal (the data is ``value`` times it)."""
        scale = scale or ONE
        data = value
        if not scale.is_static:
            data = self.emit.times_factor(self.emit.convert(value, self.state.types.f32),
                                          self.factor(ONE.over(scale)))
        elif scale.exp != 0:
            data = self.emit.scale_tensor_static(self.emit.convert(value, self.state.types.f32),
                                                 -scale.exp)
        return Scaled(self.emit.convert(data, self.current_data_dtype()), scale)

    def min_normal_exponent(self) -> int:
        """The smallest normal exponent of the current data type (-14 for f16)."""
        return EXPONENT_RANGES.get(dtype_name(self.current_data_dtype()), (-126, 0))[0]

    def max_exponent(self, dtype: ir.Type | None = None) -> int:
        """The largest exponent of ``dtype``, by default the current data type (15 for
        f16)."""
        return EXPONENT_RANGES.get(dtype_name(dtype or self.current_data_dtype()), (0, 127))[1]

    def exceeds_data_range(self, largest: float, target: ir.Type) -> bool:
        """Whether values of the float type ``target`` up to ``largest`` in magnitude can exceed
        the current data type's range at scale 1 where ``target``'s own range holds them (an
        int32 step count converted to f32 is inf in f16 data from 65520 on, and a
        learning-rate schedule of it 0 or NaN); where ``target``'s does not, the original
        overflows the same way."""
        within_target = min(largest, LARGEST_FINITE.get(dtype_name(target), math.inf))
        return within_target > LARGEST_FINITE.get(dtype_name(self.current_data_dtype()),
                                                  math.inf)

    def encode_in_range(self, value: ir.Value, floor: Scale = ONE,
                        finite_only: bool = False, top: int | None = None) -> Scaled:
        """A float tensor converted from integers (or f64), or a nonlinear op's result that
        can pass the data type's range (``rule_nonlinear``), as data at the smallest
        power-of-two scale that keeps its largest magnitude below 2^(max exponent) of the data
        type, measured at run time (the values' range is not known before): scale 1 (or
        ``floor``, a power of two at most 1) while it fits, so that small integers stay
        exact. ``finite_only``: measure the largest finite magnitude (a nonlinear op's
        results), so that one inf result (exp(inf)) does not flush every other one. ``top``:
        the binade the largest magnitude is brought down to (an op without a rule: 0, unit
        scale, so that a product or dot of its results keeps f16's headroom), below the data
        type's largest by default."""
        emit, types = self.emit, self.state.types
        max_exp = self.max_exponent()
        wide = emit.convert(value, types.f32)
        magnitudes = emit.unary("stablehlo.abs", wide)
        if finite_only:
            finite = emit.op("stablehlo.is_finite", [wide], [types.with_element_type(
                wide.type, ir.IntegerType.get_signless(1))]).result
            magnitudes = emit.op("stablehlo.select", [finite, magnitudes, emit.splat(
                0.0, magnitudes.type)], [magnitudes.type]).result
        largest = emit.reduce_all(magnitudes, "stablehlo.maximum", 0.0)
        i32 = types.scalar_i32
        # nearest power of two of the largest magnitude, 2^e; 0 reads as 2^-127
        excess = emit.binary("stablehlo.subtract", emit.exponent_of_pow2(emit.pow2_round(
            largest)), emit.int_scalar(max_exp - 1 if top is None else top), i32)
        lowest = emit.int_scalar(0) if floor == ONE else self.exponent(floor)
        exponent = emit.binary("stablehlo.maximum", excess, lowest, i32)
        inverse = emit.pow2_of_exponent(emit.unary("stablehlo.negate", exponent, i32))
        data = emit.convert(emit.times_factor(wide, inverse), self.current_data_dtype())
        self.state.context.bump("scalify.integer-range")
        return Scaled(data, Scale.dynamic(exponent))

    def data_type(self, t: ir.Type) -> ir.Type:
        """The type a value of type ``t`` has in the rewritten program (its data half), in
        the current op's data type."""
        types = self.state.types
        if types.is_scalable(t):
            self.check_static(t)
            return types.with_element_type(t, self.current_data_dtype())
        return t

    def data_type_of(self, old: ir.Value) -> ir.Type:
        """The data type of the original value ``old`` in the rewritten program."""
        t = old.type
        if is_scalable_type(t):
            self.check_static(t)
            return self.state.types.with_element_type(t, self.state.dtype_of(old))
        return t

    def check_static(self, t: ir.Type) -> None:
        if type(t) is ir.RankedTensorType and not t.has_static_shape:
            raise RewriteError(
                f"{short_location(self.emit.loc)}: dynamic shapes are not supported ({t})")

    def exponent_type(self) -> ir.Type:
        return self.state.types.scalar_i32

    def flatten(self, olds: Sequence[ir.Value], f32_scales: bool = False,
                unset: Sequence[bool] = (), stacks: Container[int] = ()) -> list[ir.Value]:
        """(data, scale) for floats: i32 exponents inside the program (loops, branches), f32
        scales where it leaves the entry function (``f32_scales``); ``UNSET_EXPONENT`` for
        the values flagged in ``unset`` (zero-filled loop operands). A sliced stack at an
        index in ``stacks`` (a loop's stacked carries) flattens to its data and vector of
        exponents; anywhere else it is put at one scale, as the types of a branch's results
        or of a loop's other carries say (a stack an inner loop built, returned by a case
        branch, gave it a vector where the other branch returned a scalar)."""
        flat: list[ir.Value] = []
        for index, old in enumerate(olds):
            stack = self.stack_of(old) if index in stacks else None
            if stack is not None:
                flat += [stack.data, stack.exponents]
                continue
            found = self.get(old)
            if isinstance(found, Scaled):
                if f32_scales:
                    flat += list(self.scale_f32(found))
                elif index < len(unset) and unset[index]:
                    flat += [found.data, self.emit.int_scalar(UNSET_EXPONENT)]
                else:
                    flat += [found.data, self.exponent(found.scale)]
            else:
                flat.append(found)
        return flat

    def flat_types(self, olds: Sequence[ir.Value]) -> list[ir.Type]:
        """The flattened types of original values inside the program: (data, i32 exponent)
        for floats."""
        flat: list[ir.Type] = []
        for old in olds:
            flat.append(self.data_type_of(old))
            if is_scalable_type(old.type):
                flat.append(self.exponent_type())
        return flat

    def bind_flat(self, olds: Sequence[ir.Value], news: Sequence[ir.Value],
                  f32_scales: bool = False, stacks: dict[int, int] | None = None) -> None:
        """Map original values to consecutive new values: two for floats (data, then an i32
        exponent, or an f32 scale with ``f32_scales``; for the ``stacks``, by index, data and
        the vector of exponents of a sliced stack along the given dimension), one
        otherwise."""
        scaled = [is_scalable_type(old.type) for old in olds]
        for index, (old, is_scaled, position) in enumerate(
                zip(olds, scaled, flat_positions(scaled), strict=True)):
            if stacks and index in stacks:
                self.set_stack(old, SlicedStack(news[position], news[position + 1],
                                                stacks[index]))
            elif is_scaled:
                scale = news[position + 1]
                self.set(old, Scaled(news[position], Scale.dynamic_f32(scale) if f32_scales
                                     else Scale.dynamic(scale)))
            else:
                self.set(old, news[position])
