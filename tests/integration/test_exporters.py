"""The databases' metrics exporters, run for real: Debian's build of each release the pods pin,
started with the pod builder's own flags and env (resolved as the kubelet resolves them) beside
real engines on loopback (tests/exporters.py: a PostgreSQL primary and streaming replica, a
MariaDB standing in for MySQL, a Redis primary and replica), scraped directly and by a real
Prometheus.

Prometheus scrapes them as static targets whose labels (namespace, pod, database, engine, role,
job) are set by hand to what the PodMonitor's relabelings produce from a pod in a cluster, so
the queries the alerts and dashboards make read the same series here.

Run with ``-s`` to see the figures: each exporter's scrape time (Prometheus's
``scrape_duration_seconds``, and a timed GET of /metrics) and series per database
(``scrape_samples_scraped``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from database_operator.api.models import Database
from database_operator.desired import credentials_secret_name
from database_operator.desired.common import PRIMARY, REPLICA
from database_operator.desired.monitoring import (
    exporter_args,
    exporter_container,
    exporter_env,
    exporter_facts,
)
from database_operator.engines import REDIS_MONITORING_USER, Engine, facts
from database_operator.manifest import Manifest
from tests.cluster import wait_for
from tests.engines import redis_cli
from tests.exporters import (
    BINARIES,
    JOB,
    Fleet,
    Target,
    exporter,
    exporter_fleet,  # noqa: F401 - the fixture
    kubelet_env,
    kubelet_expand,
    listener,
    series,
)
from tests.prometheus import http_get, prometheus_server, query, value

#: The database metrics of the monitoring contract, on every exporter of an engine.
CONTRACT_METRICS: dict[Engine, tuple[str, ...]] = {
    Engine.POSTGRES: (
        "pg_up",
        "pg_stat_database_numbackends",
        "pg_settings_max_connections",
        "pg_stat_database_xact_commit",
        "pg_stat_database_xact_rollback",
        "pg_settings_shared_buffers_bytes",
        "pg_database_size_bytes",
    ),
    Engine.MYSQL: (
        "mysql_up",
        "mysql_global_status_threads_connected",
        "mysql_global_variables_max_connections",
        "mysql_global_status_queries",
        "mysql_global_status_innodb_buffer_pool_bytes_data",
        "mysql_info_schema_table_size",
    ),
    Engine.REDIS: (
        "redis_up",
        "redis_connected_clients",
        "redis_script_values",
        "redis_commands_processed_total",
        "redis_memory_used_bytes",
        "redis_db_keys",
    ),
}
#: The contract's replication metrics, on the exporter of that role.
REPLICATION_METRICS: dict[tuple[Engine, str], tuple[str, ...]] = {
    (Engine.POSTGRES, PRIMARY): ("pg_stat_replication_pg_wal_lsn_diff",),
    (Engine.POSTGRES, REPLICA): (),
    (Engine.MYSQL, PRIMARY): (),
    (Engine.REDIS, PRIMARY): (
        "redis_connected_slaves",
        "redis_connected_slave_offset_bytes",
        "redis_master_repl_offset",
        "redis_connected_slave_lag_seconds",
    ),
    (Engine.REDIS, REPLICA): ("redis_master_link_up", "redis_master_last_io_seconds_ago"),
}
UP = {Engine.POSTGRES: "pg_up", Engine.MYSQL: "mysql_up", Engine.REDIS: "redis_up"}
TARGETS = list(REPLICATION_METRICS)
SCRAPE_INTERVAL_S = 1
#: A few scrapes, with room for a loaded machine.
SCRAPE_TIMEOUT_S = SCRAPE_INTERVAL_S * 5 + 25


def target_id(engine_role: tuple[Engine, str]) -> str:
    return f"{engine_role[0].value}-{engine_role[1]}"


def scraped(target: Target) -> dict[str, list[tuple[dict[str, str], float]]]:
    body = http_get(target.url)
    assert body is not None, f"{target.url} did not answer"
    return series(body.decode())


def figures(what: str, **values: str) -> None:
    """One line of measurements (pytest -s shows it)."""
    print(
        f"\n[figures] {what}: " + "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
    )


# --- the releases and the pod's container --------------------------------------------------------


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_the_installed_exporter_is_the_release_the_pods_pin(engine: Engine) -> None:
    """The tests prove the release the pod runs: Debian's exporter must say the version of
    engines.py's image tag (hack/install-engines.sh installs it)."""
    pinned = exporter_facts(engine).image.rsplit(":", 1)[1].removeprefix("v")
    binary = shutil.which(BINARIES[engine])
    assert binary, f"{BINARIES[engine]} is not on PATH: run hack/install-engines.sh"
    said = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    found = re.search(r"(?:version|Exporter) v?(\d+\.\d+\.\d+)", said.stdout + said.stderr)
    assert found, said.stdout + said.stderr
    assert found[1] == pinned, f"{binary} is {found[1]}, the pods run {pinned}"


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_the_pods_exporter_container_is_what_the_fleet_runs(engine: Engine) -> None:
    """The harness starts the exporters from exporter_args and exporter_env; the pod's container
    is built from the same two, with the engine's and the exporter's own ports, and holds the
    password only by reference."""
    db = Database.model_validate(
        {
            "metadata": {"name": "db", "namespace": "prod", "uid": "u"},
            "spec": {"engine": engine.value, "monitoring": {"enabled": True}},
        }
    )
    container = exporter_container(db)
    assert container is not None
    assert container["args"] == exporter_args(engine)
    assert container["env"] == exporter_env(engine, credentials_secret_name(db), facts(engine).port)
    for var in container["env"]:
        assert set(var) in ({"name", "value"}, {"name", "valueFrom"}), var
        if "valueFrom" in var:
            assert set(var["valueFrom"]) == {"secretKeyRef"}, var


