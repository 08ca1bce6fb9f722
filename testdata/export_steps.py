"""Export the sample training steps in models.py to StableHLO text.

Usage: ``python testdata/export_steps.py [--out testdata/steps]``. Writes
``<name>.mlir`` for each default-sized step, keeping debug locations because the
rewrite pipeline reads JAX's name stack from them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402  (loaded by path: testdata/ is not a package)


def main(argv: list[str] | None = None) -> None:
    """Write each step in ``models.STEPS`` to ``<out>/<name>.mlir``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=HERE / "steps", help="output directory (default: %(default)s)"
    )
    parser.add_argument("names", nargs="*", help=f"subset of {sorted(models.STEPS)} (default: all)")
    args = parser.parse_args(argv)
    if unknown := set(args.names) - set(models.STEPS):
        parser.error(f"unknown steps: {sorted(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(models.STEPS):
        step_fn, example_args = models.STEPS[name]()
        text = models.export_text(step_fn, example_args)
        path = args.out / f"{name}.mlir"
        path.write_text(text)
        print(f"{path}: {len(text.encode()) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
