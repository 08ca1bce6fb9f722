"""``export``, ``run`` and ``compare``: getting a module out of JAX and running it with XLA.

The work is done by ``scalify_hlo.compile.export`` and ``scalify_hlo.inputs``; this module
resolves command-line arguments (``MODULE:FUNCTION``, ``.npz`` paths, seeds) and prints.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import click
import numpy as np

import scalify_hlo
import scalify_hlo.rewrites
from scalify_hlo import host_run
from scalify_hlo import inputs as host
from scalify_hlo import tolerance as tol
from scalify_hlo.cli.common import UserError, read_input, write_output
from scalify_hlo.module_info import ModuleInfo, module_info
from scalify_hlo.names import label

_DOTTED_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
EXAMPLE_ARGS_SUFFIX = "_example_args"


# ----- export -----------------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message``, and where in the user's code it was raised."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    where = _user_frame(exc)
    return f"{text} (at {where})" if where else text


# Frames in these folders are Python's, an installed package's or this tool's, not the user's.
_NOT_USER_CODE = tuple({Path(p).resolve() for p in (
    sys.prefix, sys.base_prefix, sys.exec_prefix, Path(__file__).parent,
    Path(scalify_hlo.__file__).parent, Path(scalify_hlo.rewrites.__file__).parent)})


def _user_frame(exc: BaseException) -> str | None:
    """``FILE:LINE`` of the innermost traceback frame in the user's own code, if any."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = Path(frame.filename).resolve()
        if frame.filename.startswith("<") or any(path.is_relative_to(p) for p in _NOT_USER_CODE):
            continue
        try:
            shown = path.relative_to(Path.cwd().resolve())
        except ValueError:
            shown = path
        return f"{shown}:{frame.lineno}"
    return None


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"cannot find '{path}'")
    name = path.stem if _DOTTED_RE.match(path.stem) else "_scalify_export_target"
    if name in sys.modules:  # never shadow an imported module (jax, numpy, ...)
        name = f"_scalify_export_{name}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import '{path}': not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # as `python FILE` does, for its siblings
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a module or factory calling sys.exit too
        del sys.modules[name]
        raise UserError(f"cannot import '{path}': {_one_line(exc)}") from None
    return module


def _import_dotted(name: str) -> Any:
    if not _DOTTED_RE.match(name):
        raise UserError(f"'{name}' is neither a dotted module name nor a path to a .py file")
    sys.path.insert(0, str(Path.cwd()))  # as `python -m` does; the console script does not
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise UserError(f"cannot find module '{name}'") from None
        raise UserError(f"cannot import '{name}': {_one_line(exc)}") from None
    except (Exception, SystemExit) as exc:  # a module or factory calling sys.exit too
        raise UserError(f"cannot import '{name}': {_one_line(exc)}") from None


def resolve_target(target: str) -> tuple[Any, tuple[Any, ...]]:
    """``(function, example_args)`` for ``MODULE:FUNCTION`` (see ``export --help``)."""
    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name or not attribute:
        raise UserError(f"expected MODULE:FUNCTION (e.g. testdata/models.py:mlp_step), got "
                        f"'{target}'")
    if not _DOTTED_RE.match(attribute):
        raise UserError(f"'{attribute}' is not a Python name (in '{target}')")
    is_path = module_name.endswith(".py") or "/" in module_name or "\\" in module_name
    module = _import_file(Path(module_name)) if is_path else _import_dotted(module_name)
    parent, obj = None, module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise UserError(f"'{module_name}' has no attribute '{attribute}'")
        parent, obj = obj, getattr(obj, part)
    if not callable(obj):
        raise UserError(f"'{target}' is not callable (its type is {type(obj).__name__})")
    leaf = attribute.rsplit(".", 1)[-1]
    example_args = getattr(parent, leaf + EXAMPLE_ARGS_SUFFIX, None)
    if example_args is not None:
        factory = f"{leaf}{EXAMPLE_ARGS_SUFFIX}"
        if not callable(example_args):
            raise UserError(f"'{factory}' beside '{target}' is not callable")
        args = _call(example_args, factory)
        if not isinstance(args, tuple | list):
            raise UserError(f"{factory}() returned {_kind(args)}, expected a tuple of example "
                            f"arguments")
        return obj, tuple(args)
    required = _required_parameters(obj)
    if required:
        raise UserError(f"'{target}' takes arguments ({', '.join(required)}): define "
                        f"'{leaf}{EXAMPLE_ARGS_SUFFIX}()' beside it returning a tuple of "
                        f"example arguments, or name a factory returning (step_fn, "
                        f"example_args)")
    result = _call(obj, leaf)
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise UserError(f"{leaf}() returned {_kind(result)}, expected (step_fn, "
                        f"example_args)")
    fn, args = result
    if not callable(fn):
        raise UserError(f"{leaf}() returned ({_kind(fn)}, ...), expected a callable step_fn "
                        f"first")
    if not isinstance(args, tuple | list):
        raise UserError(f"{leaf}() returned (step_fn, {_kind(args)}), expected example_args "
                        f"as a tuple of arguments")
    return fn, tuple(args)