# --- the kubelet's expansion, which the harness implements --------------------------------------


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)", "x"),
        ("pre-$(A)-post", "pre-x-post"),
        ("$(A)$(A)", "xx"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$x"),
        ("$$", "$"),
        ("a$b", "a$b"),
        ("$(A", "$(A"),
        ("$(", "$("),
        ("end$", "end$"),
        ("$()", "$()"),
        ("$(B)", "$(A)"),  # a value is not expanded again
    ],
)
def test_kubelet_expand_follows_the_kubelets_rules(text: str, expanded: str) -> None:
    assert kubelet_expand(text, {"A": "x", "B": "$(A)"}) == expanded


def test_kubelet_env_reads_secrets_and_expands_only_earlier_variables() -> None:
    env: list[Manifest] = [
        {"name": "EARLY", "value": "$(PASS)"},
        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
        {"name": "DSN", "value": "u:$(PASS)@h/"},
    ]
    resolved = kubelet_env(env, {"s": {"password": "p@$(EARLY)"}})
    assert resolved == {"EARLY": "$(PASS)", "PASS": "p@$(EARLY)", "DSN": "u:p@$(EARLY)@h/"}
    with pytest.raises(KeyError):
        kubelet_env(env, {"s": {}})


# --- each exporter on its engine -----------------------------------------------------------------


@pytest.mark.parametrize("engine_role", TARGETS, ids=target_id)
def test_each_exporter_scrapes_its_engine_and_serves_the_contracts_metrics(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
    engine_role: tuple[Engine, str],
) -> None:
    engine, role = engine_role
    target = exporter_fleet.target(engine, role)
    found = scraped(target)
    assert found[UP[engine]] == [({}, 1.0)], target.log.read_text(errors="replace")[-2000:]
    expected = CONTRACT_METRICS[engine] + REPLICATION_METRICS[engine_role]
    missing = [name for name in expected if name not in found]
    assert not missing, f"{target.labels['pod']} serves none of {missing}"


def test_the_database_series_cover_the_applications_data(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
) -> None:
    """The per-database series name the application's database (named after the user)."""
    app = exporter_fleet.credentials(Engine.POSTGRES)["username"]
    pg = scraped(exporter_fleet.target(Engine.POSTGRES))
    assert any(labels["datname"] == app and v > 0 for labels, v in pg["pg_database_size_bytes"])
    # MySQL's tables of the application's database (named after the user), and of no other
    # schema (`sys` would add hundreds of series).
    my = scraped(exporter_fleet.target(Engine.MYSQL))
    sizes = {
        (labels["schema"], labels["table"], labels["component"])
        for labels, _ in my["mysql_info_schema_table_size"]
    }
    database = exporter_fleet.credentials(Engine.MYSQL)["username"]
    assert (database, "products", "data_length") in sizes, sizes
    assert {schema for schema, _, _ in sizes} == {database}
    redis = scraped(exporter_fleet.target(Engine.REDIS))
    assert dict((labels["db"], v) for labels, v in redis["redis_db_keys"])["db0"] > 0


