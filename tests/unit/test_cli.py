"""The CLI's offline commands: crd, render, version, and settings errors of run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from database_operator.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"


def test_crd_prints_the_crd_that_make_manifests_writes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd"]) == 0
    committed = ROOT / "config" / "crd" / "bases" / "databases.example.com_databases.yaml"
    assert capsys.readouterr().out == committed.read_text()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("database-operator ")


def test_render_prints_every_child_and_no_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", str(SAMPLES / "postgres.yaml")]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Secret", "orders-credentials"),
        ("Deployment", "orders"),
        ("Service", "orders"),
        ("Deployment", "orders-replicas"),
        ("Service", "orders-replicas"),
        ("PersistentVolumeClaim", "orders-data"),
        ("Secret", "orders-connection"),
    ]
    assert docs[0]["data"] == {
        "username": "<generated>",
        "password": "<generated>",
        "replication-password": "<generated>",
    }
    assert {d["metadata"]["namespace"] for d in docs} == {"default"}
    connection = docs[-1]["stringData"]
    assert connection["uri"] == (
        "postgresql://<username>:<from the credentials Secret>@orders.default.svc:5432/<username>"
    )
    assert connection["password"] == "<from the credentials Secret>"


def test_render_with_a_credentials_ref_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.yaml"
    db.write_text(
        "apiVersion: databases.example.com/v1\nkind: Database\nmetadata: {name: x, namespace: n}\n"
        "spec: {engine: redis, credentialsSecretRef: {name: mine}}\n"
    )
    assert main(["render", "-f", str(db)]) == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == ["Deployment", "Service", "Secret"], "the connection Secret, not credentials"


def test_render_names_the_bad_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "db.yaml"
    db.write_text("kind: Database\nmetadata: {name: x}\nspec: {replicas: 99}\n")
    assert main(["render", "-f", str(db)]) == 1
    assert "replicas" in capsys.readouterr().err


def test_run_refuses_a_bad_setting_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--metrics-port", "99999"]) == 2
    err = capsys.readouterr().err
    assert "metrics_port" in err
    assert "DATABASE_OPERATOR_METRICS_PORT" in err
