"""How training state crosses the entry boundary when it is not plain data in the data dtype
(issue 19): squares by their signed square root (``sqrt_encoding``), in the data dtype or in
FP8, and first moments in FP8 (``fp8_storage``). One object says which arguments and results
are stored how, gives the scaled signature their data types, decodes them on entry and
encodes them on exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jax.extend.mlir import ir

from scalify_hlo.rewrites.fp8_storage import from_fp8, to_fp8
from scalify_hlo.rewrites.scope import Scaled, Scope
from scalify_hlo.rewrites.sqrt_encoding import root_from_square, square_from_root


@dataclass(frozen=True)
class BoundaryStorage:
    """Which entry arguments and returned values are stored how between steps.

    ``roots``: squares stored by their signed square root, data of ``root_element`` (None:
    the data dtype); ``moments``: first moments, data of ``moment_element`` (an FP8 type).
    Each rounds to nearest unless its ``*_stochastic`` flag is set."""

    roots: frozenset[ir.Value] = field(default_factory=frozenset)
    root_element: ir.Type | None = None
    root_stochastic: bool = False
    moments: frozenset[ir.Value] = field(default_factory=frozenset)
    moment_element: ir.Type | None = None
    moment_stochastic: bool = False

    def elements(self, data_dtype: ir.Type) -> dict[ir.Value, ir.Type]:
        """The element type of each stored value's data half in the scaled signature."""
        stored = dict.fromkeys(self.roots, self.root_element or data_dtype)
        if self.moment_element is not None:
            stored.update(dict.fromkeys(self.moments, self.moment_element))
        return stored

    def rescales_itself(self, value: ir.Value) -> bool:
        """Whether encoding ``value`` measures its own scale, so that the step's drifting-
        output rescale and hand-back would only add work (FP8 moments)."""
        return self.moment_element is not None and value in self.moments

    def decode(self, scope: Scope, argument: ir.Value) -> bool:
        """Map a stored entry argument to the value the step computes with; False when it
        is stored as plain data."""
        state = scope.state
        if argument in self.roots:
            decoded = square_from_root(scope, scope.scaled(argument), state.dtype_of(argument))
            state.context.bump("scalify.sqrt-encoded")
        elif self.rescales_itself(argument):
            decoded = from_fp8(scope, scope.scaled(argument), state.dtype_of(argument))
            state.context.bump("scalify.fp8-moments")
        else:
            return False
        scope.set(argument, decoded)
        return True

    def encode(self, scope: Scope, value: ir.Value) -> Scaled | None:
        """A returned value as it is stored (None: as plain data)."""
        context = scope.state.context
        if value in self.roots:
            context.bump("scalify.sqrt-encoded")
            return root_from_square(scope, scope.scaled(value),
                                    self.root_element or scope.state.data_dtype,
                                    self.root_stochastic)
        if self.rescales_itself(value):
            context.bump("scalify.fp8-moments")
            return to_fp8(scope, scope.scaled(value), self.moment_element,
                          self.moment_stochastic)
        return None