def test_the_postgres_primary_reports_its_streaming_replica_with_the_lag_in_bytes(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
) -> None:
    exporter_fleet.load()
    primary = scraped(exporter_fleet.target(Engine.POSTGRES, PRIMARY))
    streaming = [
        (labels, lag)
        for labels, lag in primary["pg_stat_replication_pg_wal_lsn_diff"]
        if labels["state"] == "streaming"
    ]
    assert len(streaming) == 1, primary["pg_stat_replication_pg_wal_lsn_diff"]
    labels, lag = streaming[0]
    assert labels["client_addr"] == "127.0.0.1" and labels["application_name"], labels
    assert lag >= 0
    # The replica has no replicas of its own: the contract counts streaming series on the
    # primary only.
    replica = scraped(exporter_fleet.target(Engine.POSTGRES, REPLICA))
    assert "pg_stat_replication_pg_wal_lsn_diff" not in replica


def test_the_redis_replica_reports_its_link_and_the_primary_its_replica(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
) -> None:
    replica_target = exporter_fleet.target(Engine.REDIS, REPLICA)
    replica = scraped(replica_target)
    [(link, up)] = replica["redis_master_link_up"]
    assert up == 1
    primary_target = exporter_fleet.target(Engine.REDIS, PRIMARY)
    assert link["master_port"] == str(primary_target.engine_port)
    primary = scraped(primary_target)
    assert primary["redis_connected_slaves"] == [({}, 1.0)]
    [(slave, _)] = primary["redis_connected_slave_offset_bytes"]
    assert slave["slave_port"] == str(replica_target.engine_port), slave


# --- credentials ---------------------------------------------------------------------------------


def exposed(pid: int, log: Path, metrics: bytes, secret: str) -> list[str]:
    """Where ``secret`` shows: the process's command line, its output, its metrics."""
    places = {
        "command line": Path(f"/proc/{pid}/cmdline").read_bytes(),
        "log": log.read_bytes(),
        "metrics": metrics,
    }
    return [where for where, text in places.items() if secret.encode() in text]


#: The engines whose exporter logs in with a password (PostgreSQL's has none: below).
WITH_PASSWORD = [engine for engine in Engine if engine is not Engine.POSTGRES]


@pytest.mark.parametrize("engine", WITH_PASSWORD, ids=str)
def test_with_a_wrong_password_the_exporter_says_down_and_never_shows_the_password(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
    engine: Engine,
    tmp_path: Path,
) -> None:
    target = exporter_fleet.target(engine)
    right = exporter_fleet.secrets[target.secret_name]
    wrong = {**right, "password": "not-" + right["password"]}
    secrets = {target.secret_name: wrong}
    log = tmp_path / "exporter.log"
    monitoring_dir = None
    if target.monitoring_dir is not None:  # its own user's password, in its file
        right = {"password": (target.monitoring_dir / "password").read_text()}
        wrong = {"password": "0" + right["password"]}
        monitoring_dir = tmp_path / "monitoring"
        shutil.copytree(target.monitoring_dir, monitoring_dir)
        passwords = monitoring_dir / "passwords.json"
        passwords.write_text(passwords.read_text().replace(right["password"], wrong["password"]))
    with exporter(
        engine, secrets, target.secret_name, target.engine_port, log, monitoring_dir=monitoring_dir
    ) as started:
        metrics = wait_for(lambda: http_get(started.url), what="a scrape")
        assert series(metrics.decode())[UP[engine]] == [({}, 0.0)]
        # The exporter did read the password: from its environment, or its file.
        environ = Path(f"/proc/{started.proc.pid}/environ").read_bytes()
        assert (wrong["password"].encode() in environ) == (monitoring_dir is None)
        for secret in (wrong["password"], right["password"]):
            assert not exposed(started.proc.pid, log, metrics, secret)
    assert log.read_text(errors="replace").strip(), "the exporter said nothing of the failure"


