"""Dynamic rescaling: a scale measured from the data at run time (amax or RMS, rounded to a
power of two), at the rescale pass's points and where wide data narrows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
from jax.extend.mlir import ir

from scalify_hlo.rewrites.emitter import Emitter, numpy_dtype, scalar_type
from scalify_hlo.rewrites.scalify_state import Scaled
from scalify_hlo.scale import LARGEST_FINITE, MIN_EXPONENT, Scale

if TYPE_CHECKING:
    from scalify_hlo.rewrites.scalify_state import ScalifyState
    from scalify_hlo.rewrites.scope import Scope


# Binades a delayed ``at_unit_rms`` result keeps free above its largest entry (which the
# amax floor otherwise puts in the top binade): what it may grow by before the next call.
DELAYED_HEADROOM = 2
# Below this, no sum of squares overflows in f32.
_SQUARES_LIMIT = 3.0e38


def _squares_may_overflow(data: ir.Value, size: float) -> bool:
    """Whether the f32 sum of squares of ``data`` can overflow: not for f16 or FP8 data
    (65504^2 per element), for f32 and bf16 data from |x| = 1.8e19 on."""
    element = ir.RankedTensorType(data.type).element_type
    largest = float(ml_dtypes.finfo(numpy_dtype(element)).max)
    return largest * largest * size > _SQUARES_LIMIT


class Rescaler:
    """Moves a measured power of two from data to scale (a mixin of ``Scope``)."""

    state: ScalifyState
    emit: Emitter
    parent: Scope | None

    def narrowed(self, value: Scaled, element: ir.Type, delayable: bool = False) -> Scaled:
        """``value``, whose wide data may sit anywhere, in the narrower ``element``: rescaled
        by its amax first (all-zero data, at any scale, as it is), then converted.
        ``delayable``: as for ``rescale``."""
        if not value.any_scale:
            value = self.rescale(value, "amax:nearest", delayable=delayable)
        return Scaled(self.emit.convert(value.data, element), value.scale, value.any_scale)

    def rescale(self, value: Scaled, how: str, delayable: bool = False,
                element: ir.Type | None = None) -> Scaled:
        """Move ``pow2(amax or rms of data)`` from data to scale (1 for zero/non-finite).

        ``how`` is ``method:rounding`` as the rescale pass writes it. ``delayable``: a
        rescale point (the rescale pass's, or where a wide value narrows to the data type),
        which under ``delayed-statistics`` at the top level of the entry function applies
        the previous call's exponent (``delayed_statistics.py``). ``element``: the type of
        the rescaled data (default: the value's), which a stale exponent saturates in.
        """
        method, _, rounding = how.partition(":")
        emit = self.emit
        element = element or value.data_element()
        f32 = self.state.types.f32
        wide = emit.convert(value.data, f32)
        scalar = scalar_type(f32)
        if method == "rms":
            squares = emit.binary("stablehlo.multiply", wide, wide)
            total = emit.reduce_all(squares, "stablehlo.add", 0.0)
            count = float(max(1, int(np.prod(ir.RankedTensorType(wide.type).shape))))
            statistic = emit.unary("stablehlo.sqrt", emit.binary(
                "stablehlo.divide", total, emit.splat(count, scalar)))
        else:
            statistic = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum",
                                        0.0)
        rounded = emit.pow2_round(statistic)
        if rounding == "up":  # the next power of two at or above the statistic
            below = emit.compare("LT", rounded, statistic)
            rounded = emit.op("stablehlo.select", [below, emit.binary(
                "stablehlo.multiply", rounded, emit.splat(2.0, scalar)), rounded],
                [scalar]).result
        # A normal power of two up to 2^126, so that its inverse is one too: subnormal, inf
        # and NaN statistics leave the scale as it is, 0 sets it (``_zero_shift``).
        i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        usable = emit.op("stablehlo.and", [
            emit.compare("GE", rounded, emit.splat(2.0 ** -126, scalar)),
            emit.compare("LE", rounded, emit.splat(2.0 ** 126, scalar))], [i1]).result
        i32 = self.state.types.scalar_i32
        bits = emit.unary("stablehlo.bitcast_convert", rounded, i32)
        measured = emit.binary("stablehlo.subtract", emit.binary(
            "stablehlo.shift_right_logical", bits, emit.int_scalar(23), i32),
            emit.int_scalar(127), i32)
        delayed = self.state.delayed
        if delayed is not None and not (delayable and delayed.scope is self):
            delayed = None  # only the entry block's points (not a loop's or a region's)
        if delayed is not None and delayed.mode == "use":  # the previous call's exponent
            moved = delayed.exponent(emit, measured, known=usable)
            self.state.context.bump("scalify.rescaled")
            return Scaled(self._shifted_saturating(wide, moved, element),
                          value.scale.times(Scale.dynamic(moved)))
        # 2^-e straight from the bits of 2^e (biased exponents add up to 254): the chain
        # from the statistic to the factor is what XLA copies into every fusion that uses
        # the data, so it takes 4 ops fewer than negating the exponent and rebuilding.
        inverse = emit.unary("stablehlo.bitcast_convert", emit.op("stablehlo.select", [
            usable, emit.binary("stablehlo.subtract", emit.int_scalar(254 << 23), bits, i32),
            emit.int_scalar(127 << 23)], [i32]).result, self.state.types.scalar_f32)
        data = emit.convert(emit.times_factor(wide, inverse), element)
        # The scale moves by the same exponent, or, for all-zero data (which no factor
        # changes), to where an all-zero argument's is.
        moved = emit.op("stablehlo.select", [usable, measured,
                                             self._zero_shift(value, statistic)], [i32]).result
        if delayed is not None:  # a first call hands on what it measured (0 for nothing)
            delayed.exponent(emit, moved, measured, known=usable)
        self.state.context.bump("scalify.rescaled")
        return Scaled(data, value.scale.times(Scale.dynamic(moved)))

    def _shifted_saturating(self, wide: ir.Value, exponent: ir.Value,
                            element: ir.Type) -> ir.Value:
        """``wide * 2^-exponent`` in ``element``, a finite product beyond the element type's
        largest value clamped to it: a delayed exponent may be a binade or two stale."""
        emit, i32 = self.emit, self.state.types.scalar_i32
        exponent = emit.clamp_exponent(exponent, -126, 126)
        product = emit.times_factor(wide, emit.pow2_of_exponent(
            emit.unary("stablehlo.negate", exponent, i32)))
        if element != self.state.types.f32:
            largest = float(ml_dtypes.finfo(numpy_dtype(element)).max)
            t = product.type
            clamped = emit.op("stablehlo.clamp", [emit.scalar_f32(-largest), product,
                                                  emit.scalar_f32(largest)], [t]).result
            # An inf or NaN of the wide value stays as it is; a finite one that the factor
            # took past f32's range saturates too (a factor of 2^100 made it inf).
            finite = emit.unary("stablehlo.is_finite", wide, self.state.types.with_element_type(
                t, ir.IntegerType.get_signless(1)))
            product = emit.op("stablehlo.select", [finite, clamped, product], [t]).result
        return emit.convert(product, element)

    def at_unit_rms(self, value: Scaled, storage: ir.Type, max_exponent: int,
                    at_top: bool = False, delayable: bool = False) -> Scaled:
        """``value`` with data of unit RMS in ``storage`` (its scale times the power of two
        nearest the data's RMS), but never past ``2^max_exponent``: where the largest
        magnitude is that far above the RMS (a sparse tensor), the scale rises to keep it
        below. Unit RMS, not unit amax, is what unit scaling's rules assume of a step's
        inputs: a weight stored at its amax has data of RMS ~1/4, and each dot of the next
        step's forward pass then shrinks the data that much more. ``at_top`` puts the
        largest magnitude just below ``2^max_exponent`` instead, for a square stored as it
        is (no dot reads it; its entries span twice the binades of what was squared, and
        every binade kept below its RMS is one fewer flushed to zero). An all-zero tensor
        takes the scale an all-zero argument gets; a non-finite one keeps its scale (its
        data is what the unscaled value is). ``delayable``: a result of the entry function,
        which under ``delayed-statistics`` is stored at the exponent the previous call
        measured for it (as a rescale point is), so that no result waits for the
        all-reduce of its own statistics (on an 8-H100 FSDP step XLA's fusions chained
        those into 19 all-reduces, 5 once delayed); a square kept at the top of the range
        is not (it has no binade to grow into)."""
        emit, types = self.emit, self.state.types
        f32, i32, scalar = types.f32, types.scalar_i32, types.scalar_f32
        delayed = self.state.delayed
        if not (delayable and not at_top and delayed is not None and delayed.scope is self):
            delayed = None
        else:  # a sparse tensor's largest entries get room to grow until the next call
            max_exponent -= DELAYED_HEADROOM
        wide = emit.convert(value.data, f32)
        size = float(max(1, int(np.prod(ir.RankedTensorType(wide.type).shape))))
        amax = emit.reduce_all(emit.unary("stablehlo.abs", wide), "stablehlo.maximum", 0.0)
        floor = emit.binary("stablehlo.subtract", emit.exponent_of_pow2(amax),
                            emit.int_scalar(max_exponent - 1), i32)
        measured = floor
        if not at_top:
            squares = emit.reduce_all(emit.binary("stablehlo.multiply", wide, wide),
                                      "stablehlo.add", 0.0)
            if _squares_may_overflow(value.data, size):
                # Wide data (an unscaled f32 result: a constant, a nonlinear op's) from
                # 1.8e19 on: its sum of squares is inf, and 2^128 is no exponent (the data
                # of a 3.7e37 gradient was kept as it was, inf in f16). Capped, the RMS it
                # gives is below the true one, and the amax floor places the data.
                squares = emit.binary("stablehlo.minimum", squares,
                                      emit.splat(_SQUARES_LIMIT, scalar))
            rms = emit.unary("stablehlo.sqrt", emit.binary("stablehlo.divide", squares,
                                                            emit.splat(size, scalar)))
            by_rms = emit.exponent_of_pow2(emit.pow2_round(rms))
            measured = emit.binary("stablehlo.maximum", by_rms, floor, i32)
        i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        usable = emit.op("stablehlo.and", [  # finite nonzero data
            emit.compare("GT", amax, emit.splat(0.0, scalar)),
            emit.compare("LE", amax, emit.splat(LARGEST_FINITE["f32"], scalar))], [i1]).result
        measured = emit.clamp_exponent(measured, -126, 126)
        if delayed is not None and delayed.mode == "use":  # the previous call's exponent
            applied = delayed.exponent(emit, measured, known=usable)
            self.state.context.bump("scalify.rescaled")
            return Scaled(self._shifted_saturating(wide, applied, storage),
                          value.scale.times(Scale.dynamic(applied)))
        moved = emit.op("stablehlo.select", [usable, measured,
                                             self._zero_shift(value, amax)], [i32]).result
        if delayed is not None:  # a first call hands on what it measured (0 for nothing)
            delayed.exponent(emit, moved, measured, known=usable)
        shift = emit.op("stablehlo.select", [usable, measured, emit.int_scalar(0)],
                        [i32]).result
        inverse = emit.pow2_of_exponent(emit.unary("stablehlo.negate", shift, i32))
        data = emit.convert(emit.times_factor(wide, inverse), storage)
        self.state.context.bump("scalify.rescaled")
        return Scaled(data, value.scale.times(Scale.dynamic(moved)))

    def _zero_shift(self, value: Scaled, statistic: ir.Value) -> ir.Value:
        """What a rescale moves into the scale when its statistic is no normal power of two:
        nothing, except for an all-zero tensor, whose scale becomes the one an all-zero
        argument gets (2^-126 under common-scale=max, 1 under first). Zeros are valid at any
        scale, and the one they come with can be anything: in a scan's backward pass a
        gradient that is zero for many steps (an LSTM's, where the loss reads one step)
        keeps multiplying its scale by the dots' 2^k, 2^40 after 20 steps, and the max
        common scale then flushes the first nonzero gradient added to it to 0."""
        emit, i32 = self.emit, self.state.types.scalar_i32
        target = MIN_EXPONENT if self.state.common_scale_rule == "max" else 0
        shift = emit.binary("stablehlo.subtract", emit.int_scalar(target),
                            self.exponent(value.scale), i32)
        zero = emit.compare("EQ", statistic, emit.splat(0.0, scalar_type(self.state.types.f32)))
        return emit.op("stablehlo.select", [zero, shift, emit.int_scalar(0)], [i32]).result

    def rescale_results(self, op: ir.Operation, method: str) -> None:
        rescaled = False
        for result in op.results:
            found = self.lookup(result)
            if isinstance(found, Scaled) and not found.any_scale:
                self.set(result, self.rescale(found, method, delayable=True))
                rescaled = True
        if rescaled:
            self.state.context.record(op.name, op.location, "rescale", method)
