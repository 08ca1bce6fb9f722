"""Where each original value sits in a scaled signature, the one walk every reader of one needs.

The scaled convention (docs/scaled-signature.md) flattens each scaled value into two
consecutive values, its data then its scale, and keeps every other value as one. The entry
signature, loop carries, a ``ScaledStep``'s leaves and a host run's inputs are all read this
way; this module holds that arithmetic once, with no IR in it, so both ``rewrites/`` and the
API can use it.
"""

from __future__ import annotations

from collections.abc import Iterable


def flat_positions(scaled: Iterable[bool]) -> list[int]:
    """Per original value (``scaled``: whether it is a (data, scale) pair), the position of
    its value, or of its data, in the flat signature; its scale follows at ``+ 1``."""
    positions: list[int] = []
    position = 0
    for is_scaled in scaled:
        positions.append(position)
        position += 2 if is_scaled else 1
    return positions


def flat_size(scaled: Iterable[bool]) -> int:
    """How many values the original values (``scaled`` as for ``flat_positions``) flatten to."""
    return sum(2 if is_scaled else 1 for is_scaled in scaled)
