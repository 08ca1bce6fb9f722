"""Per-call cost of the scales a ``compile_scaled`` step gets, by where they come from.

Why this script exists: a step accepts any finite positive scale (docs/scaled-signature.md):
a scale it cannot trust to be a power of two is split in the program, a multiply of the data
by the scale's mantissa. That must not cost the common case anything: scales the step itself
returned, as a bank or flattened out of it (``jax.block_until_ready``, ``jax.tree.map``), and
``scale_tree``'s. This script times one training-loop call (call, wait for the loss) of the
sample MLP step (``testdata/models.py``, f32 mode) with its parameters given as:

* ``bank``: the state the step returned the call before (its scales in one bank);
* ``flattened``: the same after ``jax.block_until_ready`` (each ScaledArray its own scale);
* ``scale_tree``: ``scale_tree(params)``;
* ``python pow2``: ``ScaledArray(data, 2.0 ** k)``, Python floats (checked on the host);
* ``device pow2``: ``ScaledArray(data, jnp.float32(2.0 ** k))`` made by the user (split: the
  step cannot read a device scale without waiting for it);
* ``device pow2, check_scales``: the same with ``compile_scaled(..., check_scales=True)``
  (each scale read on the host, refused if bad, passed as it is if a power of two);
* ``device 3 * 2^k``: user scales that are not powers of two (split in the program).

Each against ``jax.jit(fn)`` on plain arrays, interleaved rounds, median of per-round ratios.

    python benchmarks/user_scales.py            # writes docs/results/user_scales.json
    python benchmarks/user_scales.py --quick    # 5 rounds
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from common import (
    RESULTS,
    environment,
    format_table,
    interleaved,
    load_models,
    output_path,
    paired_ratio,
    write_json,
)

from scalify_hlo import Policy, ScaledArray, compile_scaled, scale_tree

POLICY = Policy(data_dtype="float32", fp8_dots=False)
BASELINE = "jax.jit(fn)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block")
    parser.add_argument("--quick", action="store_true", help="5 rounds of 50 calls")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON to write (docs/results/user_scales.json; a --quick "
                        "run's goes to the temporary directory)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls = 5, 50
    args.out = output_path(args.out, RESULTS / "user_scales.json", args.quick)
    return args


def _loss(outputs: Any) -> jax.Array:
    loss = outputs[-1]
    return loss.data if isinstance(loss, ScaledArray) else loss


def _user_scaled(params: Any, scale: Callable[[int], Any]) -> Any:
    """Every parameter as ``ScaledArray(value / s, s)`` with ``s = scale(k)``, ``2^k`` near
    its RMS (``k`` from ``scale_tree``)."""
    def one(leaf: ScaledArray) -> ScaledArray:
        k = round(float(jnp.log2(leaf.scale)))
        s = scale(k)
        return ScaledArray(leaf.unscale() / float(s), s)
    return jax.tree.map(one, scale_tree(params, jnp.float32),
                        is_leaf=lambda x: isinstance(x, ScaledArray))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fn, (params, x, y) = load_models().mlp_step()
    baseline = jax.jit(fn)
    step = compile_scaled(fn, params, x, y, policy=POLICY)
    try:
        checked = compile_scaled(fn, params, x, y, policy=POLICY, check_scales=True)
    except TypeError:  # a version from before check_scales, for a before/after comparison
        checked = None
    bank = step(scale_tree(params, jnp.float32), x, y)[0]
    forms: dict[str, tuple[Any, Any]] = {
        "bank": (step, bank),
        "flattened": (step, jax.block_until_ready(step(bank, x, y)[0])),
        "scale_tree": (step, scale_tree(params, jnp.float32)),
        "python pow2": (step, _user_scaled(params, lambda k: 2.0 ** k)),
        "device pow2": (step, _user_scaled(params, lambda k: jnp.float32(2.0 ** k))),
        "device pow2, check_scales": (checked, _user_scaled(params,
                                                            lambda k: jnp.float32(2.0 ** k))),
        "device 3 * 2^k": (step, _user_scaled(params, lambda k: jnp.float32(3.0 * 2.0 ** k))),
    }
    forms = {name: form for name, form in forms.items() if form[0] is not None}

    def block(call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(args.calls):
                call()
        return run

    calls = {BASELINE: block(lambda: baseline(params, x, y)[-1].block_until_ready())}
    for name, (compiled, state) in forms.items():
        calls[name] = block(lambda c=compiled, s=state: _loss(c(s, x, y)).block_until_ready())
    samples = interleaved(calls, args.rounds)
    cpu: dict[str, float] = {}
    for name, call in calls.items():  # process CPU time of one more block, for the record
        start = time.process_time()
        call()
        cpu[name] = (time.process_time() - start) / args.calls
    rows, variants = [], []
    for name in calls:
        median_us = statistics.median(samples[name]) / args.calls * 1e6
        ratio = paired_ratio(samples[name], samples[BASELINE])
        variants.append({"variant": name, "median_us": median_us, "ratio": ratio,
                         "cpu_us": cpu[name] * 1e6})
        rows.append([name, f"{median_us:.1f}", f"{ratio:.3f}", f"{cpu[name] * 1e6:.1f}"])
    print(format_table(["parameters given as", "per call us", "ratio", "CPU us (1 block)"],
                       rows))
    write_json(args.out, {"environment": environment(), "rounds": args.rounds,
                          "calls_per_block": args.calls, "variants": variants})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
