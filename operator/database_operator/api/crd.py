"""The CustomResourceDefinition of Database, generated from the pydantic models.

pydantic writes JSON Schema; Kubernetes wants a *structural* OpenAPI v3 schema: no ``$ref``, a
``type`` on every node, no ``anyOf`` with null for optional fields, no ``title``. This module walks
pydantic's schema once and rewrites it into that shape, keeping descriptions, defaults, bounds,
patterns, enums and our ``x-kubernetes-*`` extensions.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from database_operator.api.models import (
    DATABASE_NAME_MAX_LENGTH,
    DATABASE_NAME_PATTERN,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    DatabaseSpec,
    DatabaseStatus,
    cel,
)

Schema = dict[str, Any]

_DROP = {"title", "$defs"}


def _structural(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Rewrite one pydantic JSON Schema node into a structural OpenAPI v3 node."""
    node = copy.deepcopy(node)
    for key in _DROP:
        node.pop(key, None)
    if "description" in node:
        # Docstrings wrap lines; kubectl explain re-wraps, so keep one paragraph.
        node["description"] = " ".join(node["description"].split())

    if "$ref" in node:
        target = _structural(defs[node.pop("$ref").split("/")[-1]], defs)
        # Keys next to the $ref (description, default) describe the use and win over the target's.
        return {**target, **{k: v for k, v in _structural(node, defs).items() if k != "type"}}

    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot make a structural schema of anyOf {branches}")
        if node.get("default", "unset") is None:
            node.pop("default")
        return {**_structural(branches[0], defs), **node}

    if node.get("default", "unset") is None:
        node.pop("default")

    if "properties" in node:
        node["properties"] = {k: _structural(v, defs) for k, v in node["properties"].items()}
        node.setdefault("type", "object")
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _structural(node["additionalProperties"], defs)
        node.setdefault("type", "object")
    if "items" in node:
        node["items"] = _structural(node["items"], defs)
    if "enum" in node:
        node.setdefault("type", "string")
    if "format" in node and node["format"] == "date-time":
        node["type"] = "string"
    return node


_FIRST = ("description", "type")


def _ordered(node: Any) -> Any:
    """Description and type first, the rest sorted: a stable, readable file. Property order is
    the models' field order."""
    if isinstance(node, list):
        return [_ordered(item) for item in node]
    if not isinstance(node, dict):
        return node
    keys = [k for k in _FIRST if k in node] + sorted(k for k in node if k not in _FIRST)
    return {
        k: (
            _ordered(node[k]) if k != "properties" else {p: _ordered(v) for p, v in node[k].items()}
        )
        for k in keys
    }


def _schema_of(model: type[DatabaseSpec] | type[DatabaseStatus]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _ordered(_structural(raw, raw.get("$defs", {})))  # type: ignore[no-any-return]


#: Rules on metadata.name, which only the root of the schema can see: names a custom resource
#: may have but its children may not are refused at admission, not failed on later.
NAME_RULES = [
    cel(
        f"self.metadata.name.size() <= {DATABASE_NAME_MAX_LENGTH}",
        f"metadata.name must be at most {DATABASE_NAME_MAX_LENGTH} characters: it names the "
        "Database's Service, and a Service name is a DNS label",
        ".metadata.name",
    ),
    cel(
        f"self.metadata.name.matches('{DATABASE_NAME_PATTERN}')",
        "metadata.name must start with a lowercase letter and hold only lowercase letters, "
        "digits and '-' (no dots): it names the Database's Service, and a Service name is a "
        "DNS label",
        ".metadata.name",
    ),
]


def openapi_schema() -> Schema:
    """The openAPIV3Schema of the Database CRD."""
    spec = _schema_of(DatabaseSpec)
    # A Database without spec still gets every default applied.
    spec["default"] = {}
    return {
        "type": "object",
        "description": "A Database run by database-operator.",
        "x-kubernetes-validations": NAME_RULES,
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of the object."},
            "kind": {"type": "string", "description": "Kind of the object."},
            # Declaring metadata.name lets the name rules above point at it (fieldPath).
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": spec,
            "status": _schema_of(DatabaseStatus),
        },
    }


PRINTER_COLUMNS = [
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine"},
    {"name": "Version", "type": "string", "jsonPath": ".status.version"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    """The Database CustomResourceDefinition as a plain object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "database-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": ["db", "dbs"],
                "categories": ["databases"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


HEADER = "# Generated from the pydantic models by `make manifests`. Do not edit.\n"


def crd_yaml() -> str:
    """The CRD as the YAML that `make manifests` writes."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=100)
