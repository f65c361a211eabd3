"""Imports go down the floors. Each part of the operator (a subpackage, or a module at the top of
the package) stands on one floor and imports only parts on the floors below it: never one beside
or above it, so no two parts import each other. The API stands on the floor just above the
ground, whose parts (facts: engines, cron, the manifest type) import nothing of ours. A new
part goes on the lowest floor above all that it imports.

And every annotation and label key of the API is made from GROUP."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import database_operator
from database_operator import api
from database_operator.api.common import GROUP
from tests.unit.imports import imported

PACKAGE = Path(database_operator.__file__).parent
API = Path(api.__file__).parent
MODULES = sorted(API.glob("*.py"))

#: From the ground up. A part's allow-list is every part on the floors below its own.
FLOORS = [
    set(parts.split())
    for parts in (
        "clock cron dashboards engines gcpauses health manifest reasons tracing workqueue",
        "api alerts compare replication",
        "conditions config metrics ownership",
        "desired kube logs",
        "carryover events finalizers leader lifecycle selection",
        "watches",
        "namesakes",
        "cache",
        "loops",
        "backups",
        "plugin status webhooks",
        "failover rbac",
        "reconcile",
        "controller",
        "handlers",
        "runner",
        "cli",
    )
]
FLOOR = {part: level for level, parts in enumerate(FLOORS, 1) for part in parts}
MAY_IMPORT = {part: {other for other in FLOOR if FLOOR[other] < FLOOR[part]} for part in FLOOR}
SOURCES = sorted(
    path for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE or path.stem != "__init__"
)


def part_at(path: Path) -> str:
    """The part that the source file ``path`` is in."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def part_of(module: str) -> str | None:
    """The part that ``database_operator.<part>[.…]`` is in (None: not a part of ours)."""
    package, _, rest = module.partition(".")
    part = rest.split(".")[0]
    return part if package == database_operator.__name__ and part in FLOOR else None


def test_every_part_stands_on_one_floor() -> None:
    parts = {part_at(path) for path in SOURCES}
    assert sum(map(len, FLOORS)) == len(FLOOR), "a part stands on two floors"
    assert sorted(parts ^ set(FLOOR)) == [], "a part on no floor, or a floor's part gone"


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_part_imports_only_the_floors_below_it(path: Path) -> None:
    part, package = part_at(path), ".".join(path.parent.relative_to(PACKAGE.parent).parts)
    names = imported(ast.parse(path.read_text()), package)
    outside = {other for name in names if (other := part_of(name)) not in {None, part}}
    upward = sorted(outside - MAY_IMPORT[part])
    assert upward == [], f"{part} (floor {FLOOR[part]}) imports {upward}, not below it"


def test_importing_the_api_loads_nothing_above_it() -> None:
    """What the API imports, however it does, stays on the floors below it too."""
    modules = [f"database_operator.api.{path.stem}" for path in MODULES]
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "print(' '.join(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    parts = {part for name in loaded.stdout.split() if (part := part_of(name))}
    assert sorted(parts - MAY_IMPORT["api"] - {"api"}) == []


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
