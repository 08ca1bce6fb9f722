"""Model families: train each family of ``testdata/model_families.py`` through compile_scaled.

Why this script exists: the sample steps the rewrite was built on (MLPs, one GPT) are not
what users train. This runs the families they do train (CNN and ResNet with BatchNorm, a VAE
that samples inside the step, LSTM classifier and seq2seq, decoder-only and encoder-decoder
transformers, a sequence tagger, a GPT with its layers under ``nn.scan``), each with its
usual optimizer, through the documented loop::

    step = compile_scaled(train_step, state, *batch, policy=policy)
    state = step.scale_args(state, *batch)[0]
    for batch in batches:
        state, loss = step(state, *batch)   # the step's outputs fed back

in five modes (``--modes`` picks some), against ``jax.jit(train_step)`` on the same batches:

* ``f32``: ``Policy(data_dtype="float32", fp8_dots=False)``, which must match jax.jit to f32
  rounding: after 5 steps every loss and every state leaf within rtol 1e-5 (parameters whose
  gradient is rounding noise aside: ``model_families.noise_mask``);
* ``f16``: ``Policy(data_dtype="float16", fp8_dots=False)``;
* ``default``: ``Policy()`` (f16 data, FP8 dots, rescaling at gradients);
* ``h100``: ``Policy.for_target("h100")``, what compile_scaled picks on a GPU (the same with
  delayed statistics: a fed-back call applies the exponents the call before measured);
* ``tpu7x``: ``Policy.for_target("tpu7x")``, what it picks on an FP8 TPU (bf16 data, the
  update's results rounded to it stochastically, FP8 dots, delayed statistics).

Targets for every mode: the loss at the last step within 2% of jax.jit's on average over
``--seeds`` seeds, the loss at a step taken as the mean of the last ``TAIL`` losses. One
batch's loss is a sample of it, and one seed is one trajectory: FP8 rounding moves each
operand by a few %, which moves a small model's loss at step 100 by a few % either way from
seed to seed; the mean over seeds shows a bias. The *noise floor* beside it is the same
figure for jax.jit with its initial parameters moved by 1e-6: a family where that is not far
below the target is chaotic and cannot judge a mode. No NaN/Inf in any output at any step
(eval-only state such as BatchNorm running statistics included; every seed); no parameter
leaf whose data is all zero where jax.jit's is not.

    python benchmarks/models.py                                  # every family and mode
    python benchmarks/models.py --families cnn vae --modes f16 --steps 20 --seeds 2 4

Results: ``docs/results/models.json`` (runs of other families and modes kept when a subset
is run with the same ``--steps``) and the "Model families" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import RESULTS, ROOT, environment, format_table, markdown_table, publish

from scalify_hlo import Policy, compile_scaled, unscale_tree
from scalify_hlo.errors import ScalifyError
from scalify_hlo.scaled_array import ScaledArray, is_scaled_leaf

MODES = {
    "f32": Policy(data_dtype="float32", fp8_dots=False),
    "f16": Policy(data_dtype="float16", fp8_dots=False),
    "default": Policy(),
    # What compile_scaled picks on a GPU (f16 data, FP8 dots, delayed statistics) and on an
    # FP8 TPU (bf16 data).
    "h100": Policy.for_target("h100"),
    "tpu7x": Policy.for_target("tpu7x"),
}
DEFAULT_MODES = list(MODES)
EXACT_STEPS = 5
EXACT_RTOL = 1e-5
LOSS_TOLERANCE = 0.02
TAIL = 10  # the loss at the last step: the mean of the last losses, less noisy than one batch's
# The loss target is a mean over seeds: FP8 rounding moves a small model's loss at step 100 a
# few % either way per seed (the CNN: 6.5% standard deviation over 32 seeds). Seeds run until
# the mean's standard error is under a quarter of the target, from SEEDS[0] to SEEDS[1].
SEEDS = (8, 64)
# Calls counted as compile: the first, and the first fed the step's own outputs, where a step
# with delayed statistics compiles its second program (the one that applies given exponents).
WARMUP_CALLS = 2
SE_TARGET = LOSS_TOLERANCE / 4
PERTURBATION = 1e-6  # the noise floor: jax.jit with every initial parameter times 1 + this
OUT = RESULTS / "models.json"
HEADING = "Model families"


def load_families() -> ModuleType:
    """``testdata/model_families.py`` by path (testdata/ is not a package)."""
    path = ROOT / "testdata" / "model_families.py"
    spec = importlib.util.spec_from_file_location("model_families", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_families"] = module  # flax struct dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@jax.jit
def _all_finite(tree: Any) -> jax.Array:
    """Whether every floating leaf of ``tree`` (ScaledArrays: data and scale) is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(x.dtype, jnp.floating)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def _loss(value: Any) -> float:
    return float(value.unscale() if isinstance(value, ScaledArray) else value)


