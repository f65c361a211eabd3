"""spec.monitoring in the children: the exporter container in every pod and the `metrics` port
on the Services when it is on; nothing at all when it is off or absent."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from database_operator import desired
from database_operator.api.models import EXPORTER_CONTAINER, Database
from database_operator.desired.common import container_security_context
from database_operator.engines import ENGINES, Engine

#: Each engine with the most pods it can run: postgres and redis have read replicas.
REPLICAS = {engine: 3 if facts.replication else 1 for engine, facts in ENGINES.items()}
ON = {"enabled": True}


def make_db(**spec: Any) -> Database:
    """A Database named shop in namespace prod, with the given (camelCase) spec."""
    metadata = {"name": "shop", "namespace": "prod", "uid": "0b1c", "generation": 1}
    return Database.model_validate({"metadata": metadata, "spec": spec})


def deployments(db: Database) -> list[dict[str, Any]]:
    return [child for child in desired.children(db, "c0ffee") if child["kind"] == "Deployment"]


def services(db: Database) -> list[dict[str, Any]]:
    return [child for child in desired.children(db, "c0ffee") if child["kind"] == "Service"]


def containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return found


def exporter(deployment: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in containers(deployment) if c["name"] == EXPORTER_CONTAINER]
    return found


# --- off: the children are what they were --------------------------------------------------------


@pytest.mark.parametrize("engine", list(Engine))
@pytest.mark.parametrize(
    "off",
    [
        {"enabled": False},
        {"enabled": False, "image": "registry.example.com/exporter:v1"},
        {"resources": {"limits": {"cpu": "1"}}},
    ],
    ids=["disabled", "disabled with an image", "only resources"],
)
def test_monitoring_off_changes_no_child_at_all(engine: Engine, off: dict[str, Any]) -> None:
    """Every child, digests included, is the render of a spec without monitoring: an upgrade
    or a spec that merely mentions monitoring rolls no pod."""
    spec = {"engine": engine.value, "replicas": REPLICAS[engine]}
    assert desired.children(make_db(**spec, monitoring=off), "c0ffee") == desired.children(
        make_db(**spec), "c0ffee"
    )
    for deployment in deployments(make_db(**spec)):
        assert [c["name"] for c in containers(deployment)] == [engine.value]
    for service in services(make_db(**spec)):
        assert [p["name"] for p in service["spec"]["ports"]] == [engine.value]


# --- on: the exporter in every pod ----------------------------------------------------------------


@pytest.mark.parametrize("engine", list(Engine))
def test_the_exporter_runs_beside_the_engine_in_every_pod(engine: Engine) -> None:
    spec = {"engine": engine.value, "replicas": REPLICAS[engine]}
    plain, monitored = deployments(make_db(**spec)), deployments(make_db(**spec, monitoring=ON))
    assert len(monitored) == (2 if ENGINES[engine].replication else 1)
    for before, after in zip(plain, monitored, strict=True):
        engine_container, sidecar = containers(after)
        facts = ENGINES[engine].exporter
        assert facts is not None
        if facts.own_user:
            # Redis: the engine reads its exporter's user's password from the in-memory volume.
            engine_container = own_user_removed(engine_container)
        if facts.engine_env:
            # PostgreSQL: the engine's set-up makes the exporter's role and its pg_hba line.
            engine_container = engine_env_removed(engine_container, facts.engine_env)
        # The engine's container is otherwise untouched; the exporter comes after it.
        assert engine_container == containers(before)[0]
        assert sidecar["name"] == "metrics-exporter"
        assert sidecar["image"] == facts.image
        assert sidecar["ports"] == [
            {"name": "metrics", "containerPort": facts.port, "protocol": "TCP"}
        ]
        assert sidecar["args"] == [f"--web.listen-address=:{facts.port}", *facts.args]
        assert "resources" not in sidecar
        # The rest of the pod (volumes, security context, labels) is the same, but for the
        # credentials of an exporter with its own user.
        template = {**after["spec"]["template"]}
        template["spec"] = {**template["spec"], "containers": [engine_container]}
        if facts.own_user:
            init = template["spec"].pop("initContainers")
            assert [c["name"] for c in init] == ["monitoring-credentials"]
            assert template["spec"]["volumes"].pop() == {
                "name": "monitoring",
                "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"},
            }
            assert sidecar["volumeMounts"] == [
                {"name": "monitoring", "mountPath": "/run/monitoring", "readOnly": True}
            ]
        if not facts.secret_env:
            assert not [var for var in sidecar["env"] if "valueFrom" in var], "reads no Secret"
        assert template == before["spec"]["template"]


def engine_env_removed(engine_container: dict[str, Any], plain: dict[str, str]) -> dict[str, Any]:
    """The engine's container without the env the exporter's user needs of it (at its end)."""
    env = engine_container["env"]
    assert env[-len(plain) :] == [{"name": var, "value": value} for var, value in plain.items()]
    return engine_container | {"env": env[: -len(plain)]}


def own_user_removed(engine_container: dict[str, Any]) -> dict[str, Any]:
    """The engine's container without what it needs to make its exporter's user."""
    mounts = engine_container["volumeMounts"]
    assert mounts[-1] == {"name": "monitoring", "mountPath": "/run/monitoring", "readOnly": True}
    env = engine_container["env"]
    assert env[-1] == {"name": "MONITORING_PASSWORD_FILE", "value": "/run/monitoring/password"}
    return engine_container | {"volumeMounts": mounts[:-1], "env": env[:-1]}


@pytest.mark.parametrize("engine", list(Engine))
def test_the_exporter_has_no_probes(engine: Engine) -> None:
    """An exporter that cannot reach the engine must never take the pod out of its Service."""
    sidecar = exporter(deployments(make_db(engine=engine.value, monitoring=ON))[0])
    assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(sidecar)


@pytest.mark.parametrize("engine", list(Engine))
def test_the_exporter_runs_as_restricted_as_the_engine(engine: Engine) -> None:
    deployment = deployments(make_db(engine=engine.value, monitoring=ON))[0]
    engine_container, sidecar = containers(deployment)
    assert engine_container["securityContext"] == container_security_context()
    assert sidecar["securityContext"] == {
        **engine_container["securityContext"],
        "readOnlyRootFilesystem": True,
    }
    assert "runAsUser" not in sidecar["securityContext"]  # the pod's, the engine's UID
    assert deployment["spec"]["template"]["spec"]["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"
    }


@pytest.mark.parametrize("engine", list(Engine))
@pytest.mark.parametrize("secret", [None, "my-creds"])
def test_the_exporter_reads_credentials_only_by_reference(
    engine: Engine, secret: str | None
) -> None:
    """Each env entry is a secretKeyRef to the pods' Secret or a plain value whose only
    ``$(VAR)`` references name earlier (secret) entries: no value of the Secret can be in it."""
    spec: dict[str, Any] = {"engine": engine.value, "monitoring": ON}
    if secret is not None:
        spec["credentialsSecretRef"] = {"name": secret}
    db = make_db(**spec)
    facts = ENGINES[engine]
    secret_vars: list[str] = []
    for item in exporter(deployments(db)[0])["env"]:
        assert set(item) in ({"name", "valueFrom"}, {"name", "value"}), item
        if "valueFrom" in item:
            assert item["valueFrom"] == {
                "secretKeyRef": {"name": secret or "shop-credentials", "key": item_key(item)}
            }
            assert item_key(item) in facts.secret_keys
            secret_vars.append(item["name"])
        else:
            assert set(re.findall(r"\$\((\w+)\)", item["value"])) <= set(secret_vars)
    assert facts.exporter is not None
    assert secret_vars == list(facts.exporter.secret_env)


def item_key(item: dict[str, Any]) -> str:
    key: str = item["valueFrom"]["secretKeyRef"]["key"]
    return key


@pytest.mark.parametrize("engine", list(Engine))
def test_no_secret_value_appears_in_the_children_with_monitoring(engine: Engine) -> None:
    db = make_db(engine=engine.value, replicas=REPLICAS[engine], monitoring=ON)
    password, replication = "Sup3rSecretPassw0rdValue", "Repl1cationSecretValue"
    secret = desired.secret(db, password, replication)
    checksum = desired.credentials_checksum(db, secret["data"])
    rendered = json.dumps(desired.children(db, checksum))
    assert password not in rendered
    assert replication not in rendered


@pytest.mark.parametrize("engine", list(Engine))
def test_the_exporter_connects_to_the_engine_on_loopback_at_its_container_port(
    engine: Engine,
) -> None:
    """spec.port is the Services' port; the engine in the pod always listens on its own."""
    env = exporter(deployments(make_db(engine=engine.value, port=15000, monitoring=ON))[0])["env"]
    plain = " ".join(item["value"] for item in env if "value" in item)
    assert f"127.0.0.1:{ENGINES[engine].port}" in plain
    assert "15000" not in plain


