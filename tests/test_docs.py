"""Generated documentation stays in step with the code."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.helpers import REPO_ROOT as ROOT


def test_ops_md_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "generate_ops.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_the_readme_test_command_reports_what_ran() -> None:
    """The README's ``python -m pytest`` must end in a summary a user can read: pass count,
    and why each test was skipped (-q in addopts printed only dots)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    options = config["ini_options"].get("addopts", "").split()
    assert not any(o in ("-q", "--quiet") or o.startswith("-qq") for o in options), options
    assert "-ra" in options, options


def test_the_suite_runs_in_as_many_workers_as_ci_has_cores() -> None:
    """Two workers, a file's tests in one (its module fixtures are built once), and
    pytest-xdist in the test extra that CI installs: in one process the suite took about
    20 minutes on CI's 2 cores, its budget."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    options = project["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert options[options.index("-n") + 1] == "2", options
    assert options[options.index("--dist") + 1] == "loadfile", options
    assert any(r.startswith("pytest-xdist") for r in project["project"]["optional-dependencies"]
               ["test"])


def test_every_default_pass_is_described() -> None:
    """The README's pass table and how-it-works describe each pass the default policy runs
    (fp8-dots and rescale were missing from both)."""
    from scalify_hlo.policy import DEFAULT_PIPELINE
    from scalify_hlo.rewrites import parse_pipeline

    readme = (ROOT / "README.md").read_text()
    how = (ROOT / "docs" / "how-it-works.md").read_text()
    diagram = how.split("```")[1]
    for module_pass in parse_pipeline(DEFAULT_PIPELINE):
        name = module_pass.name
        assert f"| `{name}` |" in readme, name
        assert f"**{name}**" in how and f"──{name}──" in diagram, name
