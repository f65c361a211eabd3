"""The builders for read replicas, placement, engine settings and the connection Secret."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.desired.workload import container, settings
from database_operator.engines import parameter_args, reserved_key

UID = "0b6c7a52-1111-4a7e-9f00-000000000001"


def make_db(**spec: Any) -> Database:
    metadata = {"name": "shop", "namespace": "prod", "uid": UID, "generation": 1}
    return Database.model_validate({"metadata": metadata, "spec": spec})


def role_of(obj: dict[str, Any]) -> str:
    return str(
        obj["spec"]["selector"].get("matchLabels", obj["spec"]["selector"])[
            "databases.example.com/role"
        ]
    )


@pytest.mark.parametrize("engine", ["postgres", "redis"])
def test_replicas_above_one_are_a_primary_and_read_replicas(engine: str) -> None:
    db = make_db(engine=engine, replicas=3)
    children = desired.children(db)
    named = [(c["kind"], c["metadata"]["name"]) for c in children]
    assert named == [
        ("Deployment", "shop"),
        ("Service", "shop"),
        ("Deployment", "shop-replicas"),
        ("Service", "shop-replicas"),
    ]
    primary, _, replicas, _ = children
    assert (primary["spec"]["replicas"], replicas["spec"]["replicas"]) == (1, 2)
    assert [role_of(c) for c in children] == ["primary", "primary", "replica", "replica"]
    assert desired.surplus(db) == [("NetworkPolicy", "shop")]  # spec.networkPolicy is off


def test_one_replica_or_none_has_no_read_replicas_and_asks_for_their_removal() -> None:
    for count in (0, 1):
        db = make_db(replicas=count)
        assert [c["metadata"]["name"] for c in desired.children(db)] == ["shop", "shop"]
        assert desired.surplus(db) == [
            ("Deployment", "shop-replicas"),
            ("Service", "shop-replicas"),
            ("NetworkPolicy", "shop"),
        ]


def test_the_storage_belongs_to_the_primary_alone() -> None:
    db = make_db(replicas=3, storage={"size": "1Gi"})
    primary = desired.deployment(db)
    replicas = desired.replicas_deployment(db)
    assert replicas is not None
    volume = primary["spec"]["template"]["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"] == {"claimName": "shop-data"}
    assert replicas["spec"]["template"]["spec"]["volumes"][0] == {"name": "data", "emptyDir": {}}
    assert primary["spec"]["strategy"] == {"type": "Recreate"}
    assert replicas["spec"]["strategy"]["type"] == "RollingUpdate"


def test_a_postgres_replica_clones_the_primary_through_its_service() -> None:
    replicas = desired.replicas_deployment(make_db(replicas=2, port=15432))
    assert replicas is not None
    main = replicas["spec"]["template"]["spec"]["containers"][0]
    assert main["command"][:2] == ["sh", "-c"]
    assert "pg_basebackup" in main["command"][2]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["PRIMARY_HOST"], env["PRIMARY_PORT"]) == ("shop.prod.svc", "15432")
    # No replication set-up of the primary's; only the drain before it stops (no claim).
    assert main["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "5"]}}}


@pytest.mark.parametrize("engine", ["postgres", "mysql", "redis"])
def test_a_pod_without_the_claim_drains_before_it_stops_and_one_with_it_does_not(
    engine: str,
) -> None:
    """Seen on a real node: a Redis replica that reached the primary's Service as the old
    primary's pod went hung 60 s on an address nobody answered. A pod without the claim stays up
    5 s after it starts terminating, out of its Services by then; a pod with the claim stops at
    once, as its replacement starts on the same volume right away."""
    drain = {"exec": {"command": ["sleep", "5"]}}
    ephemeral = container(make_db(engine=engine))
    assert ephemeral["lifecycle"]["preStop"] == drain
    claimed = container(make_db(engine=engine, storage={"size": "1Gi"}))
    assert "preStop" not in claimed.get("lifecycle", {})
    if engine != "mysql":
        replicas = desired.replicas_deployment(
            make_db(engine=engine, replicas=2, storage={"size": "1Gi"})
        )
        assert replicas is not None
        replica = replicas["spec"]["template"]["spec"]["containers"][0]
        assert replica["lifecycle"]["preStop"] == drain


def test_a_redis_replica_follows_the_primary_read_only() -> None:
    replicas = desired.replicas_deployment(make_db(engine="redis", replicas=2))
    assert replicas is not None
    args = replicas["spec"]["template"]["spec"]["containers"][0]["command"]
    at = args.index("--replicaof")
    assert args[at + 1 : at + 3] == ["shop.prod.svc", "6379"]
    assert args[args.index("--replica-read-only") + 1] == "yes"
    assert not any("$(REDIS_PASSWORD)" in arg for arg in args)  # on its standard input


def test_mysql_runs_no_read_replicas() -> None:
    assert desired.read_replica_count(make_db(engine="mysql", replicas=1)) == 0
    assert desired.replicas_deployment(make_db(engine="mysql")) is None


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("postgres", ["-c", "max_connections=200", "-c", "work_mem=8MB"]),
        ("mysql", ["--max_connections=200", "--work_mem=8MB"]),
        ("redis", ["--max_connections", "200", "--work_mem", "8MB"]),
    ],
)
def test_parameters_go_on_the_command_line_the_engines_way(
    engine: str, expected: list[str]
) -> None:
    assert parameter_args(engine, {"work_mem": "8MB", "max_connections": "200"}) == expected


def test_parameters_reach_primary_and_replicas_and_kubelet_references_stay_literal() -> None:
    db = make_db(replicas=2, parameters={"application_name": "$(POSTGRES_PASSWORD)"})
    assert settings(db) == ["-c", "application_name=$$(POSTGRES_PASSWORD)"]
    assert container(db)["args"] == ["postgres", *replication.LISTEN_EVERYWHERE, *settings(db)]
    replicas = desired.replicas_deployment(db)
    assert replicas is not None
    assert replicas["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == settings(db)


@pytest.mark.parametrize(
    ("engine", "key"),
    [
        ("postgres", "Port"),
        ("postgres", "hba-file"),
        ("mysql", "data_dir"),
        ("redis", "requirepass"),
    ],
)
def test_settings_the_operator_owns_are_reserved(engine: str, key: str) -> None:
    reserved = reserved_key(engine, key) or reserved_key(engine, key.replace("data_dir", "datadir"))
    assert reserved
    assert not reserved_key(engine, "max_connections")


def test_placement_and_metadata_reach_the_pods_and_services() -> None:
    db = make_db(
        nodeSelector={"disk": "ssd"},
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
        ],
        affinity={
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {
                                "matchLabels": {"app.kubernetes.io/instance": "shop"}
                            },
                        },
                    }
                ]
            }
        },
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        priorityClassName="databases",
        podAnnotations={"backup": "daily"},
        podLabels={"team": "shop"},
        serviceAnnotations={"lb.example.com/internal": "true"},
    )
    template = desired.deployment(db)["spec"]["template"]
    pod = template["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"][0]["effect"] == "NoSchedule"
    affinity = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert pod["priorityClassName"] == "databases"
    assert template["metadata"]["annotations"]["backup"] == "daily"
    assert template["metadata"]["labels"]["team"] == "shop"
    assert desired.service(db)["metadata"]["annotations"] == {"lb.example.com/internal": "true"}


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"engine": "postgres"},
            {
                "type": "postgresql",
                "provider": "database-operator",
                "host": "shop.prod.svc",
                "port": "5432",
                "username": "app",
                "password": "p@ss/word",
                "database": "app",
                "uri": "postgresql://app:p%40ss%2Fword@shop.prod.svc:5432/app",
                "jdbc-uri": "jdbc:postgresql://shop.prod.svc:5432/app",
            },
        ),
        (
            {"engine": "mysql", "port": 13306},
            {
                "type": "mysql",
                "provider": "database-operator",
                "host": "shop.prod.svc",
                "port": "13306",
                "username": "app",
                "password": "p@ss/word",
                "database": "app",
                "uri": "mysql://app:p%40ss%2Fword@shop.prod.svc:13306/app",
                "jdbc-uri": "jdbc:mysql://shop.prod.svc:13306/app",
            },
        ),
        (
            {"engine": "redis", "replicas": 3},
            {
                "type": "redis",
                "provider": "database-operator",
                "host": "shop.prod.svc",
                "port": "6379",
                "username": "default",
                "password": "p@ss/word",
                "uri": "redis://default:p%40ss%2Fword@shop.prod.svc:6379/0",
                "read-only-host": "shop-replicas.prod.svc",
                "read-only-uri": "redis://default:p%40ss%2Fword@shop-replicas.prod.svc:6379/0",
            },
        ),
    ],
)
def test_the_connection_secret_has_the_service_binding_entries(
    spec: dict[str, Any], expected: dict[str, str]
) -> None:
    db = make_db(**spec)
    credentials = {"username": b64("app"), "password": b64("p@ss/word")}
    assert desired.connection_entries(db, credentials) == expected
    secret = desired.connection_secret(db, credentials)
    assert secret["type"] == f"servicebinding.io/{expected['type']}"
    assert secret["metadata"]["name"] == "shop-connection"
    assert secret["metadata"]["ownerReferences"][0]["controller"] is True
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == expected


def test_read_replicas_need_the_replication_key_and_a_generated_secret_gets_it_added() -> None:
    single, replicated = make_db(replicas=1), make_db(replicas=2)
    data = {"username": b64("app"), "password": b64("pw")}
    assert desired.missing_credentials_keys(single, data) == []
    assert desired.missing_credentials_keys(replicated, data) == ["replication-password"]
    assert desired.replication_keys_to_generate(single, data) == ["replication-password"]
    assert (
        desired.replication_keys_to_generate(single, {**data, "replication-password": b64("r")})
        == []
    )
