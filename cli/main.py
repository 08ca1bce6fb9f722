"""The ``scalify-hlo`` command line: a thin click shell over ``scalify_hlo.api`` (``rewrite``,
``passes``) and ``scalify_hlo.inputs`` (``export``, ``run``, ``compare``, in ``commands_run``).

Every user error is one ``error: ...`` line on stderr and exit status 1; an output file is
written to a temporary file and renamed, so a failed run never leaves a partial file behind.
"""

from __future__ import annotations

import sys

import click

from scalify_hlo import __version__, module_io
from scalify_hlo.api import ChunkResult, rewrite_module_source
from scalify_hlo.cli.commands_demo import COMMANDS as DEMO_COMMANDS
from scalify_hlo.cli.commands_explain import COMMANDS as EXPLAIN_COMMANDS
from scalify_hlo.cli.commands_run import COMMANDS
from scalify_hlo.cli.common import (
    EXIT_INTERNAL_ERROR,
    EXIT_USER_ERROR,
    UserError,
    read_input,
    write_output,
)
from scalify_hlo.errors import ScalifyError
from scalify_hlo.policy import DEFAULT_PIPELINE, Policy
from scalify_hlo.rewrites import PASSES, parse_pipeline
from scalify_hlo.targets.table import TARGETS


def print_stats(results: list[ChunkResult]) -> None:
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    stats: dict[str, int] = {}
    for result in results:
        for name, count in result.ops_before.items():
            before[name] = before.get(name, 0) + count
        for name, count in result.ops_after.items():
            after[name] = after.get(name, 0) + count
        for name, count in result.context.stats.items():
            stats[name] = stats.get(name, 0) + count
    names = sorted(set(before) | set(after))
    width = max([len(n) for n in names] + [10])
    lines = [f"{'op':<{width}}  {'before':>8}  {'after':>8}"]
    lines += [f"{n:<{width}}  {before.get(n, 0):>8}  {after.get(n, 0):>8}" for n in names]
    total_before, total_after = sum(before.values()), sum(after.values())
    ratio = f"  ({total_after / total_before:.2f}x)" if total_before else ""
    lines.append(f"{'total':<{width}}  {total_before:>8}  {total_after:>8}{ratio}  "
                 f"{module_io.OPS_COUNTED}")
    lines += [f"{name}: {value}" for name, value in sorted(stats.items())]
    click.echo("\n".join(lines), err=True)


def dump_ir(pass_name: str, text: str) -> None:
    click.echo(f"// -----// IR Dump After {pass_name} //----- //\n{text}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scalify-hlo")
def cli() -> None:
    """Scale propagation on StableHLO: FP8 dots and FP16 state for JAX training steps."""


@cli.command()
@click.argument("input_path", metavar="IN")
@click.option("-o", "--output", default="-", show_default=True, help="Output file, - for stdout.")
@click.option("--pipeline", default=None,
              help="Passes to run, e.g. 'inline,scalify{data-dtype=f32},simplify' "
              f"(default: {DEFAULT_PIPELINE}).")
@click.option("--target", default=None, metavar="CHIP",
              help="Rewrite for a chip: its data type and FP8 dots only where it has FP8 "
              f"throughput ({', '.join(TARGETS)}; see 'scalify-hlo targets'). Instead of "
              "--pipeline.")
@click.option("--split-input-file", is_flag=True,
              help="Rewrite each '// -----' separated chunk of IN as its own module.")
@click.option("--print-ir-after-all", is_flag=True, help="Print the module to stderr after "
              "each pass.")
@click.option("--emit", type=click.Choice([f.value for f in module_io.EmitFormat]), default="text",
              show_default=True, help="Output format; portable is a versioned StableHLO "
              "artifact.")
@click.option("--stats", is_flag=True, help="Print op counts before and after, and pass "
              "statistics, to stderr.")
@click.option("--debug-info", is_flag=True, help="Keep op locations in text output.")
@click.option("--verify-each", is_flag=True, help="Verify the module after every pass (not "
              "only at the end), so that an invalid module names the pass that made it.")