def test_the_postgres_exporter_holds_no_password_and_the_application_user_needs_one(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """It logs in as its own role, which pg_hba.conf trusts from loopback only: no value of the
    Secret is in its environment. Told to log in as the application's user (the superuser)
    without a password, as initdb's loopback lines let any container of the pod do, it is
    refused: pg_up 0."""
    target = exporter_fleet.target(Engine.POSTGRES)
    secret = exporter_fleet.secrets[target.secret_name]
    environ = Path(f"/proc/{target.pid}/environ").read_bytes()
    assert b"DATA_SOURCE_USER=database_monitor\0" in environ
    for key in ("password", "replication-password"):
        assert secret[key].encode() not in environ, key
    assert series((http_get(target.url) or b"").decode())["pg_up"] == [({}, 1.0)]
    as_the_application = {"DATA_SOURCE_USER": secret["username"]}
    with exporter(
        Engine.POSTGRES,
        {},
        target.secret_name,
        target.engine_port,
        tmp_path / "exporter.log",
        env_changes=as_the_application,
    ) as started:
        metrics = wait_for(lambda: http_get(started.url), what="a scrape")
        assert series(metrics.decode())["pg_up"] == [({}, 0.0)]
    assert "password" in (tmp_path / "exporter.log").read_text(errors="replace")


def test_no_exporter_shows_its_password(exporter_fleet: Fleet) -> None:  # noqa: F811
    for target in exporter_fleet.targets:
        body = http_get(target.url)
        assert body is not None
        passwords = [exporter_fleet.secrets[target.secret_name]["password"]]
        if target.monitoring_dir is not None:
            passwords.append((target.monitoring_dir / "password").read_text())
        for password in passwords:
            assert not exposed(target.pid, target.log, body, password), target.labels["pod"]


# --- Redis: what its exporter's own user may do --------------------------------------------------


def redis_as_monitoring(target: Target, *command: str) -> str:
    """``command`` on the target's server as its exporter's user: the answer, or the error."""
    assert target.monitoring_dir is not None
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(target.engine_port), "--user",
         REDIS_MONITORING_USER, *command],
        env={"PATH": os.environ["PATH"],
             "REDISCLI_AUTH": (target.monitoring_dir / "password").read_text()},
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    return done.stdout + done.stderr


@pytest.mark.parametrize("role", [PRIMARY, REPLICA])
def test_the_redis_exporters_user_reads_statistics_and_nothing_else(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
    role: str,
) -> None:
    """Each server (a replica has its own: ACL users are not replicated) has the exporter's
    user, with its pod's own password; it may read INFO and maxclients, never a key, never
    CONFIG (whose GET answers the passwords), never write."""
    target = exporter_fleet.target(Engine.REDIS, role)
    assert "maxclients:" in redis_as_monitoring(target, "INFO", "clients")
    found = scraped(target)
    assert found["redis_script_values"] == [({"key": "maxclients"}, 10000.0)]
    assert "redis_config_maxclients" not in found
    refused = {
        "a key's value": ("GET", "session:0:0"),
        "the keys": ("KEYS", "*"),
        "a scan": ("SCAN", "0"),
        "a write": ("SET", "mine", "1"),
        "the passwords": ("CONFIG", "GET", "*pass*"),
        "the users": ("ACL", "LIST"),
        "the slow commands' arguments": ("SLOWLOG", "GET"),
        "a reset of the statistics": ("LATENCY", "RESET"),
        "a key through a script": ("EVAL", "return redis.call('GET', KEYS[1])", "1", "session:0:0"),
    }
    for what, command in refused.items():
        said = redis_as_monitoring(target, *command)
        assert "NOPERM" in said or "permission" in said, (what, said)
    other = exporter_fleet.target(Engine.REDIS, REPLICA if role == PRIMARY else PRIMARY)
    assert other.monitoring_dir is not None and target.monitoring_dir is not None
    own = (target.monitoring_dir / "password").read_text()
    assert own != (other.monitoring_dir / "password").read_text(), "a password per pod"
    assert re.fullmatch(r"[0-9a-f]{64}", own), "32 random bytes"


def test_the_redis_exporter_sends_no_password_to_a_target_it_is_asked_to_scrape(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
) -> None:
    """The release's /scrape?target= connects wherever it is told: with a password given by
    flag or env it would send it there. With its file, a target the file does not name gets no
    AUTH, and no password of the Database's."""
    target = exporter_fleet.target(Engine.REDIS)
    assert target.monitoring_dir is not None
    port, received, thread = listener()
    http_get(f"http://{target.address}/scrape?target=redis://127.0.0.1:{port}", timeout=30)
    thread.join(timeout=30)
    sent = b"".join(received)
    assert sent, "the exporter never connected: the check proves nothing"
    assert b"AUTH" not in sent.upper(), sent
    for password in (
        (target.monitoring_dir / "password").read_text(),
        exporter_fleet.credentials(Engine.REDIS)["password"],
    ):
        assert password.encode() not in sent


