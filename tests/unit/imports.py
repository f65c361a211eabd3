"""The modules a Python source imports, read with ast, for the layout tests: the operator's
floors (test_api_layering.py) and tests/ importing no test module (test_test_layout.py)."""

from __future__ import annotations

import ast


def imported(tree: ast.Module, package: str) -> set[str]:
    """Every module ``tree`` imports anywhere (under ``if TYPE_CHECKING`` and in functions too),
    relative imports resolved against ``package``; ``from a import b`` counts as ``a.b`` too."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names
