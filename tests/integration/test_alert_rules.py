"""The shipped alert rules on data: `promtool check rules` accepts them, and `promtool test rules`
shows each alert firing in the situation it names, after its `for`, and not otherwise.

Each test writes a promtool unit test (series one sample a minute for four hours, as the
operator would serve them, and the alerts expected at some minutes) into its tmp dir, against
the chart's files/prometheus-rules.yaml (the same groups as config/prometheus and the docs:
tests/unit/test_alerts.py). Expected annotations are the rule's own with the alert's labels and
value put in, so a template that names a missing label fails here.

`promtool` must be on PATH (`make prometheus`); its absence fails these tests, never skips them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "helm" / "database-operator" / "files" / "prometheus-rules.yaml"
PROMETHEUS_RULE = ROOT / "config" / "prometheus" / "prometheus_rule.yaml"
#: Every series runs from minute 0 to this one.
END = 240
#: One Database, as one operator replica serves its gauges.
DB = {"namespace": "team-a", "database": "orders"}
SCRAPE = {"job": "database-operator", "instance": "10.0.0.1:8080"}
STANDBY = {"job": "database-operator", "instance": "10.0.0.2:8080"}
HOUR = 60

SUCCESS = "database_operator_backup_last_success_timestamp_seconds"
FAILURE = "database_operator_backup_last_failure_timestamp_seconds"
PERIOD = "database_operator_backup_schedule_period_seconds"

Check = dict[str, Any]


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "`promtool` is not on PATH: run `make prometheus` (Debian's prometheus package)"
        )
    return path


def steps(changes: dict[int, float | None]) -> str:
    """promtool's values of a gauge: absent until the first minute of ``changes``, then each
    value from its minute on, one sample a minute up to END. None: the series is gone from that
    minute (a stale marker, as Prometheus writes when a scrape no longer has it)."""
    minutes = sorted(changes)
    parts = [f"_x{minutes[0]}"] if minutes[0] else []
    for at, until in zip(minutes, [*minutes[1:], END + 1], strict=True):
        value = changes[at]
        if value is None:
            parts.append("stale" + (f" _x{until - at - 1}" if until - at > 1 else ""))
        else:
            parts.append(f"{value:g}x{until - at - 1}")
    return " ".join(parts)


def newest_of(*minutes: int) -> str:
    """A timestamp gauge: absent until the first event, then the Unix time of the newest."""
    return steps({minute: minute * 60 for minute in minutes})


def series(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def backups(
    *,
    period_from: int | None = 0,
    successes: tuple[int, ...] = (),
    failures: tuple[int, ...] = (),
    scrape: dict[str, str] = SCRAPE,
) -> dict[str, str]:
    """The backup gauges of DB: an hourly schedule from ``period_from`` (None: no schedule),
    backups that completed and failed at those minutes."""
    out = {}
    if period_from is not None:
        out[series(PERIOD, DB | scrape)] = steps({period_from: 3600})
    if successes:
        out[series(SUCCESS, DB | scrape)] = newest_of(*successes)
    if failures:
        out[series(FAILURE, DB | scrape)] = newest_of(*failures)
    return out


def shipped_rule(name: str) -> dict[str, Any]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    (rule,) = (rule for group in groups for rule in group["rules"] if rule["alert"] == name)
    return rule  # type: ignore[no-any-return]


def humanize1024(value: float) -> str:
    """Prometheus' template function of that name (binary prefixes, four digits)."""
    prefix = ""
    for unit in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        if abs(value) < 1024:
            break
        prefix, value = unit, value / 1024
    return f"{value:.4g}{prefix}"