def reference_run(family: Any, steps: int, perturbation: float = 0.0) -> dict[str, Any]:
    """``jax.jit(train_step)`` for ``steps`` steps: losses, the state after ``EXACT_STEPS``
    steps and at the end, seconds. ``perturbation``: every initial parameter multiplied by
    ``1 + perturbation`` (far below any rounding a mode adds: how far the reference itself
    moves, the noise floor of the loss target)."""
    step, state, batches = family
    if perturbation:
        state = state.replace(params=jax.tree.map(lambda p: p * (1 + perturbation),
                                                  state.params))
    jitted, losses, early = jax.jit(step), [], state
    start = time.perf_counter()
    for index, batch in zip(range(steps), batches(), strict=False):
        state, loss = jitted(state, *batch)
        losses.append(_loss(loss))
        if index + 1 == EXACT_STEPS:
            early = state
    return {"losses": losses, "early": early, "final": state,
            "seconds": time.perf_counter() - start}


def scaled_run(family: Any, policy: Policy, steps: int,
               compiled: Any = None) -> dict[str, Any]:
    """The documented loop for ``steps`` steps: losses, the first step whose outputs are not
    all finite, the state after ``EXACT_STEPS`` steps and at the end (ScaledArrays), seconds
    to the end of the first ``WARMUP_CALLS`` steps and for the rest (``timed_steps`` of
    them), the compiled step.
    ``compiled``: a step compiled for another seed of the same family (same shapes: no second
    compile)."""
    step_fn, state, batches = family
    iterator = batches()
    first = next(iterator)
    # On the device first: scale_args' outputs of an uncommitted state are uncommitted, the
    # step's are committed, and jax.jit compiles the step again for them (training/modes.py).
    state = jax.device_put(state, jax.devices()[0])
    start = time.perf_counter()
    step = compiled or compile_scaled(step_fn, state, *first, policy=policy)
    state = step.scale_args(state, *first)[0]
    losses: list[float] = []
    nonfinite_step, early, compile_s = None, state, 0.0
    warmup = min(WARMUP_CALLS, steps)
    batch = first
    for index in range(steps):
        state, loss = step(state, *batch)
        losses.append(_loss(loss))
        if nonfinite_step is None and not bool(_all_finite((state, loss))):
            nonfinite_step = index
        if index + 1 == warmup:
            compile_s = time.perf_counter() - start
        if index + 1 == EXACT_STEPS:
            early = state
        batch = next(iterator)
    return {"losses": losses, "nonfinite_step": nonfinite_step, "early": early,
            "final": state, "compile_s": compile_s,
            "run_s": time.perf_counter() - start - compile_s, "timed_steps": steps - warmup,
            "report": step.report(),
            "step": step}


def tail_relative(losses: list[float], reference: list[float]) -> float:
    """Relative difference of the mean of the last ``TAIL`` losses from the reference's."""
    got, want = float(np.mean(losses[-TAIL:])), float(np.mean(reference[-TAIL:]))
    return (got - want) / abs(want) if math.isfinite(got) else math.inf


