"""The shapes every layer shares, below all of them: an object as plain data, and a key."""

from __future__ import annotations

from typing import Any

#: A Kubernetes object as plain JSON-ready data (camelCase keys), as the API server speaks it.
Manifest = dict[str, Any]

#: A namespaced object's (namespace, name).
Key = tuple[str, str]


def key_of(obj: Manifest) -> Key:
    """The (namespace, name) of an object."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
