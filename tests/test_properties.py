"""Property: any small program of ops from the rule table is exact under ``scalify`` in f32.

Hypothesis builds random StableHLO programs (elementwise chains, dot_generals with random
batch and contracting dimensions, add/max reductions, broadcasts, concatenations, selects,
while loops, constants), rewrites them with ``scalify{data-dtype=f32},simplify`` and runs both
on XLA: the original on inputs ``x = d * 2^k`` (``d`` near unit scale), the rewritten on
``(d, 2^k)``. The outputs put back together must match to f32 rounding (``rtol`` 1e-6, plus an
absolute floor of 1e-6 times the tensor's largest magnitude for sums that cancel), with NaN
and Inf at the same positions.

Scales are drawn per program: *moderate* (each input its own ``2^k``, ``|k| <= 24``) or
*extreme* (every input at ``2^100``, or every input at ``2^-100``). Exactness holds away from
overflow and underflow, so an example is discarded when the original program leaves the f32
normal range in any intermediate value (computed in f64 by a probe copy of the program that
returns every intermediate), or when XLA's own rewrites of the original (it reassociates
``x / (x / x)`` into ``x * x / x``) take the f32 original far from the program as written.
Inputs at *mixed* extreme scales (2^-100 next to 2^100) are exact too under
``common-scale=max``: runtime scales are i32 exponents (no product or ratio of scales
overflows), ops that combine operands bring them to the max of their exponents and ops that
merge them (select, concatenate) to the midpoint. (The f32 default, ``first``, overflows the
data of operands more than 2^126 apart.) The regression files in ``testdata/regressions/`` are
the bugs this once had; each reruns with the pipeline of its RUN line.

``SCALIFY_PROPERTY_EXAMPLES=500`` runs a longer random search (CI runs a fixed, derandomized
set); ``SCALIFY_SAVE_REGRESSIONS=1`` writes the shrunk failing program of a failing run to
``testdata/regressions/shrunk-<test>.mlir`` with RUN/CHECK and SCALES lines.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, note, settings
from hypothesis import strategies as st

from scalify_hlo.api import rewrite_text
from scalify_hlo.runner import compile_module, run_executable
from scalify_hlo.signature import TensorSpec, entry_signature, join_outputs, split_inputs
from tests.helpers import TESTDATA
from tests.scaled_helpers import assert_matches

PIPELINE = "scalify{data-dtype=f32},simplify"
# Operands 2^200 apart need the max (or midpoint) common scale: the f32 default, the first
# operand's scale, overflows the other operand's data past a 2^126 spread.
MAX_PIPELINE = "scalify{data-dtype=f32 common-scale=max},simplify"
RTOL = 1e-6
ABS_FLOOR = 1e-6  # times each tensor's largest finite magnitude
REGRESSIONS = TESTDATA / "regressions"
# Intermediates of the original must stay in [2^-120, 2^120] (or be 0 or NaN) for exactness.
SAFE_EXPONENT = 120

_EXAMPLES = int(os.environ.get("SCALIFY_PROPERTY_EXAMPLES", "0"))
SETTINGS = settings(
    max_examples=_EXAMPLES or 30,
    derandomize=not _EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)


# ----- programs ------------------------------------------------------------------------------
Shape = tuple[int, ...]


def ttype(shape: Shape, element: str = "f32") -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def i64s(values: Sequence[int]) -> str:
    return f"array<i64{': ' if values else ''}{', '.join(map(str, values))}>"


def float_literal(value: float) -> str:
    """An MLIR float literal that reads back as the same f32."""
    return f"{float(np.float32(value)):.9e}"


def dense_literal(array: np.ndarray) -> str:
    """Nested ``[...]`` lists of f32 literals, as ``dense<...>`` takes them."""
    if array.ndim == 0:
        return float_literal(float(array))
    return "[" + ", ".join(dense_literal(row) for row in array) + "]"


def _note(text: str) -> None:
    """``hypothesis.note`` inside a hypothesis test, nothing elsewhere."""
    try:
        note(text)
    except Exception:
        pass


@dataclass
class Program:
    """A ``@main`` being built: f32 arguments, body lines, and the f32 values it defines."""

    args: list[Shape] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    values: list[tuple[str, Shape]] = field(default_factory=list)
    results: list[tuple[str, Shape]] = field(default_factory=list)
    counter: int = 0
    ops: set[str] = field(default_factory=set)

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def emit(self, op: str, operands: Sequence[str], types: Sequence[str], result: Shape,
             attrs: str = "", element: str = "f32", indent: str = "  ",
             lines: list[str] | None = None) -> str:
        name = self.fresh()
        attr_text = f" {{{attrs}}}" if attrs else ""
        (self.lines if lines is None else lines).append(
            f'{indent}{name} = "{op}"({", ".join(operands)}){attr_text} : '
            f'({", ".join(types)}) -> {ttype(result, element)}')
        self.ops.add(op)
        return name

    def text(self, probe: bool = False) -> str:
        """The module; with ``probe``, every top-level f32 value is returned too."""
        results = list(self.results)
        if probe:
            results += [v for v in self.values if v not in results]
        arg_list = ", ".join(f"%arg{i}: {ttype(s)}" for i, s in enumerate(self.args))
        types = ", ".join(ttype(s) for _, s in results)
        names = ", ".join(n for n, _ in results)
        return (f"func.func public @main({arg_list}) -> ({types}) {{\n"
                + "\n".join(self.lines)
                + f'\n  "func.return"({names}) : ({types}) -> ()\n}}\n')


SHAPES = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
ELEMENTWISE_BINARY = ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
                      "stablehlo.divide", "stablehlo.maximum", "stablehlo.minimum",
                      "stablehlo.atan2", "stablehlo.remainder")
ELEMENTWISE_UNARY = ("stablehlo.negate", "stablehlo.abs", "stablehlo.tanh",
                     "stablehlo.exponential", "stablehlo.log", "stablehlo.sqrt",
                     "stablehlo.rsqrt", "stablehlo.logistic", "stablehlo.sine",
                     "stablehlo.sign", "stablehlo.floor", "stablehlo.cbrt")
STEP_KINDS = ("binary", "binary", "binary", "unary", "unary", "dot", "dot", "reduce",
              "reduce", "broadcast", "concatenate", "select", "clamp", "constant", "while",
              "transpose", "reshape", "slice", "reverse", "pad", "convert")


class Builder:
    """Draws one program step by step from a hypothesis ``data`` object."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.p = Program()

    def pick(self, shape: Shape | None = None) -> tuple[str, Shape]:
        pool = [v for v in self.p.values if shape is None or v[1] == shape]
        if not pool:
            assert shape is not None
            return self.new_arg(shape) if self.draw(st.booleans()) else self.constant(shape)
        return self.draw(st.sampled_from(pool))

    def add(self, name: str, shape: Shape) -> tuple[str, Shape]:
        self.p.values.append((name, shape))
        return name, shape

    def new_arg(self, shape: Shape) -> tuple[str, Shape]:
        name = f"%arg{len(self.p.args)}"
        self.p.args.append(shape)
        return self.add(name, shape)

    def constant(self, shape: Shape) -> tuple[str, Shape]:
        """A splat or dense constant, exponents within [-30, 30] (or all zeros)."""
        kind = self.draw(st.sampled_from(["splat", "dense", "zero"]))
        if kind == "dense" and shape and math.prod(shape) <= 64:
            values = self.draw(st.lists(st.floats(-8, 8, width=32), min_size=math.prod(shape),
                                        max_size=math.prod(shape)))
            exp = self.draw(st.integers(-30, 30))
            body = np.asarray(values, np.float64).reshape(shape) * 2.0 ** exp
            literal = dense_literal(body.astype(np.float32))
        else:
            value = 0.0 if kind == "zero" else self.draw(st.floats(-8, 8, width=32)) * 2.0 ** (
                self.draw(st.integers(-30, 30)))
            literal = float_literal(value)
        name = self.p.fresh()
        self.p.lines.append(f"  {name} = stablehlo.constant dense<{literal}> : {ttype(shape)}")
        self.p.ops.add("stablehlo.constant")
        return self.add(name, shape)

    # ----- steps --------------------------------------------------------------------------
    def step(self) -> None:
        kind = self.draw(st.sampled_from(STEP_KINDS))
        getattr(self, f"step_{kind}")()

    def step_binary(self) -> None:
        a, shape = self.pick()
        b, _ = self.pick(shape)
        op = self.draw(st.sampled_from(ELEMENTWISE_BINARY))
        self.add(self.p.emit(op, [a, b], [ttype(shape)] * 2, shape), shape)

    def step_unary(self) -> None:
        a, shape = self.pick()
        op = self.draw(st.sampled_from(ELEMENTWISE_UNARY))
        self.add(self.p.emit(op, [a], [ttype(shape)], shape), shape)

    def step_dot(self) -> None:
        """dot_general with random batch, contracting and free dimensions on both sides."""
        n_batch = self.draw(st.integers(0, 2))
        n_contract = self.draw(st.integers(0, 2))
        n_lhs_free = self.draw(st.integers(0, 2))
        n_rhs_free = self.draw(st.integers(0, 2 if n_batch + n_contract + n_lhs_free < 4 else 0))
        sizes = st.integers(1, 5)
        batch = [self.draw(sizes) for _ in range(n_batch)]
        contract = [self.draw(st.sampled_from([1, 2, 3, 8, 16, 33])) for _ in range(n_contract)]
        lhs_free = [self.draw(sizes) for _ in range(n_lhs_free)]
        rhs_free = [self.draw(sizes) for _ in range(n_rhs_free)]

        def layout(free: list[int]) -> tuple[Shape, list[int], list[int], list[int]]:
            """Operand shape, batch and contracting dimensions, and its free sizes in the
            order they appear in the operand (which is their order in the result)."""
            labels = [("b", i) for i in range(n_batch)] + [("c", i) for i in range(n_contract)]
            labels += [("f", i) for i in range(len(free))]
            order = self.draw(st.permutations(labels))
            size = {"b": batch, "c": contract, "f": free}
            shape = tuple(size[k][i] for k, i in order)
            return (shape, [order.index(("b", i)) for i in range(n_batch)],
                    [order.index(("c", i)) for i in range(n_contract)],
                    [size[k][i] for k, i in order if k == "f"])

        lhs_shape, lhs_b, lhs_c, lhs_out = layout(lhs_free)
        rhs_shape, rhs_b, rhs_c, rhs_out = layout(rhs_free)
        a, _ = self.pick(lhs_shape)
        b, _ = self.pick(rhs_shape)
        out = tuple(batch + lhs_out + rhs_out)
        attrs = ("dot_dimension_numbers = #stablehlo.dot<"
                 f"lhs_batching_dimensions = {lhs_b}, rhs_batching_dimensions = {rhs_b}, "
                 f"lhs_contracting_dimensions = {lhs_c}, rhs_contracting_dimensions = {rhs_c}>")
        name = self.p.emit("stablehlo.dot_general", [a, b],
                           [ttype(lhs_shape), ttype(rhs_shape)], out, attrs)
        self.add(name, out)

    def reducer(self, op: str, indent: str) -> list[str]:
        x, y, r = self.p.fresh(), self.p.fresh(), self.p.fresh()
        s = ttype(())
        return [f"{indent}^bb0({x}: {s}, {y}: {s}):",
                f'{indent}  {r} = "{op}"({x}, {y}) : ({s}, {s}) -> {s}',
                f'{indent}  "stablehlo.return"({r}) : ({s}) -> ()']

    def step_reduce(self) -> None:
        a, shape = self.pick()
        if not shape:
            return
        dims = sorted(self.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
        out = tuple(d for i, d in enumerate(shape) if i not in dims)
        op = self.draw(st.sampled_from(["stablehlo.add", "stablehlo.add", "stablehlo.maximum"]))
        init_value = {"stablehlo.add": "0.0", "stablehlo.maximum": "0xFF800000"}[op]
        if self.draw(st.booleans()):  # init from a value, which need not be an identity
            init, _ = self.pick(())
        else:
            init = self.p.fresh()
            self.p.lines.append(f"  {init} = stablehlo.constant dense<{init_value}> : "
                                f"{ttype(())}")
        name = self.p.fresh()
        self.p.lines += [f'  {name} = "stablehlo.reduce"({a}, {init}) ({{',
                         *self.reducer(op, "  "),
                         f"  }}) {{dimensions = {i64s(dims)}}} : ({ttype(shape)}, "
                         f"{ttype(())}) -> {ttype(out)}"]
        self.p.ops.add("stablehlo.reduce")
        self.add(name, out)

    def step_broadcast(self) -> None:
        a, shape = self.pick()
        if len(shape) >= 3:
            return
        extra = self.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3 - len(shape)))
        out_rank = len(shape) + len(extra)
        dims = sorted(self.draw(st.permutations(range(out_rank)))[:len(shape)])
        out = [0] * out_rank
        rest = iter(extra)
        for i in range(out_rank):
            out[i] = shape[dims.index(i)] if i in dims else next(rest)
        # a size-1 operand dimension may broadcast to a larger one
        for j, d in enumerate(dims):
            if shape[j] == 1 and self.draw(st.booleans()):
                out[d] = self.draw(st.integers(1, 3))
        result = tuple(out)
        name = self.p.emit("stablehlo.broadcast_in_dim", [a], [ttype(shape)], result,
                           f"broadcast_dimensions = {i64s(dims)}")
        self.add(name, result)

    def step_concatenate(self) -> None:
        a, shape = self.pick()
        if not shape:
            return
        dim = self.draw(st.integers(0, len(shape) - 1))
        others = []
        for _ in range(self.draw(st.integers(1, 2))):
            other_shape = list(shape)
            other_shape[dim] = self.draw(st.integers(1, 3))
            others.append(self.pick(tuple(other_shape)))
        parts = [(a, shape), *others]
        out = list(shape)
        out[dim] = sum(s[dim] for _, s in parts)
        name = self.p.emit("stablehlo.concatenate", [n for n, _ in parts],
                           [ttype(s) for _, s in parts], tuple(out), f"dimension = {dim} : i64")
        self.add(name, tuple(out))

    def step_select(self) -> None:
        a, shape = self.pick()
        b, _ = self.pick(shape)
        c, _ = self.pick(shape)
        d, _ = self.pick(shape)
        direction = self.draw(st.sampled_from(["LT", "GT", "GE", "EQ", "NE"]))
        pred = self.p.emit("stablehlo.compare", [a, b], [ttype(shape)] * 2, shape,
                           f"comparison_direction = #stablehlo<comparison_direction "
                           f"{direction}>", element="i1")
        name = self.p.emit("stablehlo.select", [pred, c, d],
                           [ttype(shape, "i1"), ttype(shape), ttype(shape)], shape)
        self.add(name, shape)

    def step_clamp(self) -> None:
        x, shape = self.pick()
        lo, lo_shape = self.pick(self.draw(st.sampled_from([(), shape])))
        hi, hi_shape = self.pick(lo_shape)
        name = self.p.emit("stablehlo.clamp", [lo, x, hi],
                           [ttype(lo_shape), ttype(shape), ttype(hi_shape)], shape)
        self.add(name, shape)

    def step_constant(self) -> None:
        self.constant(self.draw(SHAPES))

    def step_transpose(self) -> None:
        a, shape = self.pick()
        perm = self.draw(st.permutations(range(len(shape))))
        out = tuple(shape[i] for i in perm)
        self.add(self.p.emit("stablehlo.transpose", [a], [ttype(shape)], out,
                             f"permutation = {i64s(perm)}"), out)

    def step_reshape(self) -> None:
        a, shape = self.pick()
        size = math.prod(shape)
        factors = [d for d in range(1, size + 1) if size % d == 0]
        first = self.draw(st.sampled_from(factors))
        out = (first, size // first) if self.draw(st.booleans()) else (size,)
        self.add(self.p.emit("stablehlo.reshape", [a], [ttype(shape)], out), out)

    def step_slice(self) -> None:
        a, shape = self.pick()
        starts = [self.draw(st.integers(0, d - 1)) for d in shape]
        limits = [self.draw(st.integers(s + 1, d)) for s, d in zip(starts, shape, strict=True)]
        out = tuple(lim - s for s, lim in zip(starts, limits, strict=True))
        attrs = (f"start_indices = {i64s(starts)}, limit_indices = {i64s(limits)}, "
                 f"strides = {i64s([1] * len(shape))}")
        self.add(self.p.emit("stablehlo.slice", [a], [ttype(shape)], out, attrs), out)

    def step_reverse(self) -> None:
        a, shape = self.pick()
        dims = sorted(self.draw(st.sets(st.integers(0, max(len(shape) - 1, 0)))) if shape
                      else [])
        self.add(self.p.emit("stablehlo.reverse", [a], [ttype(shape)], shape,
                             f"dimensions = {i64s(dims)}"), shape)

    def step_pad(self) -> None:
        a, shape = self.pick()
        value, _ = self.pick(())
        low = [self.draw(st.integers(0, 2)) for _ in shape]
        high = [self.draw(st.integers(0, 2)) for _ in shape]
        out = tuple(d + lo + hi for d, lo, hi in zip(shape, low, high, strict=True))
        attrs = (f"edge_padding_low = {i64s(low)}, edge_padding_high = {i64s(high)}, "
                 f"interior_padding = {i64s([0] * len(shape))}")
        self.add(self.p.emit("stablehlo.pad", [a, value], [ttype(shape), ttype(())], out,
                             attrs), out)

    def step_convert(self) -> None:
        """f32 -> bf16 -> f32: a narrowing rounding the rewrite must reproduce."""
        a, shape = self.pick()
        narrow = self.p.emit("stablehlo.convert", [a], [ttype(shape)], shape, element="bf16")
        self.add(self.p.emit("stablehlo.convert", [narrow], [ttype(shape, "bf16")], shape),
                 shape)

    def step_while(self) -> None:
        """A loop carrying a float (and a counter) for 0 to 3 trips; the body combines the
        carry with constants and captured values, so the carried scale changes per trip."""
        x, shape = self.pick()
        t, i32, i1 = ttype(shape), ttype((), "i32"), ttype((), "i1")
        trips = self.draw(st.integers(0, 3))
        zero, one, limit = self.p.fresh(), self.p.fresh(), self.p.fresh()
        self.p.lines += [f"  {zero} = stablehlo.constant dense<0> : {i32}",
                         f"  {one} = stablehlo.constant dense<1> : {i32}",
                         f"  {limit} = stablehlo.constant dense<{trips}> : {i32}"]
        captured, _ = self.pick(shape)
        c_args = (self.p.fresh(), self.p.fresh())
        b_args = (self.p.fresh(), self.p.fresh())
        cond: list[str] = [f"  ^bb0({c_args[0]}: {t}, {c_args[1]}: {i32}):"]
        pred = self.p.emit("stablehlo.compare", [c_args[1], limit], [i32, i32], (),
                           "comparison_direction = #stablehlo<comparison_direction LT>",
                           element="i1", indent="    ", lines=cond)
        cond.append(f'    "stablehlo.return"({pred}) : ({i1}) -> ()')
        body: list[str] = [f"  ^bb0({b_args[0]}: {t}, {b_args[1]}: {i32}):"]
        value = b_args[0]
        for _ in range(self.draw(st.integers(1, 3))):
            how = self.draw(st.sampled_from(["scale", "add_captured", "max_captured", "tanh",
                                             "square", "mul_captured"]))
            if how == "scale":
                factor = self.p.fresh()
                const = self.draw(st.sampled_from(["0.5", "3.0", "-0.25", "1024.0"]))
                body.append(f"    {factor} = stablehlo.constant dense<{const}> : {t}")
                value = self.p.emit("stablehlo.multiply", [value, factor], [t, t], shape,
                                    indent="    ", lines=body)
            elif how == "tanh":
                value = self.p.emit("stablehlo.tanh", [value], [t], shape, indent="    ",
                                    lines=body)
            elif how == "square":
                value = self.p.emit("stablehlo.multiply", [value, value], [t, t], shape,
                                    indent="    ", lines=body)
            else:
                op = {"add_captured": "stablehlo.add", "max_captured": "stablehlo.maximum",
                      "mul_captured": "stablehlo.multiply"}[how]
                value = self.p.emit(op, [value, captured], [t, t], shape, indent="    ",
                                    lines=body)
        step = self.p.emit("stablehlo.add", [b_args[1], one], [i32, i32], (), element="i32",
                           indent="    ", lines=body)
        body.append(f'    "stablehlo.return"({value}, {step}) : ({t}, {i32}) -> ()')
        name = self.p.fresh()
        self.p.lines += [f'  {name}:2 = "stablehlo.while"({x}, {zero}) ({{', *cond, "  }, {",
                         *body, f"  }}) : ({t}, {i32}) -> ({t}, {i32})"]
        self.p.ops.add("stablehlo.while")
        self.add(f"{name}#0", shape)


@st.composite
def programs(draw, max_steps: int = 8) -> Program:
    builder = Builder(draw)
    for _ in range(draw(st.integers(1, 3))):
        builder.new_arg(draw(SHAPES))
    for _ in range(draw(st.integers(1, max_steps))):
        builder.step()
    p = builder.p
    computed = [v for v in p.values if not v[0].startswith("%arg")] or p.values
    p.results = [computed[-1]]
    if len(computed) > 1 and draw(st.booleans()):
        p.results.append(draw(st.sampled_from(computed[:-1])))
    return p


SCALE_MODES = st.one_of(
    st.lists(st.integers(-24, 24), min_size=3, max_size=3).map(lambda ks: ("moderate", ks)),
    st.sampled_from([("extreme", [100] * 3), ("extreme", [-100] * 3)]),
)


# ----- running and checking ------------------------------------------------------------------
def make_inputs(specs: Sequence[TensorSpec], exponents: Sequence[int],
                seed: int) -> tuple[list[np.ndarray], list[float | None]]:
    """Inputs and their scales: a float input is ``d * 2^k`` with ``d`` ~ N(0, 1) in f32
    (so it splits exactly), ``k`` taken in turn from ``exponents``; booleans and integers are
    random too, and have no scale."""
    rng = np.random.default_rng(seed)
    inputs: list[np.ndarray] = []
    scales: list[float | None] = []
    for spec in specs:
        if not spec.is_scaled:
            inputs.append(rng.integers(0, 2, spec.shape).astype(spec.dtype))
            scales.append(None)
            continue
        k = exponents[sum(s is not None for s in scales) % len(exponents)]
        data = rng.standard_normal(spec.shape).astype(np.float32)
        inputs.append((data.astype(np.float64) * 2.0 ** k).astype(spec.dtype))
        scales.append(2.0 ** k)
    return inputs, scales


def in_safe_range(arrays: Sequence[np.ndarray]) -> bool:
    """No inf, and every finite non-zero magnitude within [2^-SAFE, 2^SAFE]."""
    for array in arrays:
        a = np.abs(np.asarray(array, np.float64))
        if np.isinf(a).any():
            return False
        finite = a[np.isfinite(a) & (a > 0)]
        if finite.size and (finite.max() > 2.0 ** SAFE_EXPONENT
                            or finite.min() < 2.0 ** -SAFE_EXPONENT):
            return False
    return True


def close_enough(f32: Sequence[np.ndarray], f64: Sequence[np.ndarray]) -> bool:
    """Whether the f32 original agrees with the same program in f64 to 1e-3 (relative to
    each tensor's largest magnitude), with NaN and Inf at the same places."""
    for narrow, wide in zip(f32, f64, strict=True):
        finite = np.abs(wide[np.isfinite(wide)])
        try:
            assert_matches([wide], [narrow.astype(np.float64)], 1e-3,
                           1e-3 * float(finite.max()) if finite.size else 0.0)
        except AssertionError:
            return False
    return True


def to_f64(text: str) -> str:
    """The same program in f64 (bf16 round trips stay), to see its exact value ranges."""
    text = re.sub(r"(tensor<(?:\d+x)*)f32>", r"\1f64>", text)
    return text.replace("0xFF800000", "0xFFF0000000000000")


def check_exact(text: str, exponents: Sequence[int], seed: int,
                probe_text: str | None = None, pipeline: str = PIPELINE) -> None:
    """Rewrite ``text`` and compare the rewritten program on split inputs with the original.

    With ``probe_text`` (the same program returning every intermediate too), the example is
    discarded unless every intermediate, computed in f64, stays in the f32 normal range:
    exactness is promised away from overflow and underflow only.
    """
    signature = entry_signature(text)
    inputs, scales = make_inputs(signature.inputs, exponents, seed)
    ref = run_executable(compile_module(text), inputs)
    if probe_text is not None:
        with jax.enable_x64(True):  # else device_put turns the f64 inputs into f32
            wide = run_executable(compile_module(to_f64(probe_text)),
                                  [x.astype(np.float64) if x.dtype == np.float32 else x
                                   for x in inputs])
        assume(in_safe_range(wide))
        # XLA may reassociate the original (x / (x / x) -> x * x / x) and overflow where the
        # program as written does not: such a reference is no reference.
        assume(close_enough(ref, wide[:len(ref)]))
    scaled_text = rewrite_text(text, pipeline)
    _note(f"rewritten:\n{scaled_text}")
    raw = run_executable(compile_module(scaled_text), split_inputs(signature, inputs, scales))
    got = join_outputs(signature, raw)
    for r, g in zip(ref, got, strict=True):
        assert g.dtype == r.dtype
        finite = np.abs(r[np.isfinite(r)])
        floor = ABS_FLOOR * float(finite.max()) if finite.size else 0.0
        assert_matches([r], [g], RTOL, floor)


def save_regression(name: str, text: str, exponents: Sequence[int], seed: int,
                    why: str, xfail: str | None = None, pipeline: str = PIPELINE) -> Path:
    """Write a failing program as a golden regression file: a RUN line that rewrites it
    (so ``tests/test_golden.py`` checks it still rewrites) and the SCALES/SEED that make
    ``test_regression_exact`` rerun it numerically; an XFAIL line marks a known bug."""
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    path = REGRESSIONS / f"{name}.mlir"
    path.write_text(
        "".join(f"// {line}\n" for line in textwrap.wrap(why, 96))
        + (f"// XFAIL: {xfail}\n" if xfail else "")
        + f"// RUN: scalify-hlo rewrite %s --pipeline '{pipeline}' | filecheck %s\n"
        f"// CHECK-LABEL: @main\n"
        f"// SCALES: {' '.join(map(str, exponents))}\n"
        f"// SEED: {seed}\n"
        f"{text}")
    return path


def _check_or_save(test_name: str, program: Program, exponents: list[int], seed: int,
                   pipeline: str = PIPELINE) -> None:
    _note(f"program:\n{program.text()}\nscale exponents {exponents}, seed {seed}")
    try:
        check_exact(program.text(), exponents, seed, program.text(probe=True), pipeline)
    except AssertionError as exc:
        if os.environ.get("SCALIFY_SAVE_REGRESSIONS"):
            save_regression(f"shrunk-{test_name}", program.text(), exponents, seed,
                            f"Shrunk by {test_name}: {str(exc).splitlines()[0]}",
                            pipeline=pipeline)
        raise


@SETTINGS
@given(program=programs(), scales=SCALE_MODES, seed=st.integers(0, 2 ** 16))
def test_random_program_is_exact(program: Program, scales: tuple[str, list[int]],
                                 seed: int) -> None:
    _check_or_save("random_program", program, scales[1], seed)


@SETTINGS
@given(program=programs(max_steps=4), seed=st.integers(0, 2 ** 16),
       k=st.sampled_from([100, -100, 60, -60, 126, -126]))
def test_one_extreme_scale_is_exact(program: Program, seed: int, k: int) -> None:
    """Every input at one extreme scale: the data stays near unit, the scale carries 2^k."""
    _check_or_save("one_extreme_scale", program, [k], seed)


def _add_program() -> Program:
    """``%arg0 + %arg1`` on tensor<4xf32>: the smallest program the mixed-scale bug broke."""
    add = '  %v1 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>'
    return Program(args=[(4,), (4,)], lines=[add], values=[("%arg0", (4,)), ("%arg1", (4,)),
                   ("%v1", (4,))], results=[("%v1", (4,))], counter=1, ops={"stablehlo.add"})


@SETTINGS
@example(program=_add_program(), seed=0, exponents=[-100, 100, 0])
@given(program=programs(max_steps=4), seed=st.integers(0, 2 ** 16),
       exponents=st.lists(st.sampled_from([-100, 0, 100]), min_size=3, max_size=3))
def test_mixed_extreme_scales_are_exact(program: Program, seed: int,
                                        exponents: list[int]) -> None:
    """Inputs at 2^-100, 1 and 2^100 in the same program, under ``common-scale=max``."""
    _check_or_save("mixed_extreme_scales", program, exponents, seed, MAX_PIPELINE)


# ----- the generator itself --------------------------------------------------------------------
@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_generated_programs_verify_and_run(program: Program) -> None:
    """Every generated program parses, verifies and compiles (else the property is vacuous)."""
    from scalify_hlo import module_io

    with module_io.ir_context():
        module_io.parse_module(program.text(probe=True))
    compile_module(program.text())


def test_generator_covers_the_families() -> None:
    """Over a fixed sample, the generator emits every op family the issue lists."""
    seen: set[str] = set()

    @settings(max_examples=150, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(program=programs())
    def collect(program: Program) -> None:
        seen.update(program.ops)

    collect()
    wanted = {"stablehlo.add", "stablehlo.multiply", "stablehlo.dot_general",
              "stablehlo.reduce", "stablehlo.broadcast_in_dim", "stablehlo.concatenate",
              "stablehlo.select", "stablehlo.while", "stablehlo.constant", "stablehlo.tanh"}
    assert wanted <= seen, f"never generated: {sorted(wanted - seen)}"
    from scalify_hlo.rewrites.rules import RULES

    assert {op for op in seen if op.startswith("stablehlo.")} - {"stablehlo.return"} <= set(
        RULES), "the generator emits an op without a rule"


# ----- saved regressions -----------------------------------------------------------------------
def _regressions() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.mlir")) if REGRESSIONS.is_dir() else []


def _header(path: Path, key: str) -> str | None:
    match = re.search(rf"^// {key}: (.*)$", path.read_text(), re.M)
    return match.group(1).strip() if match else None


def _regression_params() -> list:
    params = []
    for path in _regressions():
        if _header(path, "SCALES") is None:
            continue
        xfail = _header(path, "XFAIL")
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        params.append(pytest.param(path, marks=marks, id=path.stem))
    return params


@pytest.mark.parametrize("path", _regression_params())
def test_regression_exact(path: Path) -> None:
    """Each saved regression (with SCALES and SEED lines) reproduces the original exactly;
    files with an XFAIL line are known bugs and must still fail (strict)."""
    exponents = [int(k) for k in (_header(path, "SCALES") or "").split()]
    seed = int(_header(path, "SEED") or 0)
    run = re.search(r"--pipeline '([^']*)'", path.read_text())
    text = re.sub(r"^//.*\n", "", path.read_text(), flags=re.M)
    check_exact(text, exponents, seed, pipeline=run.group(1) if run else PIPELINE)