def noise_floor(reference: dict[str, Any], perturbed: dict[str, Any]) -> dict[str, float]:
    """How far jax.jit moves from its own run when its initial parameters move by
    ``PERTURBATION``: the last loss and the tail mean, relative."""
    last, want = perturbed["losses"][-1], reference["losses"][-1]
    return {"last": (last - want) / abs(want),
            "tail": tail_relative(perturbed["losses"], reference["losses"])}


def _data(tree: Any) -> Any:
    """The data halves of a tree of ScaledArrays (other leaves as they are)."""
    return jax.tree.map(lambda x: x.data if isinstance(x, ScaledArray) else x, tree,
                        is_leaf=is_scaled_leaf)


def evaluate(families: ModuleType, mode: str, reference: dict[str, Any],
             run: dict[str, Any], seed_tails: list[float],
             seeds_finite: bool) -> dict[str, Any]:
    """The targets of one run against the reference's; the loss target on the mean over
    seeds of the tail's relative difference (``seed_tails``: seed 0's first)."""
    steps = len(run["losses"])
    loss, want = run["losses"][-1], reference["losses"][-1]
    mean_tail = float(np.mean(seed_tails))
    relative = abs(mean_tail) if math.isfinite(mean_tail) else math.inf
    final = unscale_tree(run["final"])
    nonfinite = families.nonfinite_leaves(final) + [
        f"data{p}" for p in families.nonfinite_leaves(_data(run["final"]))]
    zeroed = families.zeroed_leaves(_data(run["final"]).params, reference["final"].params)
    finite = (run["nonfinite_step"] is None and not nonfinite and seeds_finite
              and all(math.isfinite(v) for v in run["losses"]))
    result: dict[str, Any] = {
        "steps": steps, "loss": loss, "reference_loss": want, "relative_diff": relative,
        "seed_tail_diffs": seed_tails,
        "losses": run["losses"], "reference_losses": reference["losses"],
        "first_nonfinite_step": run["nonfinite_step"], "nonfinite_leaves": nonfinite[:10],
        "zeroed_parameter_leaves": zeroed,
        "zeroed_state_leaves": families.zeroed_leaves(_data(run["final"]),
                                                      reference["final"]),
        "targets": {"loss_within_2pct": relative <= LOSS_TOLERANCE, "finite": finite,
                    "no_zeroed_leaves": not zeroed},
        "compile_s": run["compile_s"], "run_s": run["run_s"],
        "steps_per_s": run["timed_steps"] / run["run_s"] if run["run_s"] > 0 else None,
        "fallbacks": len(run["report"].fallbacks),
    }
    if mode == "f32" and steps >= EXACT_STEPS:
        mask = families.noise_mask(reference["early"])
        got = families.without_noise(unscale_tree(run["early"]), mask)
        diff, where = families.max_relative_diff(got, families.without_noise(
            reference["early"], mask))
        losses = np.asarray(run["losses"][:EXACT_STEPS])
        want_losses = np.asarray(reference["losses"][:EXACT_STEPS])
        loss_diff = float(np.max(np.abs(losses - want_losses) / np.abs(want_losses)))
        result["exact"] = {"state_diff": diff, "worst_leaf": where, "loss_diff": loss_diff,
                           "noise_leaves": sum(jax.tree.leaves(mask))}
        result["targets"]["exact_at_5"] = diff <= EXACT_RTOL and loss_diff <= EXACT_RTOL
    result["passed"] = all(result["targets"].values())
    return result


def same_step(family: Any, other: Any) -> Any:
    """``other`` (another seed) with ``family``'s step and static state fields (its own
    optimizer object and model method compare unequal: the compiled step would refuse it)."""
    state = jax.tree.unflatten(jax.tree.structure(family.state), jax.tree.leaves(other.state))
    return other._replace(step=family.step, state=state)


