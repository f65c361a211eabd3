"""The hack/ scripts as modules, for testing their pure parts (they are scripts, not a package:
the release and deploy jobs run them with the runner's python3)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HACK = Path(__file__).resolve().parents[1] / "hack"


def load(name: str) -> ModuleType:
    """hack/<name>.py, imported under ``name`` (registered: dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, HACK / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
