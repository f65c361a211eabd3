"""No module under tests/ imports a test module (a ``test_*.py`` file, which pytest collects).
What tests share lives in support modules named for what they hold (tests/*.py for every tier,
a tier's own beside its tests, such as tests/integration/waiting.py) or, for fixtures, in a
folder's conftest.py. A test module imported by another drags its tests' imports and fixtures
along, and moving or deleting a test then breaks tests elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tests
from tests.unit.imports import imported

TESTS = Path(tests.__file__).parent
ROOT = TESTS.parent
SOURCES = sorted(TESTS.rglob("*.py"))


def package_of(path: Path) -> str:
    """The package a source file under the repository's root is in (``tests.unit``)."""
    return ".".join(path.parent.relative_to(ROOT).parts)


def is_test_module(name: str) -> bool:
    """``name`` is a module of ours whose file is a ``test_*.py`` (a name a from-import takes
    out of a module, ``from tests.x import test_y``, counts when it is such a file)."""
    path = ROOT.joinpath(*name.split("."))
    return path.name.startswith("test_") and path.with_suffix(".py").is_file()


def imported_test_modules(tree: ast.Module, package: str) -> list[str]:
    """The test modules ``tree`` imports, in any form: ``import tests.x.test_y``, ``from
    tests.x.test_y import ...``, ``from tests.x import test_y``, ``from .test_y import ...``,
    anywhere in the module."""
    return sorted(name for name in imported(tree, package) if is_test_module(name))


def test_no_module_under_tests_imports_a_test_module() -> None:
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in SOURCES
        for name in imported_test_modules(ast.parse(path.read_text()), package_of(path))
    ]
    assert found == [], "move what they share into a support module:\n" + "\n".join(found)


#: A test module that surely exists: this one.
THIS = "tests.unit.test_test_layout"


@pytest.mark.parametrize(
    "source",
    [
        f"import {THIS}",
        f"import {THIS} as layout",
        f"from {THIS} import SOURCES",
        "from tests.unit import test_test_layout",
        "from tests.unit import chart, test_test_layout",
        "from .test_test_layout import SOURCES",
        "from . import test_test_layout",
        "from ..unit.test_test_layout import SOURCES",
        f"def helper() -> None:\n    from {THIS} import SOURCES\n",
        f"if TYPE_CHECKING:\n    from {THIS} import SOURCES\n",
    ],
    ids=lambda source: source.splitlines()[0],
)
def test_every_form_of_importing_a_test_module_is_found(source: str) -> None:
    assert imported_test_modules(ast.parse(source), "tests.unit") == [THIS]


def test_support_modules_and_names_that_start_with_test_are_not_test_modules() -> None:
    source = """
import tests.engines
from tests.integration import waiting
from tests.unit.chart import only
from tests.unit.imports import imported
from tests.unit.controllers import test_of_a_support_module
from . import conftest
"""
    assert imported_test_modules(ast.parse(source), "tests.unit") == []