def rendered(template: str, labels: dict[str, str], value: str | None) -> str:
    """``template`` with ``{{ $labels.NAME }}``, ``{{ $value }}`` and ``{{ $value | F }}`` (F:
    humanize1024, humanizePercentage) put in as Prometheus would (no other function: a template
    that uses one fails here, to be taught)."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], "<no value>"), template)
    if value is not None:
        text = text.replace("{{ $value }}", value)
        text = text.replace("{{ $value | humanize1024 }}", humanize1024(float(value)))
        text = text.replace("{{ $value | humanizePercentage }}", f"{float(value) * 100:.4g}%")
    assert "{{" not in text, f"not rendered by this test: {text}"
    return text


def firing(
    alert: str, minute: int, labels: dict[str, str] | None = None, value: str | None = None
) -> Check:
    """``alert`` fires at ``minute``, once, with ``labels`` (besides its own)."""
    rule = shipped_rule(alert)
    labels = {**(labels or {}), **rule["labels"]}
    return {
        "eval_time": f"{minute}m",
        "alertname": alert,
        "exp_alerts": [
            {
                "exp_labels": labels,
                "exp_annotations": {
                    key: rendered(template, labels, value)
                    for key, template in rule["annotations"].items()
                },
            }
        ],
    }


def quiet(alert: str, minute: int) -> Check:
    """``alert`` does not fire at ``minute`` (pending is not firing)."""
    return {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": []}


def run_promtool_test(tmp_path: Path, input_series: dict[str, str], *checks: Check) -> None:
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": name, "values": values} for name, values in input_series.items()
                ],
                "alert_rule_test": list(checks),
            }
        ],
    }
    path = tmp_path / "alerts_test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1000))
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- the rule files -----------------------------------------------------------------------------


@pytest.mark.parametrize("shipped", [RULES, PROMETHEUS_RULE], ids=lambda path: path.name)
def test_promtool_accepts_the_shipped_rules(tmp_path: Path, shipped: Path) -> None:
    document = yaml.safe_load(shipped.read_text())
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(document.get("spec", document)))
    done = subprocess.run(
        [promtool(), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(len(group["rules"]) for group in yaml.safe_load(RULES.read_text())["groups"])
    assert count >= 21
    assert f"SUCCESS: {count} rules found" in done.stdout


# --- DatabaseBackupTooOld -----------------------------------------------------------------------


def test_backup_too_old_fires_when_the_last_success_is_older_than_two_periods(
    tmp_path: Path,
) -> None:
    # Hourly; the one success at 1 h is two periods old at 3 h, three at 4 h.
    run_promtool_test(
        tmp_path,
        backups(successes=(1 * HOUR,)),
        quiet("DatabaseBackupTooOld", 3 * HOUR),
        quiet("DatabaseBackupTooOld", 3 * HOUR + 5),  # pending: its `for` is 10m
        firing("DatabaseBackupTooOld", 4 * HOUR, DB),
        quiet("DatabaseBackupFailed", 4 * HOUR),
    )


def test_backup_too_old_is_quiet_while_the_last_success_is_recent(tmp_path: Path) -> None:
    # Hourly successes, the newest 30 min before the end.
    run_promtool_test(
        tmp_path,
        backups(successes=(30, 90, 150, 210)),
        quiet("DatabaseBackupTooOld", 4 * HOUR),
        quiet("DatabaseBackupFailed", 4 * HOUR),
    )


def test_backup_too_old_fires_for_a_schedule_whose_backups_only_ever_failed(
    tmp_path: Path,
) -> None:
    run_promtool_test(
        tmp_path,
        backups(failures=(30, 90, 150, 210)),
        quiet("DatabaseBackupTooOld", 35),  # pending since the first failure
        firing("DatabaseBackupTooOld", 4 * HOUR, DB),
        firing("DatabaseBackupFailed", 4 * HOUR, DB),
    )


def test_a_new_database_with_a_schedule_and_no_backup_yet_fires_nothing(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        backups(period_from=3 * HOUR + 30),
        quiet("DatabaseBackupTooOld", 4 * HOUR),
        quiet("DatabaseBackupFailed", 4 * HOUR),
    )


def test_backups_without_a_schedule_never_grow_too_old(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        backups(period_from=None, successes=(0,)),
        quiet("DatabaseBackupTooOld", 4 * HOUR),
    )


def test_the_newest_success_any_replica_serves_counts(tmp_path: Path) -> None:
    """A standby keeps the gauges it served while it was active: its stale success neither
    fires the alert nor splits it from the active replica's."""
    stale = backups(successes=(10,), scrape=STANDBY)
    run_promtool_test(
        tmp_path,
        stale | backups(successes=(30, 90, 150, 210)),
        quiet("DatabaseBackupTooOld", 4 * HOUR),
    )
    run_promtool_test(
        tmp_path,
        stale | backups(successes=(60,)),
        firing("DatabaseBackupTooOld", 4 * HOUR, DB),  # one alert, without instance or job
    )


# --- DatabaseBackupFailed -----------------------------------------------------------------------


def test_backup_failed_fires_when_the_newest_failure_is_after_the_newest_success(
    tmp_path: Path,
) -> None:
    run_promtool_test(
        tmp_path,
        backups(successes=(30, 90, 150), failures=(210,)),
        quiet("DatabaseBackupFailed", 200),
        quiet("DatabaseBackupFailed", 212),  # pending: its `for` is 5m
        firing("DatabaseBackupFailed", 4 * HOUR, DB),
        quiet("DatabaseBackupTooOld", 4 * HOUR),
    )


