"""The sub-packages a checkout keeps in top-level folders, found when Python runs in it.

pyproject.toml maps ``scalify_hlo.rewrites`` to ``rewrites/``, ``scalify_hlo.cli`` to ``cli/``
and ``scalify_hlo.examples`` to ``examples/``; an installed package has them inside. Python
run from the repository root imports ``scalify_hlo`` from the source folder instead (the
current directory comes first on ``sys.path``), which shadows the installed package and has
none of them: ``find_checkout_folders`` lets it find them where the checkout keeps them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any


class _CheckoutFolders:
    """A ``sys.meta_path`` finder, asked after the others: the mapped sub-packages in the
    checkout's folders (an editable install's own finder answers first where there is one)."""

    def __init__(self, root: str, folders: dict[str, str]) -> None:
        self.root = root
        self.folders = folders

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        location = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(location, "__init__.py"),
            submodule_search_locations=[location])


def find_checkout_folders() -> None:
    """Install ``_CheckoutFolders`` when this package is the source folder of a checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pyproject = os.path.join(root, "pyproject.toml")
    if not os.path.isfile(pyproject):
        return  # installed: the sub-packages are inside this one
    import tomllib

    with open(pyproject, "rb") as file:
        package_dir = tomllib.load(file).get("tool", {}).get("setuptools", {}).get(
            "package-dir", {})
    folders = {name: folder for name, folder in package_dir.items()
               if name.startswith("scalify_hlo.")}
    if folders and not any(isinstance(f, _CheckoutFolders) for f in sys.meta_path):
        sys.meta_path.append(_CheckoutFolders(root, folders))

