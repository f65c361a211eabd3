"""The API package is the bottom layer: the webhooks build on it, never the other way round."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from database_operator import api

API = Path(api.__file__).parent
MODULES = sorted(API.glob("*.py"))
WEBHOOKS = "database_operator.webhooks"


def imported(tree: ast.Module, package: str) -> set[str]:
    """Every module ``tree`` imports, relative imports resolved against ``package``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            # `from database_operator import webhooks` imports the package by its name.
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_api_module_imports_the_webhooks(path: Path) -> None:
    names = imported(ast.parse(path.read_text()), "database_operator.api")
    upward = sorted(name for name in names if name == WEBHOOKS or name.startswith(f"{WEBHOOKS}."))
    assert upward == [], f"{path.name} imports {upward}: the API sits below the webhooks"


def test_importing_the_api_loads_no_webhook_module_on_the_way() -> None:
    """What the API imports (desired/, engines…) does not reach the webhooks either."""
    modules = " ".join(f"database_operator.api.{path.stem}" for path in MODULES)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import importlib, sys\nfor m in {modules.split()!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.startswith({WEBHOOKS!r})))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"