def test_backup_failed_resolves_with_a_later_success(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        backups(successes=(30, 210), failures=(90, 150)),
        firing("DatabaseBackupFailed", 200, DB),
        quiet("DatabaseBackupFailed", 211),
        quiet("DatabaseBackupFailed", 4 * HOUR),
    )


# --- the operator's alerts ----------------------------------------------------------------------


def test_no_active_replica_fires_once_every_replica_stands_by(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        {
            series("database_operator_active", SCRAPE): steps({0: 1, 60: 0}),
            series("database_operator_active", STANDBY): steps({0: 0}),
        },
        quiet("DatabaseOperatorNoActiveReplica", 60),
        quiet("DatabaseOperatorNoActiveReplica", 63),
        firing("DatabaseOperatorNoActiveReplica", 70),
    )


def test_database_failed_counts_the_failed_databases_by_namespace(tmp_path: Path) -> None:
    failed = {"phase": "Failed", "namespace": "team-a", **SCRAPE}
    run_promtool_test(
        tmp_path,
        {
            series("database_operator_active", SCRAPE): steps({0: 1}),
            series("database_operator_databases", failed): steps({0: 0, 60: 2}),
        },
        quiet("DatabaseFailed", 65),
        firing("DatabaseFailed", 80, {"namespace": "team-a"}, value="2"),
    )


def test_database_failed_and_degraded_ignore_what_a_standby_saw(tmp_path: Path) -> None:
    """A former leader keeps serving the phases it saw: only the leader's count."""
    run_promtool_test(
        tmp_path,
        {
            series("database_operator_active", SCRAPE): steps({0: 1}),
            series("database_operator_active", STANDBY): steps({0: 0}),
            series(
                "database_operator_databases", {"phase": "Failed", "namespace": "a", **STANDBY}
            ): steps({0: 1}),
            series(
                "database_operator_databases", {"phase": "Degraded", "namespace": "a", **STANDBY}
            ): steps({0: 1}),
        },
        quiet("DatabaseFailed", 4 * HOUR),
        quiet("DatabaseDegraded", 4 * HOUR),
    )


def test_operator_down_fires_when_no_target_is_up(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        {series("up", SCRAPE): steps({0: 1, 60: 0})},
        quiet("DatabaseOperatorDown", 60),
        firing("DatabaseOperatorDown", 70),
    )


def test_operator_down_is_not_hidden_by_the_databases_exporters(tmp_path: Path) -> None:
    """The databases' job contains "database-operator" too: its targets are not the operator."""
    run_promtool_test(
        tmp_path,
        {
            series("up", SCRAPE): steps({0: 1, 60: 0}),
            series("up", pod("orders-0", "postgres", "primary")): steps({0: 1}),
        },
        firing("DatabaseOperatorDown", 70),
    )


# --- the operator's queue and the Databases' phases ---------------------------------------------


def phases(counts: dict[str, int], labels: dict[str, str], *, from_minute: int = 60) -> Series:
    """database_operator_databases: every phase 0 until ``from_minute``, then ``counts``."""
    return {
        series("database_operator_databases", {**labels, "phase": phase}): steps(
            {0: 0, from_minute: counts.get(phase, 0)}
        )
        for phase in ("Pending", "Active", "Degraded", "Failed", "Deleting")
    }


ACTIVE = {series("database_operator_active", SCRAPE): steps({0: 1})}


def test_not_ready_counts_the_databases_out_of_active_by_namespace(tmp_path: Path) -> None:
    labels = {"namespace": "team-a", **SCRAPE}
    run_promtool_test(
        tmp_path,
        ACTIVE | phases({"Active": 3, "Pending": 1, "Failed": 1, "Deleting": 4}, labels),
        quiet("DatabaseNotReady", 65),  # pending: its `for` is 10m
        firing("DatabaseNotReady", 71, {"namespace": "team-a"}, value="2"),
    )


def test_not_ready_works_on_the_gauge_without_its_namespace_label(tmp_path: Path) -> None:
    """Before the gauge had ``namespace``, the ServiceMonitor's target gave it the operator's:
    one alert for every namespace, by that one."""
    scraped = {"namespace": "database-operator-system", **SCRAPE}
    run_promtool_test(
        tmp_path,
        ACTIVE | phases({"Degraded": 1, "Failed": 1}, scraped),
        firing("DatabaseNotReady", 71, {"namespace": "database-operator-system"}, value="2"),
    )


