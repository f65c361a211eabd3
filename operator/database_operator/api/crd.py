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
from pydantic import BaseModel

from database_operator.api import v1beta1
from database_operator.api.backup import (
    BACKUP_KIND,
    BACKUP_PLURAL,
    DatabaseBackupSpec,
    DatabaseBackupStatus,
)
from database_operator.api.models import (
    CRD_NAME,
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
VALIDATIONS = "x-kubernetes-validations"


def _used(target: Schema, use: Schema) -> Schema:
    """A type's schema as one field uses it: the field's keys win, but rules add up (the type's
    own, e.g. "exactly one of", and the field's, e.g. "immutable")."""
    rules = target.get(VALIDATIONS, []) + use.get(VALIDATIONS, [])
    return {**target, **use, **({VALIDATIONS: rules} if rules else {})}


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
        return _used(target, {k: v for k, v in _structural(node, defs).items() if k != "type"})

    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot make a structural schema of anyOf {branches}")
        if node.get("default", "unset") is None:
            node.pop("default")
        return _used(_structural(branches[0], defs), node)

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


def _schema_of(model: type[BaseModel]) -> Schema:
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


#: The spec model of each served version, the storage version first.
SPEC_MODELS: dict[str, type[DatabaseSpec] | type[v1beta1.DatabaseSpecV1beta1]] = {
    VERSION: DatabaseSpec,
    v1beta1.VERSION: v1beta1.DatabaseSpecV1beta1,
}


def openapi_schema(version: str = VERSION) -> Schema:
    """The openAPIV3Schema of one version of the Database CRD."""
    spec = _schema_of(SPEC_MODELS[version])
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


PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine"},
    {"name": "Version", "type": "string", "jsonPath": ".status.version"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def printer_columns(version: str) -> list[dict[str, Any]]:
    """kubectl's columns; v1beta1 names the engine spec.type."""
    engine = ".spec.engine" if version == VERSION else ".spec.type"
    return [
        {**column, "jsonPath": engine} if column["name"] == "Engine" else column
        for column in PRINTER_COLUMNS
    ]


def served_version(version: str) -> dict[str, Any]:
    """One entry of the CRD's versions: v1 stored, v1beta1 served and deprecated."""
    entry: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": version == VERSION,
    }
    if version != VERSION:
        entry |= {"deprecated": True, "deprecationWarning": v1beta1.DEPRECATION_WARNING}
    return entry | {
        "schema": {"openAPIV3Schema": openapi_schema(version)},
        "subresources": {
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector",
            },
        },
        "additionalPrinterColumns": printer_columns(version),
    }


def crd(conversion: dict[str, Any]) -> dict[str, Any]:
    """The Database CustomResourceDefinition as a plain object: both versions, converted by the
    operator's webhook (the versions' shapes differ, so the API server cannot convert alone).
    ``conversion`` is its ``spec.conversion``, from the caller: where the API server sends
    ConversionReviews is the webhooks' business (webhooks/configuration.py), a layer above."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
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
            "versions": [served_version(version) for version in SPEC_MODELS],
            "conversion": conversion,
        },
    }


BACKUP_PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Database", "type": "string", "jsonPath": ".spec.database"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Size", "type": "integer", "format": "int64", "jsonPath": ".status.size"},
    {"name": "Completed", "type": "date", "jsonPath": ".status.completedAt"},
    {"name": "Location", "type": "string", "jsonPath": ".status.location", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def backup_openapi_schema() -> Schema:
    """The openAPIV3Schema of the DatabaseBackup CRD."""
    return {
        "type": "object",
        "description": "A backup of a Database, taken by database-operator.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of the object."},
            "kind": {"type": "string", "description": "Kind of the object."},
            "metadata": {"type": "object"},
            "spec": _schema_of(DatabaseBackupSpec),
            "status": _schema_of(DatabaseBackupStatus),
        },
    }


def backup_crd() -> dict[str, Any]:
    """The DatabaseBackup CustomResourceDefinition: one version, stored as it is served."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{BACKUP_PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "database-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": BACKUP_KIND,
                "listKind": f"{BACKUP_KIND}List",
                "plural": BACKUP_PLURAL,
                "singular": BACKUP_KIND.lower(),
                "shortNames": ["dbbackup", "dbbackups"],
                "categories": ["databases"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": backup_openapi_schema()},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": BACKUP_PRINTER_COLUMNS,
                }
            ],
        },
    }


HEADER = "# Generated from the pydantic models by `make manifests`. Do not edit.\n"


def crd_yaml(conversion: dict[str, Any]) -> str:
    """The Database CRD as the YAML that `make manifests` writes (``conversion``: as for
    :func:`crd`)."""
    return HEADER + yaml.safe_dump(crd(conversion), sort_keys=False, width=100)


def backup_crd_yaml() -> str:
    """The DatabaseBackup CRD as the YAML that `make manifests` writes."""
    return HEADER + yaml.safe_dump(backup_crd(), sort_keys=False, width=100)
