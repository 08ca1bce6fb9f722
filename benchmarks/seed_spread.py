"""Seed spread: is a family's loss gap against jax.jit a bias of the mode, or chaos?

Why this script exists: ``benchmarks/models.py`` judges one seed at one step, and on a family
whose trajectory is chaotic that judges noise. Here each seed trains ``jax.jit(train_step)``,
the same with every initial parameter multiplied by ``1 + 1e-6`` (how far the reference
itself moves for a perturbation far below any rounding the modes add: the noise floor), and
each mode through the documented loop. The figure per seed is the relative difference of the
mean of the last ``--tail`` losses from jax.jit's; over seeds, their mean (a bias shows here)
and spread. The model and optimizer are the same for every seed (only initial values, keys
and batches change), so each mode compiles once.

    python benchmarks/seed_spread.py --family cnn --seeds 5
    python benchmarks/seed_spread.py --family cnn --seeds 4 --batch 128 --modes f16 default

Results: ``docs/results/seed_spread.json`` (one entry per family and batch, the latest run
of each kept) and the "Seed spread" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

import jax
import numpy as np
from common import RESULTS, environment, format_table, markdown_table, publish
from models import MODES, PERTURBATION, _loss, load_families, reference_run, same_step

from scalify_hlo import Policy, compile_scaled

HEADING = "Seed spread"
# FP8 dots alone: f32 data (exact scale propagation), each FP8 operand at its own amax. Its
# gap is what FP8 dots cost the family whatever else a mode does.
FP8_ALONE = "inline,scalify{data-dtype=f32},fp8-dots{scaling=amax},simplify"
VARIANTS: dict[str, dict[str, Any]] = {
    **{name: {"policy": policy} for name, policy in MODES.items()},
    "fp8-alone": {"pipeline": FP8_ALONE},
    # The default policy with the output head in FP8 too (what keeping it out buys).
    "default, fp8 head": {"policy": Policy(fp8_output_head=True)},
    "fp8-alone, fp8 head": {"pipeline": FP8_ALONE.replace("scaling=amax",
                                                          "scaling=amax output-head=fp8")},
}


def _losses_scaled(step: Any, state: Any, batches: Any, steps: int) -> list[float]:
    state = step.scale_args(jax.device_put(state, jax.devices()[0]), *next(batches()))[0]
    losses = []
    for _, batch in zip(range(steps), batches(), strict=False):
        state, loss = step(state, *batch)
        losses.append(_loss(loss))
    return losses


def run(family: str, seeds: int, batch: int | None, modes: list[str], steps: int,
        tail: int) -> dict[str, Any]:
    factory = load_families().FAMILIES[family]
    kwargs = {"batch": batch} if batch is not None else {}
    if batch is not None and "batch" not in inspect.signature(factory).parameters:
        raise SystemExit(f"error: family {family} takes no batch size")
    first: Any = None
    compiled: dict[str, Any] = {}
    per_seed: dict[str, list[float]] = {name: [] for name in ["jit, init x (1+1e-6)", *modes]}
    for seed in range(seeds):
        seeded = factory(seed=seed, **kwargs)
        # One model and optimizer for every seed: the first seed's step and static fields.
        first = first or seeded
        step_fn, state, batches = seeded = same_step(first, seeded)
        reference = np.mean(reference_run(seeded, steps)["losses"][-tail:])
        runs = {"jit, init x (1+1e-6)": reference_run(seeded, steps, PERTURBATION)["losses"]}
        for mode in modes:
            if mode not in compiled:
                sample = jax.device_put(state, jax.devices()[0])
                compiled[mode] = compile_scaled(step_fn, sample, *next(batches()),
                                                **VARIANTS[mode])
            runs[mode] = _losses_scaled(compiled[mode], state, batches, steps)
        for name, losses in runs.items():
            per_seed[name].append(float(np.mean(losses[-tail:]) / reference - 1))
        print(f"seed {seed}: " + ", ".join(f"{n} {v[-1]:+.2%}" for n, v in per_seed.items()),
              file=sys.stderr, flush=True)
    return {"family": family, "batch": batch, "seeds": seeds, "steps": steps, "tail": tail,
            "relative_diff": per_seed}


HEADERS = ["family", "batch", "losses averaged", "variant", "per seed", "mean", "std",
           "max abs diff"]


def rows(result: dict[str, Any]) -> list[list[str]]:
    out = []
    for entry in result["entries"]:
        for name, diffs in entry["relative_diff"].items():
            values = np.asarray(diffs)
            out.append([entry["family"], str(entry["batch"] or "default"),
                        f"last {entry['tail']} of {entry['steps']}", name,
                        " ".join(f"{v:+.1%}" for v in values), f"{values.mean():+.2%}",
                        f"{values.std():.2%}", f"{np.abs(values).max():.1%}"])
    return out


def doc_section(result: dict[str, Any]) -> str:
    return "\n".join([
        "`python benchmarks/seed_spread.py` (`--family`, `--seeds`, `--batch`, `--modes`). "
        "Per seed, the relative difference of the mean of the last training losses from "
        "`jax.jit(train_step)`'s on the same batches: "
        f"jax.jit with every initial parameter multiplied by 1 + {PERTURBATION:g} (the "
        "reference's own sensitivity: a change far below any rounding a mode adds), modes of "
        "`benchmarks/models.py` and *fp8-alone*: FP8 dots on f32 data, each operand at its "
        f"own amax (`{FP8_ALONE}`), what FP8 dots cost the family by themselves. A mode "
        "whose *mean* is within the perturbed reference's spread is noise on that family; a "
        "mean beyond it is a bias.",
        "", markdown_table(HEADERS, rows(result)), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="cnn", choices=list(load_families().FAMILIES))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--modes", nargs="+", choices=list(VARIANTS),
                        default=["f16", "default", "fp8-alone"])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--tail", type=int, default=50)
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.steps < 1 or not 1 <= args.tail <= args.steps:
        parser.error("--seeds and --steps must be at least 1, --tail in [1, steps]")
    entry = run(args.family, args.seeds, args.batch, args.modes, args.steps, args.tail)
    out = RESULTS / "seed_spread.json"
    payload = json.loads(out.read_text()) if out.exists() else {"entries": []}
    payload["entries"] = [e for e in payload["entries"]
                          if (e["family"], e["batch"]) != (entry["family"], entry["batch"])]
    payload["entries"].append(entry)
    payload["environment"] = environment()
    print(format_table(HEADERS, rows({"entries": [entry]})))
    publish(out, payload, HEADING, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