class Seeds:
    """The seeds of one family (initial values, keys and batches), built when a mode first
    needs them, with jax.jit's losses and the noise floor of each: shared by the modes."""

    def __init__(self, families: ModuleType, name: str, steps: int) -> None:
        self.families, self.name, self.steps = families, name, steps
        self.base = families.FAMILIES[name]()
        self.reference = reference_run(self.base, steps)
        floor = noise_floor(self.reference, reference_run(self.base, steps, PERTURBATION))
        self.floor = floor | {"tails": [floor["tail"]]}
        self._families: list[Any] = [self.base]
        self._losses: list[list[float]] = [self.reference["losses"]]

    def family(self, seed: int) -> Any:
        while len(self._families) <= seed:
            other = self.families.FAMILIES[self.name](seed=len(self._families))
            self._families.append(same_step(self.base, other))
        return self._families[seed]

    def losses(self, seed: int) -> list[float]:
        """jax.jit's losses of ``seed`` (and the seed's noise floor, computed beside them)."""
        while len(self._losses) <= seed:
            family = self.family(len(self._losses))
            self._losses.append(reference_run(family, self.steps)["losses"])
            perturbed = reference_run(family, self.steps, PERTURBATION)["losses"]
            self.floor["tails"].append(tail_relative(perturbed, self._losses[-1]))
        return self._losses[seed]