def _kind(value: Any) -> str:
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a value of type {type(value).__name__}"


def _required_parameters(fn: Any) -> list[str]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: just call them
        return []
    return [p.name for p in parameters if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _call(fn: Any, name: str) -> Any:
    try:
        return fn()
    except (Exception, SystemExit) as exc:  # a module or factory calling sys.exit too
        raise UserError(f"{name}() failed: {_one_line(exc)}") from None


@click.command()
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("-o", "--output", default="-", show_default=True, help="Output file, - for stdout.")
def export(target: str, output: str) -> None:
    """Export a JAX function to StableHLO text, with locations (JAX's name stack).

    MODULE is a dotted module name (imported with the current folder on the path) or a path
    to a .py file; FUNCTION names an object in it, one of:

    \b
    * a factory taking no arguments and returning (step_fn, example_args), example_args a
      tuple: step_fn is exported at example_args (testdata/models.py:mlp_step);
    * a function, exported at the arguments that FUNCTION_example_args(), a factory beside
      it in the same module, returns as a tuple.

    The module is jax.jit(step_fn).lower(*example_args), printed with debug info.
    """
    from scalify_hlo.compile import export as export_function

    fn, args = resolve_target(target)
    try:
        text = export_function(fn, *args)
    except (Exception, SystemExit) as exc:  # a module or factory calling sys.exit too
        raise UserError(f"cannot export '{target}': {_one_line(exc)}") from None
    write_output(output, text.encode())


# ----- run and compare --------------------------------------------------------------------


def _module(path: str) -> host.LoadedModule:
    name = "<stdin>" if path == "-" else path
    return host.load_module(read_input(path), name)


def _inputs(signature, inputs_path: str | None, seed: int | None, takes: str,
            names: tuple[str | None, ...] = (),
            squares: frozenset[int] = frozenset()) -> tuple[list[np.ndarray], str]:
    if inputs_path is not None and seed is not None:
        raise UserError("give --inputs or --seed, not both")
    if inputs_path is not None:
        if inputs_path == "-":
            raise UserError("--inputs needs a file, not stdin")
        arrays = host.load_inputs(read_input(inputs_path), inputs_path, signature, takes,
                                  names)
        return arrays, inputs_path
    return _random(signature, seed, squares)


_INPUTS_HELP = ("Inputs as .npz, one array per argument in order (arr_0, arr_1, ... as "
                "np.savez(path, *arrays) writes them, or arg0, arg1, ...).")
_SEED_HELP = ("Random inputs from this seed (the default, with seed 0): unit-normal floats, "
              "integers in [0, 4); |x| for squares (an argument named nu, or flowing into a "
              "sqrt/rsqrt), so that Adam's second moment is not negative. Other arguments "
              "that must be positive, token ids beyond 3, masks: give --inputs.")


def _random(signature, seed: int | None, squares: frozenset[int]
            ) -> tuple[list[np.ndarray], str]:
    seed = 0 if seed is None else seed
    rng = np.random.default_rng(seed)
    return host_run.random_step_inputs(signature, rng, squares), f"random, seed {seed}"


def _info(module: host.LoadedModule) -> ModuleInfo:
    return module_info(module.text, module.name)


@click.command()
@click.argument("module_path", metavar="IN")
@click.option("--inputs", "inputs_path", metavar="NPZ", help=_INPUTS_HELP + " For a scaled "
              "rewrite: in the original (unscaled) signature, or as the rewrite's own (data, "
              "scale) pairs.")
@click.option("--seed", type=int, help=_SEED_HELP)
@click.option("-o", "--output", metavar="NPZ", help="Write the outputs to this .npz "
              "(arr_0, arr_1, ...): a scaled rewrite's joined ones (data * scale, one array "
              "per original result) unless --raw.")
@click.option("--raw", is_flag=True, help="Show and write a scaled rewrite's own outputs "
              "((data, scale) pairs), not the joined ones.")
def run(module_path: str, inputs_path: str | None, seed: int | None,
        output: str | None, raw: bool) -> None:
    """Run the module IN with XLA on this machine and summarize each output.

    A scaled rewrite (scalify-hlo rewrite's output, which records the original signature)
    runs like the original step: inputs are given (or drawn) in the original signature and
    split into (data, power-of-two scale) pairs, scales from the RMS; outputs are joined
    (data * scale, in the original dtype). Each input and output is named by its pytree path
    where the module names it. A warning goes to stderr when an output has NaN or Inf and no
    input has.
    """
    if output == "-":
        raise UserError("-o needs a file name; outputs are summarized on stdout")
    if inputs_path is not None and seed is not None:
        raise UserError("give --inputs or --seed, not both")
    module = _module(module_path)
    info = _info(module)
    pairing = host_run.pair_module(module, info)
    names, result_names = host_run.original_names(pairing, info)
    if inputs_path is not None:
        if inputs_path == "-":
            raise UserError("--inputs needs a file, not stdin")
        arrays, original = host_run.load_run_inputs(
            read_input(inputs_path), inputs_path, module, pairing, names, info.input_names)
    else:
        squares = host_run.original_squares(pairing, info, names)
        signature = pairing.original if pairing is not None else module.signature
        arrays, _ = _random(signature, seed, squares)
        original = True
    outputs = _run_outputs(module, pairing, arrays, original, raw)
    if pairing is not None and raw:
        result_names = info.result_names
    for index, array in enumerate(outputs):
        click.echo(f"output {label(index, result_names)}: {host.summarize(array)}")
    _warn_nonfinite(arrays, outputs, result_names)
    if output is not None:
        write_output(output, host.npz_bytes(outputs))


def _run_outputs(module: host.LoadedModule, pairing: host.Pairing | None,
                 arrays: list[np.ndarray], original: bool, raw: bool) -> list[np.ndarray]:
    """The module's outputs; a scaled rewrite's joined back (data * scale, original dtypes)
    unless ``raw``. ``original``: ``arrays`` are in the original signature (split here)."""
    from scalify_hlo.runner import run_module

    if pairing is None:
        return run_module(module.text, arrays)
    flat = run_module(module.text, host.split_for(pairing, arrays) if original else arrays)
    if raw:
        return flat
    joined = host.join_outputs(pairing.original, flat, pairing.encoded_results)
    return host_run.joined_in_original_dtypes(pairing.original, joined)


def _warn_nonfinite(inputs: list[np.ndarray], outputs: list[np.ndarray],
                    names: tuple[str | None, ...]) -> None:
    bad = host_run.new_nonfinite(inputs, outputs)
    if bad:
        shown = ", ".join(label(i, names) for i in bad[:3]) + (", ..." if len(bad) > 3 else "")
        click.echo(f"warning: {len(bad)} of {len(outputs)} outputs have NaN or Inf, the inputs "
                   f"none: output {shown}", err=True)


@click.command()
@click.argument("a_path", metavar="A")
@click.argument("b_path", metavar="B")
@click.option("--inputs", "inputs_path", metavar="NPZ", help=_INPUTS_HELP + " Given in the "
              "original (unscaled) signature.")
@click.option("--seed", type=int, help=_SEED_HELP)
@click.option("--rtol", type=click.FloatRange(min=0), help="Largest max rel error allowed "
              f"for every output (default {tol.DEFAULT_RTOL:g}, unless --fp8, --min-snr or "
              "--scalar-rtol is given).")
@click.option("--fp8", is_flag=True, help="Judge an FP8 rewrite: every tensor output's SNR >= "
              f"{tol.FP8_MIN_SNR_DB:g} dB and every scalar output (the loss) within "
              f"{tol.FP8_SCALAR_RTOL:g} relative error (measured on the sample steps, "
              "docs/quickstart.md), instead of --rtol.")
@click.option("--min-snr", "min_snr", type=float, metavar="DB", help="Smallest SNR (dB) "
              "allowed for every tensor output (and scalar one without --scalar-rtol).")
@click.option("--scalar-rtol", type=click.FloatRange(min=0), help="Largest relative error "
              "allowed for every scalar output (the loss).")
def compare(a_path: str, b_path: str, inputs_path: str | None, seed: int | None,
            rtol: float | None, fp8: bool, min_snr: float | None,
            scalar_rtol: float | None) -> None:
    """Run modules A and B on the same inputs and compare their outputs, A as reference.

    Either both have the same entry signature, or one is the other's scaled rewrite (every
    f16/bf16/f32 argument and result split into data and scale): that one gets the inputs
    split into (data, power-of-two scale) and its outputs are joined back (data * scale).

    \b
    Per output, with a = A's output and b = B's:
      max abs err   max |a - b| (positions finite in both)
      max rel err   max |a - b| / max |a|   <- checked against --rtol
      max elem rel  max |a - b| / |a| where a != 0 (large where a is near 0)
      SNR dB        10 log10(sum a^2 / sum (a - b)^2), inf when equal
      NaN/Inf diff  positions where NaN or Inf differ (any is a failure)

    Inputs and outputs are named by their pytree paths where the modules name them.

    \b
    What to expect of the default FP8 pipeline (benchmarks/fp8_snr.py, real inputs or a
    trained state): max rel errors of 0.1 to 2 (Adam's first update flips sign where the
    gradient is near zero), SNR of 11 dB or more per tensor output, the loss within 2%:
    check it with --fp8 (docs/quickstart.md says where it does not apply).

    Exit status 0 when every output is within tolerance, 1 otherwise.
    """
    tolerance = tol.choose(rtol, fp8, min_snr, scalar_rtol)
    modules = (_module(a_path), _module(b_path))
    pairing = host.pair_signatures(*modules)
    names = (modules[0].name, modules[1].name)
    original = 1 - pairing.scaled if pairing.scaled is not None else 0
    info = _info(modules[original])
    scaled_info = _info(modules[pairing.scaled]) if pairing.scaled is not None else info
    arg_names, result_names = _compare_names(pairing, info, scaled_info)
    squares = host_run.original_squares(None, info, arg_names)
    arrays, source = _inputs(pairing.original, inputs_path, seed,
                             host.original_name(pairing, names), arg_names, squares)
    reference, other = host.run_pair(pairing, modules, arrays)
    diffs = host.compare_outputs(reference, other)
    click.echo(f"{names[0]} vs {names[1]}: {host.describe_pairing(pairing, names)}; "
               f"inputs: {source}; reference: {names[0]}; checks: {tolerance.describe()}")
    click.echo(host.diff_table(diffs, result_names))
    failures = [(index, why) for index, d in enumerate(diffs)
                if (why := tolerance.failure(d)) is not None]
    if failures:
        index, why = failures[0]
        more = f" ({len(failures)} of {len(diffs)} outputs fail)" if len(failures) > 1 else ""
        raise UserError(f"output {label(index, result_names)}: {why}{more}")


def _compare_names(pairing: host.Pairing, info: ModuleInfo, scaled_info: ModuleInfo
                   ) -> tuple[tuple[str | None, ...], tuple[str | None, ...]]:
    """Argument and result names in the original signature: the original module's, or the
    scaled one's where the original has none."""
    inputs, results = info.input_names, info.result_names
    if pairing.scaled is None:
        return inputs, results
    from_scaled = host_run.original_names(pairing, scaled_info)
    return (tuple(a or b for a, b in zip(inputs, from_scaled[0], strict=True)),
            tuple(a or b for a, b in zip(results, from_scaled[1], strict=True)))


COMMANDS = (export, run, compare)
