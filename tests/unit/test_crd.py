"""The generated CRD: committed file in sync, structural schema, samples valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from database_operator.api import Database, DatabaseSpec
from database_operator.api import crd as crds
from database_operator.api.crd import (
    backup_crd,
    backup_crd_yaml,
    backup_openapi_schema,
    crd_yaml,
)
from database_operator.webhooks.configuration import default_conversion

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "config" / "crd" / "bases" / "databases.example.com_databases.yaml"
SAMPLES = sorted(
    p for p in (ROOT / "config" / "samples").glob("*.yaml") if p.name != "kustomization.yaml"
)


def crd() -> dict[str, Any]:
    """The Database CRD as `make manifests` writes it."""
    return crds.crd(default_conversion())


def schema() -> dict[str, Any]:
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    nodes = [(path, node)]
    for name, child in node.get("properties", {}).items():
        nodes += walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        nodes += walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        nodes += walk(node["items"], f"{path}[]")
    return nodes


def test_committed_crd_is_what_the_models_generate() -> None:
    assert CRD_FILE.read_text() == crd_yaml(default_conversion()), (
        "the CRD drifted from the models: run `make manifests`"
    )


def test_schema_is_structural() -> None:
    for path, node in walk(schema()):
        assert "$ref" not in node and "$defs" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert "type" in node, f"{path} has no type"
            assert "anyOf" not in node, path


def test_every_spec_and_status_field_is_described() -> None:
    for path, node in walk(schema()):
        scalar_item = path.endswith("[]") and node.get("type") != "object"
        if path.startswith((".spec", ".status")) and not path.endswith(".*") and not scalar_item:
            assert node.get("description"), f"{path} has no description"


def test_cel_rules_of_the_design_are_in_the_schema() -> None:
    spec = schema()["properties"]["spec"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    rules += [r["rule"] for r in spec["properties"]["engine"]["x-kubernetes-validations"]]
    rules += [r["rule"] for r in spec["properties"]["storage"]["x-kubernetes-validations"]]
    assert "self == oldSelf" in rules
    assert (
        "!has(self.engine) || self.engine != 'mysql' || !has(self.replicas) || self.replicas <= 1"
        in rules
    )
    assert not any("storage) || self.replicas" in r for r in rules), "replicas are not shared"
    assert any("compareTo" in r for r in rules)
    assert any("storageClassName == oldSelf.storageClassName" in r for r in rules)


def test_names_subresources_and_columns() -> None:
    spec = crd()["spec"]
    assert spec["names"]["shortNames"] == ["db", "dbs"]
    assert spec["names"]["categories"] == ["databases"]
    version = spec["versions"][0]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Engine", "Version", "Replicas", "Ready", "Phase", "Endpoint", "Age"]


def test_defaults_match_the_design() -> None:
    spec = DatabaseSpec()
    assert spec.to_wire() == {
        "engine": "postgres",
        "replicas": 1,
        "serviceType": "ClusterIP",
        "paused": False,
        "deletionProtection": False,
        "deletionPolicy": "Retain",
    }


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_are_valid_databases(sample: Path) -> None:
    doc = yaml.safe_load(sample.read_text())
    db = Database.model_validate(doc)
    assert db.kind == "Database" and db.name


def test_one_sample_per_engine() -> None:
    engines = {yaml.safe_load(p.read_text())["spec"]["engine"] for p in SAMPLES}
    assert engines == {"postgres", "mysql", "redis"}


# --- the DatabaseBackup CRD ---------------------------------------------------------------------

BACKUP_CRD_FILE = ROOT / "config" / "crd" / "bases" / "databases.example.com_databasebackups.yaml"


def test_committed_backup_crd_is_what_the_models_generate() -> None:
    assert BACKUP_CRD_FILE.read_text() == backup_crd_yaml(), (
        "the DatabaseBackup CRD drifted from the models: run `make manifests`"
    )


def test_backup_schema_is_structural_and_described() -> None:
    for path, node in walk(backup_openapi_schema()):
        assert "$ref" not in node and "$defs" not in node, path
        assert "type" in node, f"{path} has no type"
        assert "anyOf" not in node, path
        if path.startswith((".spec", ".status")) and not path.endswith("[]"):
            assert node.get("description"), f"{path} has no description"


def test_a_backup_is_one_version_with_status_immutable_spec_and_its_columns() -> None:
    spec = backup_crd()["spec"]
    assert spec["names"]["plural"] == "databasebackups"
    assert spec["names"]["shortNames"] == ["dbbackup", "dbbackups"]
    assert spec["scope"] == "Namespaced"
    (version,) = spec["versions"]
    assert version["storage"] and version["served"]
    assert version["subresources"] == {"status": {}}
    schema_ = version["schema"]["openAPIV3Schema"]
    assert schema_["required"] == ["spec"]
    rules = [r["rule"] for r in schema_["properties"]["spec"]["x-kubernetes-validations"]]
    assert rules[0] == "self == oldSelf"
    assert "startsWith('https://')" in rules[1], "an http endpoint only with s3.insecure"
    # On the spec only: the status records the destination a backup used, as it was.
    status = schema_["properties"]["status"]["properties"]["destination"]
    assert "startsWith" not in str(status)
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase"
    assert columns["Database"] == ".spec.database"


def test_a_field_keeps_its_types_rules_and_adds_its_own() -> None:
    # spec.restore is a RestoreSource ("exactly one of backup or location") used immutably.
    restore = schema()["properties"]["spec"]["properties"]["restore"]
    rules = [r["rule"] for r in restore["x-kubernetes-validations"]]
    assert "has(self.backup) != has(self.location)" in rules
    assert "self == oldSelf" in rules