def test_no_key_or_value_leaves_the_redis_exporter(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
) -> None:
    """Asked to export keys (the release reads ``check-keys`` on /scrape), the exporter's user
    may read none: no key's name or value is in what it serves."""
    target = exporter_fleet.target(Engine.REDIS)
    value = "value-nobody-may-scrape"
    redis_cli(
        target.engine_port,
        exporter_fleet.credentials(Engine.REDIS)["password"],
        "SET",
        "secret:key",
        value,
    )
    local = f"redis://127.0.0.1:{target.engine_port}"
    for path in (
        f"/scrape?target={local}&check-keys=*&check-single-keys=secret:key",
        "/metrics?check-keys=*&check-single-keys=secret:key",
    ):
        body = http_get(f"http://{target.address}{path}", timeout=30)
        assert body is not None, path
        found = series(body.decode())
        assert found[UP[Engine.REDIS]] == [({}, 1.0)], path
        assert value.encode() not in body and b"secret:key" not in body, path
        assert not [name for name in found if name.startswith("redis_key_")], path


# --- Prometheus ----------------------------------------------------------------------------------


def labels_of(result: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in result["metric"].items() if k not in ("__name__", "instance")}


def test_prometheus_scrapes_every_exporter_with_the_contracts_labels(
    exporter_fleet: Fleet,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    config = exporter_fleet.scrape_config(SCRAPE_INTERVAL_S)
    with prometheus_server(tmp_path, [config], SCRAPE_INTERVAL_S) as prometheus:
        wait_for(
            lambda: len(query(prometheus, f'up{{job="{JOB}"}} == 1')) == len(TARGETS),
            timeout=SCRAPE_TIMEOUT_S,
            what="every exporter scraped and up",
        )
        for target in exporter_fleet.targets:
            [up] = query(prometheus, f'{UP[target.engine]}{{pod="{target.labels["pod"]}"}}')
            assert labels_of(up) == target.labels
            assert up["value"][1] == "1"

        # The contract's "replica not streaming" comparison: one replica up, one streaming.
        by_database = "count by (namespace, database)"
        assert value(prometheus, f'{by_database} (pg_up{{role="replica"}} == 1)') == 1
        streaming = 'pg_stat_replication_pg_wal_lsn_diff{role="primary",state="streaming"}'
        assert value(prometheus, f"{by_database} ({streaming})") == 1
        assert value(prometheus, 'redis_master_link_up{role="replica"}') == 1
        # redis_exporter's own `role` label (master/slave) gives way to the target's.
        [info] = query(prometheus, 'redis_instance_info{role="primary"}')
        assert info["metric"]["exported_role"] == "master"

        # Load moves the counters.
        throughput = (
            'sum(pg_stat_database_xact_commit{role="primary"})',
            "sum(mysql_global_status_queries)",
            'sum(redis_commands_processed_total{role="primary"})',
        )
        before = {promql: value(prometheus, promql) or 0 for promql in throughput}
        exporter_fleet.load(rounds=3)
        for promql, was in before.items():
            wait_for(
                functools.partial(grown, prometheus, promql, was),
                timeout=SCRAPE_TIMEOUT_S,
                what=f"{promql} to grow past {was}",
            )
        report_scrapes(exporter_fleet, prometheus)


def grown(prometheus: str, promql: str, was: float) -> bool:
    return (value(prometheus, promql) or 0) > was


def report_scrapes(fleet: Fleet, prometheus: str) -> None:
    """Each exporter's scrape time, by Prometheus and by a timed GET, and its series."""
    for target in fleet.targets:
        pod = target.labels["pod"]
        duration = value(prometheus, f'scrape_duration_seconds{{pod="{pod}"}}')
        samples = value(prometheus, f'scrape_samples_scraped{{pod="{pod}"}}')
        gets = []
        for _ in range(5):
            start = time.perf_counter()
            assert http_get(target.url) is not None
            gets.append(time.perf_counter() - start)
        figures(
            f"exporter {target.engine.value} {target.role} ({pod})",
            prometheus_scrape=f"{(duration or 0) * 1000:.0f} ms",
            GET_median_of_5=f"{statistics.median(gets) * 1000:.0f} ms",
            series=f"{samples:.0f}",
        )
    for result in query(prometheus, f'sum by (database) (scrape_samples_scraped{{job="{JOB}"}})'):
        figures(f"database {result['metric']['database']}", series=result["value"][1])