def standard_error(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.inf


def seed_tails(seeds: Seeds, run: dict[str, Any], policy: Policy, low: int,
               high: int) -> tuple[list[float], bool]:
    """The tail's relative difference per seed (seed 0: ``run``), from ``low`` seeds on until
    the mean's standard error is under ``SE_TARGET`` or ``high`` seeds ran; whether every
    seed stayed finite."""
    tails = [tail_relative(run["losses"], seeds.losses(0))]
    while len(tails) < high and (len(tails) < low or standard_error(tails) > SE_TARGET):
        seed = len(tails)
        other = scaled_run(seeds.family(seed), policy, seeds.steps, run["step"])
        tails.append(tail_relative(other["losses"], seeds.losses(seed)))
        if other["nonfinite_step"] is not None or not math.isfinite(tails[-1]):
            return tails, False
    return tails, True


def run_family(families: ModuleType, name: str, modes: list[str], steps: int,
               seeds: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """Every mode of one family: seed 0 in full (exactness, finiteness, zeroed leaves), the
    loss target over ``seeds[0]`` to ``seeds[1]`` seeds, each mode compiled once."""
    print(f"{name}: jax.jit ...", file=sys.stderr, flush=True)
    family_seeds = Seeds(families, name, steps)
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        print(f"{name}: {mode} ...", file=sys.stderr, flush=True)
        try:
            run = scaled_run(family_seeds.base, MODES[mode], steps)
            tails, finite = seed_tails(family_seeds, run, MODES[mode], *seeds)
        except ScalifyError as error:
            results[mode] = {"steps": steps, "error": str(error), "passed": False, "targets": {}}
            continue
        reference = family_seeds.reference
        results[mode] = evaluate(families, mode, reference, run, tails, finite)
        results[mode]["reference_s"] = reference["seconds"]
        floor = family_seeds.floor
        results[mode]["noise_floor"] = floor | {"tails": floor["tails"][:len(tails)]}
        print(f"  {row(name, mode, results[mode])}", file=sys.stderr, flush=True)
    return results


HEADERS = ["family", "mode", "loss", "jax.jit loss", "last rel diff", f"last {TAIL} rel diff",
           f"last {TAIL}, mean of seeds", "seeds", "noise floor", "exact @5", "NaN/Inf",
           "zeroed leaves", "loss 2%", "finite", "no zeroed", "pass", "compile s", "steps/s"]


def _mark(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def _relative(value: float, reference: float) -> str:
    return f"{(value - reference) / abs(reference):+.2%}" if math.isfinite(value) else "nan"


def row(name: str, mode: str, r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [name, mode, "error", *[""] * 12, "NO", "", r["error"][:60]]
    targets = r["targets"]
    exact, floor, tails = r.get("exact"), r.get("noise_floor"), r["seed_tail_diffs"]
    nonfinite = ("none" if targets["finite"] else
                 f"step {r['first_nonfinite_step']}" if r["first_nonfinite_step"] is not None
                 else "loss")
    return [name, mode, f"{r['loss']:.4f}", f"{r['reference_loss']:.4f}",
            _relative(r["loss"], r["reference_loss"]),
            _relative(float(np.mean(r["losses"][-TAIL:])),
                      float(np.mean(r["reference_losses"][-TAIL:]))),
            f"{np.mean(tails):+.2%}",
            f"{len(tails)}, se {standard_error(tails):.2%}, {min(tails):+.1%} .. {max(tails):+.1%}",
            (f"{np.mean(floor['tails']):+.2%} (max {max(map(abs, floor['tails'])):.2%})"
             if floor else "-"),
            f"{exact['state_diff']:.1e}" if exact else "-", nonfinite,
            str(len(r["zeroed_parameter_leaves"])), _mark(targets["loss_within_2pct"]),
            _mark(targets["finite"]), _mark(targets["no_zeroed_leaves"]),
            "pass" if r["passed"] else "FAIL", f"{r['compile_s']:.1f}",
            f"{r['steps_per_s']:.1f}" if r["steps_per_s"] else "-"]


def table_rows(runs: dict[str, dict[str, Any]], order: list[str]) -> list[list[str]]:
    return [row(name, mode, runs[name][mode]) for name in order if name in runs
            for mode in MODES if mode in runs[name]]


def load_results(steps: int, seeds: list[int]) -> dict[str, Any]:
    """The JSON of earlier runs with the same numbers of steps and seeds (a fresh one
    otherwise)."""
    if OUT.exists():
        payload = json.loads(OUT.read_text())
        if payload.get("steps") == steps and payload.get("seeds") == seeds:
            return payload
    return {"steps": steps, "seeds": seeds, "runs": {}}


def doc_section(result: dict[str, Any]) -> str:
    runs, order = result["runs"], result["families"]
    seeds = result.get("seeds", SEEDS)
    rows = table_rows(runs, order)
    passed = {mode: [n for n in order if n in runs and runs[n].get(mode, {}).get("passed")]
              for mode in MODES if any(mode in runs.get(n, {}) for n in order)}
    failures = []
    for name in order:
        for mode, r in runs.get(name, {}).items():
            if not r.get("passed"):
                missed = [t for t, ok in r.get("targets", {}).items() if not ok]
                detail = r.get("error") or ", ".join(missed)
                zeroed = r.get("zeroed_parameter_leaves") or []
                if zeroed:
                    more = " ..." if len(zeroed) > 3 else ""
                    detail += f" (zeroed: {', '.join(zeroed[:3])}{more})"
                failures.append(f"  * {name} {mode}: {detail}")
    return "\n".join([
        f"`python benchmarks/models.py` (`--families`, `--modes`, `--steps`, `--seeds`). Each "
        "family of `testdata/model_families.py` (Flax linen + optax, small sizes) trained "
        f"{result['steps']} steps through the documented loop (`compile_scaled`, "
        "`scale_args`, the step's outputs fed back; the initial state `device_put` first, "
        "else the second call compiles the step again) on the same batches as "
        "`jax.jit(train_step)`. Modes: *f32* `Policy(data_dtype=\"float32\", "
        "fp8_dots=False)`, *f16* `Policy(data_dtype=\"float16\", fp8_dots=False)`, "
        "*default* `Policy()` (f16 data, FP8 dots but the output head's, rescale at "
        "gradients), *h100* `Policy.for_target(\"h100\")` (what compile_scaled picks on a "
        "GPU: the same with delayed statistics), *tpu7x* `Policy.for_target(\"tpu7x\")` "
        "(what it picks on an FP8 TPU: bf16 data, the update's results rounded to it "
        "stochastically, FP8 dots, delayed statistics). "
        "*loss*: the loss of "
        f"the last step, scaled run and jax.jit (seed 0), *last rel diff* between them, *last "
        f"{TAIL} rel diff* the same of the mean of the last {TAIL} losses (one batch's loss is "
        f"a sample of the loss at that step), *last {TAIL}, mean of seeds* its mean over "
        "seeds (initial values, dropout keys and batches; the target: FP8 rounding is a "
        "perturbation of a few % of each operand, which moves a small model's loss at step "
        "100 by a few % either way from seed to seed; a mean shows a bias), *seeds*: how many, "
        f"at least {seeds[0]}, more until the mean's standard error (*se*) is under "
        f"{SE_TARGET:.1%}, at most {seeds[1]}, and the range per seed; *noise floor*: the "
        "mean over the same seeds of the same figure for jax.jit with every initial "
        f"parameter multiplied by 1 + {PERTURBATION:g} (a "
        "change far below any rounding a mode adds; where it is not far below the target, "
        "the family's trajectory is chaotic and cannot judge a mode) and its largest "
        "magnitude; *exact @5*: f32 mode, the largest relative "
        f"difference of a state leaf from jax.jit's after {EXACT_STEPS} steps (target "
        f"{EXACT_RTOL:g}, losses too; parameters whose gradient is rounding noise aside, see "
        "`noise_mask`); *NaN/Inf*: the first step with a NaN or Inf in any output (the "
        "state's data and scales, BatchNorm statistics included, and the loss; other seeds: "
        "the state and loss at each step); *zeroed "
        "leaves*: parameter leaves whose data is all zero where jax.jit's is not. Targets: "
        f"loss within {LOSS_TOLERANCE:.0%}, finite, no zeroed leaves (and exact for f32). "
        "*compile s*: compile_scaled, scale_args and the first two steps (the second is the "
        "first fed the step's outputs: a step with delayed statistics, as *h100*'s, compiles "
        "its second program there); steps/s over the rest, on this machine's shared 2-core "
        "CPU.",
        "", markdown_table(HEADERS, rows), "",
        *[f"* {mode}: {len(names)} of {len([n for n in order if mode in runs.get(n, {})])} "
          f"families pass every target ({', '.join(names) or 'none'})."
          for mode, names in passed.items()],
        *(["* Failures:", *failures] if failures else []),
        "",
        f"Wall time of the run: {result.get('wall_s', 0):.0f} s "
        f"(families: {', '.join(result.get('last_run', []))}).",
    ])


def main(argv: list[str] | None = None) -> int:
    families = load_families()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=list(families.FAMILIES),
                        default=list(families.FAMILIES))
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=DEFAULT_MODES)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs=2, default=SEEDS, metavar=("MIN", "MAX"),
                        help="seeds the loss target is averaged over: at least MIN, more until "
                             "the mean's standard error is under a quarter of the target, at "
                             "most MAX (seed 0 runs every check)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    parser.add_argument("--doc-only", action="store_true",
                        help="only rewrite the docs section from the JSON")
    args = parser.parse_args(argv)
    if args.steps < 1 or not 1 <= args.seeds[0] <= args.seeds[1]:
        parser.error("--steps must be at least 1, and --seeds 1 <= MIN <= MAX")
    args.seeds = tuple(args.seeds)
    if args.doc_only:
        payload = json.loads(args.out.read_text())
        publish(args.out, payload, HEADING, doc_section)
        return 0
    start = time.perf_counter()
    payload = load_results(args.steps, list(args.seeds))
    for name in args.families:
        runs = run_family(families, name, args.modes, args.steps, args.seeds)
        payload["runs"].setdefault(name, {}).update(runs)
    payload.update(environment=environment(), families=list(families.FAMILIES),
                   wall_s=time.perf_counter() - start, last_run=args.families)
    print(format_table(HEADERS, table_rows(payload["runs"], list(families.FAMILIES))))
    publish(args.out, payload, HEADING, doc_section, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