def test_image_and_resources_come_from_the_spec() -> None:
    wanted = {
        "enabled": True,
        "image": "registry.example.com/postgres-exporter:v0.11.1",
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
    }
    for deployment in deployments(make_db(engine="postgres", replicas=2, monitoring=wanted)):
        sidecar = exporter(deployment)
        assert sidecar["image"] == wanted["image"]
        assert sidecar["resources"] == wanted["resources"]
        # The engine's resources stay the engine's.
        assert "resources" not in containers(deployment)[0]


def test_turning_monitoring_on_changes_only_the_pod_templates_and_the_service_ports() -> None:
    spec = {"engine": "postgres", "replicas": 2}
    before = desired.children(make_db(**spec), "c0ffee")
    after = desired.children(make_db(**spec, monitoring=ON), "c0ffee")
    assert [c["kind"] for c in after] == [c["kind"] for c in before]
    for old, new in zip(before, after, strict=True):
        if old["kind"] == "Deployment":
            assert new["spec"]["template"] != old["spec"]["template"]
            assert {**new["spec"], "template": None} == {**old["spec"], "template": None}
        else:
            assert new == old


# --- on: the metrics port on the pods only ------------------------------------------------------


@pytest.mark.parametrize("engine", list(Engine))
def test_no_service_offers_the_metrics_port(engine: Engine) -> None:
    """The PodMonitor scrapes the pods; a Service's clients (outside the cluster, with a
    LoadBalancer) never reach the exporter through it."""
    facts = ENGINES[engine]
    found = services(make_db(engine=engine.value, replicas=REPLICAS[engine], monitoring=ON))
    assert len(found) == (2 if facts.replication else 1)
    for service in found:
        assert service["spec"]["ports"] == [
            {
                "name": engine.value,
                "port": facts.port,
                "targetPort": engine.value,
                "protocol": "TCP",
            },
        ]


def test_a_custom_service_port_is_the_only_port() -> None:
    (service,) = services(make_db(engine="redis", port=7000, monitoring=ON))
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("redis", 7000)]