def test_not_ready_is_quiet_while_every_database_is_active_or_deleting(tmp_path: Path) -> None:
    """A standby serves what it saw while it led (here a Failed one): only the leader counts."""
    standby = {series("database_operator_active", STANDBY): steps({0: 0})}
    run_promtool_test(
        tmp_path,
        ACTIVE
        | standby
        | phases({"Active": 5, "Deleting": 1}, {"namespace": "team-a", **SCRAPE})
        | phases({"Failed": 1}, {"namespace": "team-a", **STANDBY}),
        quiet("DatabaseNotReady", 4 * HOUR),
    )


def test_workqueue_backlog_fires_when_the_queue_stays_long(tmp_path: Path) -> None:
    depth = series("database_operator_workqueue_depth", SCRAPE)
    run_promtool_test(
        tmp_path,
        {depth: steps({0: 3, 60: 150})},
        quiet("DatabaseOperatorWorkqueueBacklog", 59),
        quiet("DatabaseOperatorWorkqueueBacklog", 65),
        firing("DatabaseOperatorWorkqueueBacklog", 71, SCRAPE, value="150"),
    )
    run_promtool_test(
        tmp_path,
        {depth: steps({0: 3, 60: 80})},
        quiet("DatabaseOperatorWorkqueueBacklog", 4 * HOUR),
    )


# --- the databases' alerts ----------------------------------------------------------------------
#
# Series as the engines' exporters serve them (tests/integration/test_exporters.py checks the
# names against the Debian releases the pods run), with the labels the PodMonitor's relabelings
# give every database series (set by hand here, as a static scrape config would).

DATABASES_JOB = "database-operator-databases"
EXPORTER_PORTS = {"postgres": 9187, "mysql": 9104, "redis": 9121}
UP = {"postgres": "pg_up", "mysql": "mysql_up", "redis": "redis_up"}
Series = dict[str, str]


def pod(name: str, engine: str, role: str, address: str = "10.1.0.5") -> dict[str, str]:
    """The labels of the series scraped from one database pod's exporter."""
    return {
        "job": DATABASES_JOB,
        "instance": f"{address}:{EXPORTER_PORTS[engine]}",
        "namespace": "team-a",
        "pod": name,
        "database": "orders",
        "engine": engine,
        "role": role,
    }


def alerted(labels: dict[str, str]) -> dict[str, str]:
    """What an alert about one pod keeps of its labels: not the scrape's job and instance."""
    return {key: value for key, value in labels.items() if key not in ("job", "instance")}


PRIMARY = pod("orders-7d9f-abcde", "postgres", "primary", "10.1.0.5")
REPLICAS = [
    pod("orders-replicas-5c8b-fghij", "postgres", "replica", "10.1.0.6"),
    pod("orders-replicas-5c8b-klmno", "postgres", "replica", "10.1.0.7"),
]


def streaming(replica: dict[str, str], lag: dict[int, float | None]) -> Series:
    """The primary's pg_stat_replication row of ``replica``: bytes it has yet to replay."""
    labels = {
        **PRIMARY,
        "application_name": "walreceiver",
        "client_addr": replica["instance"].split(":")[0],
        "state": "streaming",
    }
    return {series("pg_stat_replication_pg_wal_lsn_diff", labels): steps(lag)}


def postgres(
    *,
    primary_up: dict[int, float | None] | None = None,
    replica_up: dict[int, float | None] | None = None,
    lags: tuple[dict[int, float | None], ...] = ({0: 0}, {0: 0}),
) -> Series:
    """A primary and two streaming replicas, all up (unless told otherwise)."""
    out = {series("pg_up", PRIMARY): steps(primary_up or {0: 1})}
    for i, replica in enumerate(REPLICAS):
        out[series("pg_up", replica)] = steps((replica_up if i == 0 else None) or {0: 1})
        out |= streaming(replica, lags[i])
    return out


@pytest.mark.parametrize("engine", ["postgres", "mysql", "redis"])
def test_database_down_fires_for_a_primary_whose_engine_does_not_answer(
    tmp_path: Path, engine: str
) -> None:
    primary = pod("orders-7d9f-abcde", engine, "primary")
    run_promtool_test(
        tmp_path,
        {
            series(UP[engine], primary): steps({0: 1, 60: 0}),
            series("up", primary): steps({0: 1}),
        },
        quiet("DatabaseDown", 59),
        quiet("DatabaseDown", 63),  # pending: its `for` is 5m
        firing("DatabaseDown", 66, alerted(primary), value="0"),
        quiet("DatabaseReplicaDown", 4 * HOUR),
        quiet("DatabaseExporterDown", 4 * HOUR),
    )


