"""``explain``: how each value of a rewritten module is scaled, per op family and per line.

The rewrite is ``rewrite``'s (same input handling, same ``--pipeline``) with the passes'
records turned on; ``scalify_hlo.explain`` makes the tables.
"""

from __future__ import annotations

import click

from scalify_hlo.api import rewrite_module_source
from scalify_hlo.cli.common import UserError, read_input, write_output
from scalify_hlo.explain import FORMATS, Explanation
from scalify_hlo.policy import DEFAULT_PIPELINE
from scalify_hlo.rewrites import parse_pipeline


@click.command()
@click.argument("input_path", metavar="IN")
@click.option("-o", "--output", default="-", show_default=True, help="Output file, - for stdout.")
@click.option("--pipeline", default=DEFAULT_PIPELINE, show_default=True,
              help="Passes to run, as for rewrite.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: the two tables; json: the tables and every record.")
def explain(input_path: str, output: str, pipeline: str, fmt: str) -> None:
    """Rewrite the module IN (as rewrite does) and show how each value is scaled: per op
    family, counts by kind (static or runtime scale, rescale point, FP8 dot, dot left out of
    FP8, computed wide, fallback run unscaled, saturated scale); per source line (file:line
    and JAX name stack from the op locations), the ops and how they are scaled."""
    passes = parse_pipeline(pipeline)
    data = read_input(input_path)
    filename = "<stdin>" if input_path == "-" else input_path
    result = rewrite_module_source(data, passes, filename=filename, records=True)
    for warning in result.context.warnings:
        click.echo(f"warning: {warning}", err=True)
    if result.error is not None:
        raise UserError(result.error)
    explanation = Explanation(result.context.records or [], pipeline, result.context.warnings)
    write_output(output, (explanation.render(fmt).rstrip("\n") + "\n").encode())


COMMANDS = (explain,)
