"""Write the rewriter's output on every golden RUN line and sample step to a folder.

A refactoring that must not change behaviour is checked by taking a snapshot before and after
and comparing the folders byte for byte::

    python tools/rewrite_snapshot.py /tmp/before      # on the old commit
    python tools/rewrite_snapshot.py /tmp/after       # on the new one
    diff -r /tmp/before /tmp/after && echo byte-identical

Each golden RUN line is run up to its ``| filecheck`` (``not`` dropped), with stdout, stderr
and the exit status kept; each ``testdata/steps/*.mlir`` is rewritten under several policies.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from scalify_hlo.policy import Policy  # noqa: E402
from tests.lit_runner import discover, parse_run_lines  # noqa: E402

STEP_POLICIES = {
    "default": Policy(),
    "f16": Policy(data_dtype="float16", fp8_dots=False),
    "bf16": Policy(data_dtype="bfloat16", fp8_dots=False),
    "f32": Policy(data_dtype="float32", fp8_dots=False),
    "f32-fp8": Policy(data_dtype="float32"),
    "fp8-unscaled": Policy(fp8_scaling="none", square_encoding="none"),
    "rms-outputs": Policy(rescale_at=("outputs", "gradients"), rescale_method="rms",
                          scale_rounding="up"),
}
_FILECHECK = re.compile(r"\|\s*(not\s+)?filecheck\b.*$")


def _cases() -> dict[str, str]:
    """Case name -> bash command whose output is the snapshot."""
    cases: dict[str, str] = {}
    for path in discover(REPO_ROOT / "testdata" / "golden"):
        rel = path.relative_to(REPO_ROOT)
        for index, run in enumerate(parse_run_lines(path)):
            command = _FILECHECK.sub("", run.command).strip()
            command = re.sub(r"^not\s+", "", command).replace("%s", str(rel))
            command = command.replace("%S", str(rel.parent)).replace("%t", f"/tmp/snap-{rel.stem}")
            cases[f"golden__{rel.parent.name}__{rel.stem}__run{index}"] = command
    for step in sorted((REPO_ROOT / "testdata" / "steps").glob("*.mlir")):
        rel = step.relative_to(REPO_ROOT)
        for name, policy in STEP_POLICIES.items():
            cases[f"step__{step.stem}__{name}"] = (
                f"scalify-hlo rewrite {rel} --pipeline '{policy.pipeline()}'")
    return cases


def _run(command: str) -> bytes:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO_ROOT, env=env,
                          capture_output=True, timeout=600)
    return (f"exit {done.returncode}\n--- stdout\n".encode() + done.stdout
            + b"--- stderr\n" + done.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write one file per case into")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cases = _cases()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, output in zip(cases, pool.map(_run, cases.values()), strict=True):
            (args.out / f"{name}.txt").write_bytes(output)
    print(f"{len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