def rewrite(input_path: str, output: str, pipeline: str | None, target: str | None,
            split_input_file: bool, print_ir_after_all: bool, emit: str, stats: bool,
            debug_info: bool, verify_each: bool) -> None:
    """Rewrite the module IN (MLIR text, bytecode or portable artifact; - for stdin)."""
    if pipeline is not None and target is not None:
        raise UserError("give --pipeline or --target, not both")
    if target is not None:
        # Current statistics: a module the CLI writes stands alone (run and compare run it);
        # delayed ones need a caller that hands each call the previous call's exponents.
        pipeline = Policy.for_target(target, statistics="current").pipeline()
    pipeline_passes = parse_pipeline(DEFAULT_PIPELINE if pipeline is None else pipeline)
    data = read_input(input_path)
    filename = "<stdin>" if input_path == "-" else input_path
    fmt = module_io.EmitFormat(emit)
    dump = dump_ir if print_ir_after_all else None
    if split_input_file:
        if fmt is not module_io.EmitFormat.TEXT:
            raise UserError("--split-input-file needs --emit text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{filename}: --split-input-file needs a text input") from None
        chunks = [(c.text, c.first_line) for c in module_io.split_input(text)]
    else:
        chunks = [(data, 0)]
    results = [
        rewrite_module_source(source, pipeline_passes, filename=filename, line_offset=offset,
                              emit=fmt, debug_info=debug_info, dump_after_pass=dump,
                              count_ops=stats, verify_each=verify_each)
        for source, offset in chunks
    ]
    for result in results:
        for warning in result.context.warnings:
            click.echo(f"warning: {warning}", err=True)
    errors = [r.error for r in results if r.error is not None]
    for error in errors:
        click.echo(f"error: {error}", err=True)
    if stats:
        print_stats(results)
    if errors and (output != "-" or not split_input_file):
        sys.exit(EXIT_USER_ERROR)
    outputs = [r.output for r in results if r.output is not None]
    separator = f"\n{module_io.SPLIT_MARKER}\n".encode()
    write_output(output, separator.join(o.rstrip(b"\n") + b"\n" for o in outputs)
                 if fmt is module_io.EmitFormat.TEXT else outputs[0])
    if errors:
        sys.exit(EXIT_USER_ERROR)


@cli.command()
def passes() -> None:
    """List every pass with its description and options."""
    for name in sorted(PASSES):
        module_pass = PASSES[name]
        click.echo(f"{name}: {module_pass.description}")
        for option in module_pass.options():
            click.echo(f"    {option.describe()}")


# How `targets` describes a target's scale packing (Policy.scale_packing).
_PACKING = {"arguments": "", "all": ", every scale epoch packed", "none": ", scales not packed"}


@cli.command()
def targets() -> None:
    """List the chips --target knows: data type, FP8 dots, statistics in compile_scaled
    (rewrite --target keeps them current), whether they are grouped, how scales are packed,
    whether the arguments' scales are folded into their data, and why."""
    for info in TARGETS.values():
        dots = "FP8 dots" if info.fp8_dots else "no FP8"
        grouped = "" if info.group_statistics else ", not grouped"
        packed = _PACKING[info.scale_packing]
        folded = ", arguments' scales folded" if info.argument_scales == "fold" else ""
        click.echo(f"{info.name}: {info.platform}, {info.data_dtype} data, {dots}, "
                   f"{info.statistics} statistics{grouped}{packed}{folded}: {info.reason}")


for _command in [*COMMANDS, *EXPLAIN_COMMANDS, *DEMO_COMMANDS]:
    cli.add_command(_command)


def main() -> None:
    """Run the CLI: user errors print one line, unexpected errors no traceback either."""
    try:
        cli.main(standalone_mode=False, prog_name="scalify-hlo")
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(EXIT_USER_ERROR)
    except click.exceptions.UsageError as exc:  # click's own is a usage block: 4 lines
        command = exc.ctx.command_path if exc.ctx is not None else "scalify-hlo"
        message = " ".join(exc.format_message().split())
        click.echo(f"error: {message} (see '{command} --help')", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.ClickException as exc:
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except ScalifyError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USER_ERROR)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except MemoryError:
        click.echo("error: out of memory", err=True)
        sys.exit(EXIT_USER_ERROR)
    except Exception as exc:  # a bug of ours: still one line, but say it is internal
        message = " ".join(str(exc).split()) or type(exc).__name__
        click.echo(f"error: internal error ({type(exc).__name__}): {message}", err=True)
        sys.exit(EXIT_INTERNAL_ERROR)
