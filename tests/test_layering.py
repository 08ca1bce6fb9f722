"""The layering runs one way: IR layer <- rewrites/ <- API <- cli/ (docs/how-it-works.md).

Every import of every library module (module level or inside a function) is read from its
source and checked against ``LAYERS``: a module may import from its own layer or one below,
never above. A new module must be given a layer here, so it cannot slip in unchecked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "scalify_hlo"
# Installed module prefix -> folder in the checkout (pyproject.toml's package-dir).
FOLDERS = {"scalify_hlo.rewrites": "rewrites", "scalify_hlo.cli": "cli",
           "scalify_hlo.examples": "examples", "scalify_hlo": "scalify_hlo"}

# Layers from the bottom up, with the modules (and packages: every module under them) in each.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ir", ("scalify_hlo", "scalify_hlo._checkout", "scalify_hlo.dtypes", "scalify_hlo.errors",
            "scalify_hlo.files", "scalify_hlo.flat_pairs", "scalify_hlo.module_io",
            "scalify_hlo.mlir_rewrite", "scalify_hlo.name_stack", "scalify_hlo.names",
            "scalify_hlo.runner",
            "scalify_hlo.scale", "scalify_hlo.symbols")),
    ("rewrites", ("scalify_hlo.rewrites",)),
    ("api", ("scalify_hlo.api", "scalify_hlo.compile", "scalify_hlo.explain",
             "scalify_hlo.gpu_aot", "scalify_hlo.host_run", "scalify_hlo.inputs",
             "scalify_hlo.leaf_specs", "scalify_hlo.scaled_exported", "scalify_hlo.scaled_step",
             "scalify_hlo.delayed_program",
             "scalify_hlo.step_args", "scalify_hlo.step_report",
             "scalify_hlo.module_info", "scalify_hlo.policy", "scalify_hlo.saved",
             "scalify_hlo.scaled_array", "scalify_hlo.signature", "scalify_hlo.targets",
             "scalify_hlo.tolerance", "scalify_hlo.training", "scalify_hlo.examples")),
    ("cli", ("scalify_hlo.cli",)),
)


def layer_of(module: str) -> int:
    """The rank of the layer of ``module`` (the longest listed prefix decides)."""
    best, rank = "", -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (module.startswith(name + ".") and name != PACKAGE)
            if covers and len(name) > len(best):
                best, rank = name, index
    if rank < 0:
        raise LookupError(f"{module} has no layer in tests/test_layering.py LAYERS")
    return rank


def library_modules() -> dict[str, Path]:
    """Every module of the distribution, by its installed name."""
    modules = {}
    for prefix, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((prefix, *parts))] = path
    return modules


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The library modules ``path`` imports (``from scalify_hlo import module_io`` imports
    ``scalify_hlo.module_io``; a name that is no module stands for its package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if n in modules else node.module for n in names]
        else:
            continue
        found.update(n for n in names if n == PACKAGE or n.startswith(PACKAGE + "."))
    return found


def upward_imports(modules: dict[str, Path]) -> list[str]:
    names = set(modules)
    bad = []
    for module, path in sorted(modules.items()):
        for target in sorted(imported_modules(path, names)):
            if layer_of(target) > layer_of(module):
                bad.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]})")
    return bad


def test_every_module_has_a_layer() -> None:
    for module in library_modules():
        layer_of(module)


def test_no_import_runs_up_the_layers() -> None:
    assert upward_imports(library_modules()) == []


@pytest.mark.parametrize("module, source", [
    ("scalify_hlo.rewrites.emitter", "from scalify_hlo.signature import FLOAT_DTYPES\n"),
    ("scalify_hlo.rewrites", "from scalify_hlo.policy import DEFAULT_PIPELINE\n"),
    ("scalify_hlo.scale", "def f():\n    from scalify_hlo.rewrites import scope\n"),
    ("scalify_hlo.dtypes", "import scalify_hlo.compile\n"),
    ("scalify_hlo.policy", "from scalify_hlo.cli import main\n"),
])
def test_an_upward_import_is_found(tmp_path: Path, module: str, source: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    assert len(upward_imports(library_modules() | {module: path})) == 1