def test_replica_down_fires_later_and_only_for_the_replica(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        postgres(replica_up={0: 1, 60: 0}, lags=({0: 0, 60: None}, {0: 0})),
        quiet("DatabaseReplicaDown", 66),  # pending: a replica's `for` is 10m
        firing("DatabaseReplicaDown", 71, alerted(REPLICAS[0]), value="0"),
        quiet("DatabaseDown", 4 * HOUR),
        # A replica that is down is not one that is up and not streaming.
        quiet("DatabasePostgresReplicaNotStreaming", 4 * HOUR),
    )


def test_exporter_down_fires_when_its_scrapes_fail(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        {series("up", PRIMARY): steps({0: 1, 60: 0})},
        quiet("DatabaseExporterDown", 70),  # pending: its `for` is 15m
        firing("DatabaseExporterDown", 76, alerted(PRIMARY), value="0"),
    )


def test_a_healthy_database_fires_nothing(tmp_path: Path) -> None:
    healthy = postgres() | {series("up", labels): steps({0: 1}) for labels in [PRIMARY, *REPLICAS]}
    names = [
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        if group["name"] == "databases"
        for rule in group["rules"]
    ]
    run_promtool_test(tmp_path, healthy, *(quiet(name, 4 * HOUR) for name in names))


# --- PostgreSQL replication ---------------------------------------------------------------------

DATABASE = {"namespace": "team-a", "database": "orders", "engine": "postgres"}


def test_postgres_replica_not_streaming_fires_when_a_replica_leaves_pg_stat_replication(
    tmp_path: Path,
) -> None:
    run_promtool_test(
        tmp_path,
        postgres(lags=({0: 0}, {0: 0, 60: None})),
        quiet("DatabasePostgresReplicaNotStreaming", 59),
        quiet("DatabasePostgresReplicaNotStreaming", 63),  # pending: its `for` is 5m
        firing("DatabasePostgresReplicaNotStreaming", 66, DATABASE, value="2"),
    )


def test_postgres_replica_not_streaming_fires_when_no_replica_streams(tmp_path: Path) -> None:
    """No row at all in pg_stat_replication: the primary serves no such series."""
    run_promtool_test(
        tmp_path,
        postgres(lags=({0: 0, 60: None}, {0: 0, 60: None})),
        firing("DatabasePostgresReplicaNotStreaming", 66, DATABASE, value="2"),
    )


def test_postgres_replica_not_streaming_is_quiet_while_the_primary_is_down(
    tmp_path: Path,
) -> None:
    run_promtool_test(
        tmp_path,
        postgres(primary_up={0: 1, 60: 0}, lags=({0: 0, 60: None}, {0: 0, 60: None})),
        quiet("DatabasePostgresReplicaNotStreaming", 4 * HOUR),
        firing("DatabaseDown", 66, alerted(PRIMARY), value="0"),
    )


def test_postgres_replication_lag_fires_for_the_replica_far_behind(tmp_path: Path) -> None:
    behind = 300 * 2**20
    run_promtool_test(
        tmp_path,
        postgres(lags=({0: 2**20, 60: behind}, {0: 0})),
        quiet("DatabasePostgresReplicationLag", 65),  # pending: its `for` is 10m
        firing(
            "DatabasePostgresReplicationLag",
            71,
            {**DATABASE, "application_name": "walreceiver", "client_addr": "10.1.0.6"},
            value=str(behind),
        ),
    )


def test_postgres_replication_lag_is_quiet_below_its_threshold(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        postgres(lags=({0: 100 * 2**20}, {0: 200 * 2**20})),
        quiet("DatabasePostgresReplicationLag", 4 * HOUR),
    )


# --- Redis replication --------------------------------------------------------------------------

REDIS_PRIMARY = pod("sessions-6f7a-abcde", "redis", "primary", "10.1.1.5") | {
    "database": "sessions"
}
REDIS_REPLICA = pod("sessions-replicas-9b2c-fghij", "redis", "replica", "10.1.1.6") | {
    "database": "sessions"
}
OFFSET = 5 * 2**30


