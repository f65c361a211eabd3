"""The API package is the bottom layer: the webhooks build on it, never the other way round,
and every annotation and label key of it is made from GROUP."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from database_operator import api
from database_operator.api.common import GROUP

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


def _literals(tree: ast.Module) -> list[tuple[int, str]]:
    """The string constants of ``tree`` (f-strings' literal parts too), docstrings left out."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


@pytest.mark.parametrize(
    "path", [path for path in MODULES if path.name != "common.py"], ids=lambda path: path.name
)
def test_every_key_of_the_group_is_made_from_group(path: Path) -> None:
    """A literal "databases.example.com/…" would not follow a change of the group."""
    spelled = [
        f"line {line}: {text!r}"
        for line, text in _literals(ast.parse(path.read_text()))
        if GROUP in text
    ]
    assert spelled == []


def test_group_is_spelled_once_in_common() -> None:
    literals = [text for _, text in _literals(ast.parse((API / "common.py").read_text()))]
    assert [text for text in literals if GROUP in text] == [GROUP]
