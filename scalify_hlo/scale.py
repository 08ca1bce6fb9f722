"""The scale model: a scale is a static power of two times a product of runtime factors.

Scales are tracked symbolically while rewriting, so that a chain of multiplications,
dots and reductions emits no runtime op at all until a scale has to exist as an SSA value
(at a function result, a loop carry, or where two different runtime scales meet). At run
time a scale is its exponent, an i32: products and ratios are exact integer adds that never
overflow or underflow, and a scale becomes an f32 only at the entry function's boundary.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

# Dtype facts, re-exported: the rewrites' scope reads them from here.
from scalify_hlo.dtypes import EXPONENT_RANGES, LARGEST_FINITE  # noqa: F401

# Static exponents stay where 2**exp is a normal f32: beyond that a scale would be 0 or inf.
MIN_EXPONENT, MAX_EXPONENT = EXPONENT_RANGES["f32"]
# The runtime exponent of a zero-filled loop operand (``rule_while``): far below any scale a
# value reaches (a few hundred binades) and far from i32's limits, so that the runtime
# maximum of scales ignores it and sums of a few of them cannot wrap. Exponents below
# ``UNSET_BELOW`` read as "unset" where a common scale is not a plain maximum.
UNSET_EXPONENT = -(1 << 24)
UNSET_BELOW = UNSET_EXPONENT // 2


_FACTOR_IDS = itertools.count()


@dataclass(frozen=True, eq=False)
class Factor:
    """A runtime scale, ordered by creation so that emitted IR is deterministic: a rank-0 i32
    exponent, or (``is_f32``) a rank-0 f32 power of two as the entry function receives it.

    Each factor is made once (``Scale.dynamic``) with a fresh ``ident``, so identity is
    equality: the object's own hash and eq, which cost no Python call (scales, keyed by their
    factors, are looked up for nearly every op a rewrite emits)."""

    ident: int
    value: object
    is_f32: bool = False


@dataclass(frozen=True)
class Scale:
    """``2**exp * prod(value**power for value, power in factors)``.

    ``factors`` holds runtime scales (``Factor``) with their powers, sorted by creation order
    so that equal products compare equal.
    """

    exp: int = 0
    factors: tuple[tuple[Factor, int], ...] = ()
    # How this scale was built from others: ("mul" | "div", a, b) or ("shift", a, exp). It
    # takes no part in equality; materializing follows it so that each distinct scale costs
    # one runtime op on top of its (cached) parts instead of a chain over every factor.
    recipe: tuple | None = field(default=None, compare=False, hash=False, repr=False)

    def __init__(self, exp: int = 0, factors: tuple[tuple[Factor, int], ...] = (),
                 recipe: tuple | None = None) -> None:
        # The generated frozen __init__ sets each field through object.__setattr__: twice
        # the cost, for an object made for nearly every op a rewrite emits.
        fields = self.__dict__
        fields["exp"] = exp
        fields["factors"] = factors
        fields["recipe"] = recipe
        fields["_hash"] = hash((exp, factors))

    def __hash__(self) -> int:
        """Hashed once, when made: scales key the per-block caches of materialized exponents
        and factors, and a generated hash rehashes every factor on each lookup."""
        return self._hash  # type: ignore[attr-defined]

    @property
    def is_static(self) -> bool:
        return not self.factors

    @staticmethod
    def dynamic(exponent: object) -> Scale:
        """The scale ``2**exponent`` of a runtime rank-0 i32."""
        return Scale(0, ((Factor(next(_FACTOR_IDS), exponent), 1),))

    @staticmethod
    def dynamic_f32(value: object) -> Scale:
        """The scale held by a runtime rank-0 f32 power of two."""
        return Scale(0, ((Factor(next(_FACTOR_IDS), value, is_f32=True), 1),))

    @property
    def single_factor(self) -> Factor | None:
        """The factor of a scale that is exactly one runtime factor, else None."""
        if self.exp == 0 and len(self.factors) == 1 and self.factors[0][1] == 1:
            return self.factors[0][0]
        return None

    def times(self, other: Scale) -> Scale:
        return Scale(self.exp + other.exp, _merge(self.factors, other.factors, 1),
                     ("mul", self, other))

    def over(self, other: Scale) -> Scale:
        return Scale(self.exp - other.exp, _merge(self.factors, other.factors, -1),
                     ("div", self, other))

    def shifted(self, exp: int) -> Scale:
        return Scale(self.exp + exp, self.factors, ("shift", self, exp)) if exp else self

    def same_factors(self, other: Scale) -> bool:
        return self.factors == other.factors


ONE = Scale()  # the static scale 1 (scales are immutable: one object serves every use)


def _merge(
    left: tuple[tuple[Factor, int], ...], right: tuple[tuple[Factor, int], ...], sign: int
) -> tuple[tuple[Factor, int], ...]:
    if not right:
        return left
    if not left and sign == 1:
        return right
    powers: dict[Factor, int] = {}
    for factor, power in left:
        powers[factor] = powers.get(factor, 0) + power
    for factor, power in right:
        powers[factor] = powers.get(factor, 0) + sign * power
    return tuple(sorted(((f, p) for f, p in powers.items() if p != 0), key=lambda fp: fp[0].ident))


def saturate_exponent(exp: int) -> tuple[int, bool]:
    """Clamp a static exponent to the f32 normal range; the flag says whether it was clamped."""
    clamped = min(max(exp, MIN_EXPONENT), MAX_EXPONENT)
    return clamped, clamped != exp




def pow2_exponent_of_array(values: np.ndarray, data_dtype: str = "f32") -> int:
    """The exponent ``e`` that puts ``max|finite values|`` in ``[1, 2)``, lowered when that
    would push the smallest non-zero magnitude below the data dtype's normal range (a
    constant holding both 1e-30 and 1e30); 0 when there is no finite non-zero value.

    NaN and Inf are ignored, so a constant holding them never gets an infinite scale, and a
    constant that is an exact power of two gets exactly that power (its data becomes 1).
    """
    finite = np.abs(values[np.isfinite(values)].astype(np.float64))
    finite = finite[finite > 0]
    if finite.size == 0:
        return 0
    return pow2_exponent_of_magnitudes(float(finite.max()), float(finite.min()), data_dtype)


def pow2_exponent_of_magnitudes(largest: float, smallest: float, data_dtype: str = "f32") -> int:
    """``pow2_exponent_of_array`` of finite magnitudes ``largest >= smallest > 0``, in plain
    Python (a splat constant needs no numpy)."""
    min_normal, max_exp = EXPONENT_RANGES[data_dtype]
    exp = math.frexp(largest)[1] - 1
    keeps_smallest = math.frexp(smallest)[1] - 1 - min_normal
    if exp > keeps_smallest:
        exp = max(keeps_smallest, exp - (max_exp - 1))
    return saturate_exponent(exp)[0]


def sqrt_size_exponent(size: int) -> int:
    """``k`` with ``2**k`` the power of two nearest ``sqrt(size)`` (in log scale)."""
    if size <= 1:
        return 0
    return int(round(0.5 * math.log2(size)))