def redis(
    *,
    link: dict[int, float | None] | None = None,
    primary_up: dict[int, float | None] | None = None,
    behind: dict[int, float | None] | None = None,
) -> Series:
    """A Redis primary and one replica; the replica trails the primary's offset by ``behind``."""
    slave = {**REDIS_PRIMARY, "slave_ip": "10.1.1.6", "slave_port": "6379", "slave_state": "online"}
    return {
        series("redis_up", REDIS_PRIMARY): steps(primary_up or {0: 1}),
        series("redis_up", REDIS_REPLICA): steps({0: 1}),
        series("redis_master_link_up", REDIS_REPLICA): steps(link or {0: 1}),
        series("redis_master_repl_offset", REDIS_PRIMARY): steps({0: OFFSET}),
        series("redis_connected_slave_offset_bytes", slave): steps(
            {minute: OFFSET - lag for minute, lag in (behind or {0: 0}).items() if lag is not None}
        ),
    }


def test_redis_replica_link_down_fires_while_the_primary_is_up(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        redis(link={0: 1, 60: 0}),
        quiet("DatabaseRedisReplicaLinkDown", 63),  # pending: its `for` is 5m
        firing("DatabaseRedisReplicaLinkDown", 66, alerted(REDIS_REPLICA), value="0"),
    )


def test_redis_replica_link_down_is_quiet_while_the_primary_is_down(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        redis(link={0: 1, 60: 0}, primary_up={0: 1, 60: 0}),
        quiet("DatabaseRedisReplicaLinkDown", 4 * HOUR),
        firing("DatabaseDown", 66, alerted(REDIS_PRIMARY), value="0"),
    )


def test_redis_replication_lag_fires_when_the_replica_trails_the_primarys_offset(
    tmp_path: Path,
) -> None:
    behind = 20 * 2**20
    run_promtool_test(
        tmp_path,
        redis(behind={0: 2**10, 60: behind}),
        quiet("DatabaseRedisReplicationLag", 65),  # pending: its `for` is 10m
        firing(
            "DatabaseRedisReplicationLag",
            71,
            {
                "namespace": "team-a",
                "database": "sessions",
                "engine": "redis",
                "slave_ip": "10.1.1.6",
                "slave_port": "6379",
            },
            value=str(behind),
        ),
    )
    run_promtool_test(
        tmp_path,
        redis(behind={0: 2**20}),
        quiet("DatabaseRedisReplicationLag", 4 * HOUR),
    )


# --- connections --------------------------------------------------------------------------------


def connections(variant: str, used: int) -> Series:
    """``used`` connections of a limit of 100 (Redis: 10,000) from minute 60; 10 % before."""
    engine = variant.removesuffix("-config")
    primary = pod("orders-7d9f-abcde", engine, "primary")
    if engine == "postgres":  # one series per database of the server, summed
        per_db = {
            series("pg_stat_database_numbackends", {**primary, "datname": name}): steps(
                {0: 5, 60: share}
            )
            for name, share in (("orders", used - used // 3), ("postgres", used // 3))
        }
        return per_db | {series("pg_settings_max_connections", primary): steps({0: 100})}
    if engine == "mysql":
        return {
            series("mysql_global_status_threads_connected", primary): steps({0: 10, 60: used}),
            series("mysql_global_variables_max_connections", primary): steps({0: 100}),
        }
    # maxclients as the exporter's script reads it; "redis-config": as CONFIG GET did, in a
    # pod an earlier release made.
    limit = (
        series("redis_config_maxclients", primary)
        if variant == "redis-config"
        else series("redis_script_values", {**primary, "key": "maxclients"})
    )
    return {
        series("redis_connected_clients", primary): steps({0: 1000, 60: used * 100}),
        limit: steps({0: 10000}),
    }


@pytest.mark.parametrize("variant", ["postgres", "mysql", "redis", "redis-config"])
def test_connections_near_limit_fires_above_eighty_percent(tmp_path: Path, variant: str) -> None:
    primary = alerted(pod("orders-7d9f-abcde", variant.removesuffix("-config"), "primary"))
    run_promtool_test(
        tmp_path,
        connections(variant, 90),
        quiet("DatabaseConnectionsNearLimit", 59),
        quiet("DatabaseConnectionsNearLimit", 65),  # pending: its `for` is 10m
        firing("DatabaseConnectionsNearLimit", 71, primary, value="0.9"),
    )
    run_promtool_test(
        tmp_path,
        connections(variant, 75),
        quiet("DatabaseConnectionsNearLimit", 4 * HOUR),
    )
