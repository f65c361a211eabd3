"""The operator's Prometheus alerts: the one source of the PrometheusRule the project ships
(config/prometheus, the chart's files/prometheus-rules.yaml) and of the suggested alerts in
docs/operations.md, all written by `make manifests`.

Severities are labels a team routes by: ``critical`` pages (nothing reconciles; a Database has
no recent backup to restore), ``warning`` waits for working hours.

The backup alerts read the per-Database gauges of metrics.py, each taken once per Database
(``max by (namespace, database)``): the newest of what the scraped replicas say (a standby that
was active keeps its last values), without the scrape's labels (instance, pod), so a failover
neither splits an alert in two nor restarts its ``for``.

- ``DatabaseBackupTooOld``: a Database with a schedule (its period gauge is present: not
  suspended) whose newest successful backup is older than two periods, the Database's
  ``NoRecentBackup``. A schedule whose backups have never succeeded has no success to age: it
  fires once they have failed and none completed (its second branch). The gauges cannot say
  since when such a schedule runs (the condition counts from its first scheduled backup), and
  a Database with no restorable backup whose backups fail is worth a page before two periods
  are up. A new Database whose first backup has not finished (neither timestamp) does not
  fire: nothing has gone wrong yet; a backup that never finishes shows as ``NoRecentBackup``
  on the Database, not here.
- ``DatabaseBackupFailed``: the newest backup of a Database failed (its failure is newer than
  its newest success, or it has failures and no success), the Database's ``LastBackupFailed``;
  a later success resolves it.

The database alerts (group ``databases``) read what the engines' exporters serve, scraped by the
PodMonitor with the labels of docs/operations.md (Monitoring the databases): ``namespace``,
``pod``, ``database``, ``engine``, ``role`` and the fixed ``job`` DATABASES_JOB, which every
expression selects so that other exporters of the cluster page no one here. Each keeps the
labels naming what is wrong (``max by``: without the scrape's ``instance``) and says so in its
summary. The replication alerts are quiet while their primary is down (DatabaseDown names that).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from database_operator.manifest import Manifest

Rule = dict[str, Any]
Group = dict[str, Any]

#: How long a backup alert's condition must hold before it fires: a blip (a scrape as a backup
#: completes) is no page, and both are short beside the period of any sensible schedule. The
#: per-Database gauges are absent from an operator's start until it has reconciled the
#: Database, so a restart resolves a firing alert, which fires again after its ``for``.
BACKUP_TOO_OLD_FOR = "10m"
BACKUP_FAILED_FOR = "5m"

_SUCCESS = "database_operator_backup_last_success_timestamp_seconds"
_FAILURE = "database_operator_backup_last_failure_timestamp_seconds"
_PERIOD = "database_operator_backup_schedule_period_seconds"


def _per_database(metric: str) -> str:
    return f"max by (namespace, database) ({metric})"


SUCCESS, FAILURE, PERIOD = (_per_database(metric) for metric in (_SUCCESS, _FAILURE, _PERIOD))

BACKUP_TOO_OLD = f"""\
(
  time() - {SUCCESS}
  > 2 * {PERIOD}
)
or
(
  {PERIOD}
  and {FAILURE}
  unless {SUCCESS}
)"""

BACKUP_FAILED = f"""\
(
  {FAILURE}
  > {SUCCESS}
)
or
(
  {FAILURE}
  unless {SUCCESS}
)"""

#: The ``job`` label of every database series (the PodMonitor's relabelings set it).
DATABASES_JOB = "database-operator-databases"
_JOB = f'job="{DATABASES_JOB}"'
#: The labels an alert about one database pod keeps.
_POD = "namespace, database, engine, role, pod"
_UP = '__name__=~"pg_up|mysql_up|redis_up"'

#: A primary's engine that has not answered its exporter for this long is down, not restarting:
#: the engines start in seconds, and a liveness probe restarts a hung one sooner.
DATABASE_DOWN_FOR = "5m"
#: A replica is given longer: a PostgreSQL replica clones its primary at every start, without
#: answering until the copy is done (minutes for a few GiB), and reads are still served.
REPLICA_DOWN_FOR = "10m"
#: An exporter scraped in vain this long: its Database's alerts are blind meanwhile.
EXPORTER_DOWN_FOR = "15m"
#: A replica up but not replicating this long: a restarted primary is reconnected to within
#: seconds (walreceiver and replicaof retry every few), a Redis full sync of a few GiB in minutes.
REPLICATION_BROKEN_FOR = "5m"
#: How far (bytes of WAL yet to replay) a PostgreSQL replica may trail its primary: 16 WAL
#: segments. Without a replication slot or wal_keep_size the primary keeps only about
#: max_wal_size (1 GiB by default) of WAL; a replica that stays this far behind for
#: REPLICATION_LAG_FOR is not catching up and warns before that WAL is recycled under it.
POSTGRES_REPLICATION_LAG_BYTES = 256 * 2**20
#: How far (bytes of the replication stream) a Redis replica may trail its primary. A replica
#: acknowledges its offset every second, so a healthy one trails by a second's writes; 16 MiB
#: is many times Redis' default 1 MiB backlog, past which a dropped link means a full resync.
REDIS_REPLICATION_LAG_BYTES = 16 * 2**20
REPLICATION_LAG_FOR = "10m"
#: The share of an engine's connection limit (PostgreSQL max_connections, MySQL
#: max_connections, Redis maxclients) in use that warns before new connections are refused,
#: held long enough that a burst of a pool opening is not a page.
CONNECTIONS_NEAR_LIMIT = 0.8
CONNECTIONS_NEAR_LIMIT_FOR = "10m"
#: How long Databases may stay out of Active (Pending, Degraded, Failed: not Deleting) before
#: anyone looks: a new Database or a rollout is Active within a minute or two unless the image
#: is pulled slowly, and a restore takes the time of its download.
NOT_READY_FOR = "10m"
#: Databases waiting in the operator's work queue. Resyncs are spread over the period and a
#: reconcile takes milliseconds (README, Performance), so a healthy queue is all but empty
#: between bursts (a restart resumes 1,000 Databases in about 10 s); this many still waiting at
#: every evaluation for WORKQUEUE_BACKLOG_FOR is an operator that falls behind.
WORKQUEUE_BACKLOG = 100
WORKQUEUE_BACKLOG_FOR = "10m"

DATABASE_DOWN, REPLICA_DOWN = (
    f"""\
max by ({_POD}) (
  {{{_UP},{_JOB},role="{role}"}}
) == 0"""
    for role in ("primary", "replica")
)

EXPORTER_DOWN = f"""\
max by ({_POD}) (up{{{_JOB}}}) == 0"""

#: The primary's exporter serves one pg_stat_replication series per connected replica; with
#: none (no series at all) it counts 0 while the primary itself is up.
POSTGRES_REPLICA_NOT_STREAMING = f"""\
count by (namespace, database, engine) (pg_up{{{_JOB},role="replica"}} == 1)
>
(
  count by (namespace, database, engine) (
    pg_stat_replication_pg_wal_lsn_diff{{{_JOB},role="primary",state="streaming"}}
  )
  or
  0 * count by (namespace, database, engine) (pg_up{{{_JOB},role="primary"}} == 1)
)"""

POSTGRES_REPLICATION_LAG = f"""\
max by (namespace, database, engine, application_name, client_addr) (
  pg_stat_replication_pg_wal_lsn_diff{{{_JOB},role="primary"}}
) > {POSTGRES_REPLICATION_LAG_BYTES}"""

_REDIS_PRIMARY_DOWN = f"""\
unless on (namespace, database)
  max by (namespace, database) (redis_up{{{_JOB},role="primary"}}) == 0"""

REDIS_REPLICA_LINK_DOWN = f"""\
max by ({_POD}) (redis_master_link_up{{{_JOB},role="replica"}}) == 0
{_REDIS_PRIMARY_DOWN}"""

REDIS_REPLICATION_LAG = f"""\
max by (namespace, database, engine, slave_ip, slave_port) (
  redis_master_repl_offset{{{_JOB},role="primary"}}
  - on (namespace, pod) group_right
  redis_connected_slave_offset_bytes{{{_JOB},role="primary"}}
) > {REDIS_REPLICATION_LAG_BYTES}"""


def _share(used: str, *limits: str, total: bool = False) -> str:
    """``used`` over the first of ``limits`` a pod has, per database pod (``total``: ``used``
    summed over its series). A limit may carry matchers of its own: ``name{label="value"}``."""

    def selected(series: str) -> str:
        name, _, matchers = series.partition("{")
        return f"{name}{{{matchers.rstrip('}') + ', ' if matchers else ''}{_JOB}}}"

    limit = " or ".join(f"max by ({_POD}) ({selected(series)})" for series in limits)
    return (
        f"  {'sum' if total else 'max'} by ({_POD}) ({selected(used)})\n"
        f"  / {f'({limit})' if len(limits) > 1 else limit}"
    )


#: Redis's maxclients, as its exporter's script reads it from INFO (the exporter's user may not
#: run CONFIG); a pod that an earlier release made still has CONFIG's.
REDIS_MAXCLIENTS = 'redis_script_values{key="maxclients"}'
CONNECTIONS_IN_USE = f"""\
(
{_share("pg_stat_database_numbackends", "pg_settings_max_connections", total=True)}
  or
{_share("mysql_global_status_threads_connected", "mysql_global_variables_max_connections")}
  or
{_share("redis_connected_clients", REDIS_MAXCLIENTS, "redis_config_maxclients")}
) > {CONNECTIONS_NEAR_LIMIT}"""

#: Counted by the active replica(s) only: a standby serves the phases it last saw while it led.
#: By namespace once the gauge has the label (without it, the scrape's: the operator's).
DATABASES_NOT_READY = """\
sum by (namespace) (
  database_operator_databases{phase!~"Active|Deleting"}
  and on (job, instance) (database_operator_active == 1)
) > 0"""


def databases_in_phase(phase: str) -> str:
    """How many Databases the leading replica last saw in ``phase``, per namespace (a standby's
    gauge keeps what it saw while it led)."""
    return f"""\
sum by (namespace) (
  database_operator_databases{{phase="{phase}"}}
  and on (job, instance) (database_operator_active == 1)
) > 0"""


WORKQUEUE_DEPTH = f"database_operator_workqueue_depth > {WORKQUEUE_BACKLOG}"

#: What an alert about one Database names in its summary.
DATABASE = "{{ $labels.namespace }}/{{ $labels.database }}"
#: Its DatabaseBackups, for the first command to run.
BACKUPS = (
    "kubectl get dbbackup -n {{ $labels.namespace }}"
    " -l databases.example.com/database={{ $labels.database }}"
)


def _alert(
    name: str,
    expr: str,
    severity: str,
    summary: str,
    *,
    runbook: str,
    duration: str | None = None,
    description: str | None = None,
) -> Rule:
    rule: Rule = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    annotations = {"summary": summary}
    if description:
        annotations["description"] = description
    annotations["runbook_url"] = runbook
    return {**rule, "labels": {"severity": severity}, "annotations": annotations}


def groups(docs: str) -> list[Group]:
    """The rule groups; ``runbook_url`` points into ``docs``, the address of
    docs/operations.md (where it is published is the caller's to know)."""
    operator = [
        _alert(
            "DatabaseOperatorDown",
            f'absent(up{{job=~".*database-operator.*",job!="{DATABASES_JOB}"}} == 1)',
            "critical",
            "no database-operator replica is up: Databases are not reconciled and, with the "
            "webhooks on, Database writes are refused",
            duration="5m",
            runbook=f"{docs}#admission-and-conversion-webhooks",
        ),
        _alert(
            "DatabaseFailed",
            databases_in_phase("Failed"),
            "warning",
            "{{ $value }} Database(s) in {{ $labels.namespace }} cannot be acted on: kubectl "
            "get db -n {{ $labels.namespace }}; see the Ready condition's reason",
            duration="10m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseDegraded",
            databases_in_phase("Degraded"),
            "warning",
            "{{ $value }} Database(s) in {{ $labels.namespace }} lost pods or cannot be "
            "reconciled: kubectl get db -n {{ $labels.namespace }}; see the Degraded "
            "condition's reason",
            duration="15m",
            runbook=f"{docs}#replicas-and-failover",
        ),
        _alert(
            "DatabaseOperatorReconcileErrors",
            'rate(database_operator_reconciles_total{result="error"}[10m]) > 0.1',
            "warning",
            "reconciles keep failing on API errors: the ReconcileError condition and the "
            "operator's `reconcile failed` log lines name the call",
            duration="15m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseOperatorApiErrors",
            "sum by (code) (rate(database_operator_api_errors_total[10m])) > 0.1",
            "warning",
            "the API server keeps answering the operator with {{ $labels.code }}",
            duration="15m",
            runbook=f"{docs}#troubleshooting-by-condition-reason",
        ),
        _alert(
            "DatabaseOperatorSlowReconciles",
            "histogram_quantile(0.99, rate(database_operator_reconcile_duration_seconds_bucket"
            "[10m])) > 5",
            "warning",
            "one reconcile in a hundred takes more than 5 s: a slow API server, or too few "
            "workers or shards for the Databases watched",
            duration="30m",
            runbook=f"{docs}#scale-and-sharding",
        ),
        _alert(
            "DatabaseDriftKeepsComingBack",
            "sum by (kind) (increase(database_operator_drift_corrections_total[1h])) > 10",
            "warning",
            "something else keeps changing the Databases' {{ $labels.kind }} children, and the "
            "operator keeps changing them back",
            runbook=f"{docs}#what-the-operator-touches-and-what-it-never-does",
        ),
        _alert(
            "DatabaseOperatorNoActiveReplica",
            "max(database_operator_active) == 0",
            "critical",
            "no operator replica leads: kubectl get lease -n <operator namespace> "
            "database-operator -o jsonpath='{.spec.holderIdentity}'",
            duration="5m",
            description="Every replica stands by: none can take or renew the Lease (the API "
            "server out of reach, or the Lease's Role missing), or something else holds it "
            "(another release with the same Lease name). Nothing reconciles. With shards, each "
            "shard's Deployment has its own Lease and leader.",
            runbook=f"{docs}#high-availability",
        ),
        _alert(
            "DatabaseOperatorTracesDropped",
            "sum by (reason) (rate(database_operator_trace_spans_dropped_total[15m])) > 0",
            "warning",
            "traces are lost ({{ $labels.reason }}): is the OTLP collector up and reachable?",
            duration="30m",
            runbook=f"{docs}#traces",
        ),
        _alert(
            "DatabaseNotReady",
            DATABASES_NOT_READY,
            "warning",
            "{{ $value }} Database(s) in {{ $labels.namespace }} have not been Active for "
            "10 minutes",
            duration=NOT_READY_FOR,
            description="They are Pending (creating, rolling out, restoring), Degraded or "
            "Failed: kubectl get db -n {{ $labels.namespace }}; the Ready and Degraded "
            "conditions' reasons say why. docs/operations.md, section DatabaseNotReady.",
            runbook=f"{docs}#databasenotready",
        ),
        _alert(
            "DatabaseOperatorWorkqueueBacklog",
            WORKQUEUE_DEPTH,
            "warning",
            "{{ $value }} Databases wait to be reconciled by {{ $labels.instance }}: the "
            "operator falls behind",
            duration=WORKQUEUE_BACKLOG_FOR,
            description=f"More than {WORKQUEUE_BACKLOG} Databases have waited in the work "
            "queue for 10 minutes: changes reach the Databases late. Too few workers or shards "
            "for the Databases watched, or a slow API server. docs/operations.md, section "
            "DatabaseOperatorWorkqueueBacklog.",
            runbook=f"{docs}#databaseoperatorworkqueuebacklog",
        ),
        _alert(
            "DatabaseWithoutPrimary",
            "database_operator_database_primaries == 0",
            "critical",
            "Database {{ $labels.namespace }}/{{ $labels.name }} has no instance that accepts "
            "writes: kubectl get db -n {{ $labels.namespace }} {{ $labels.name }} "
            "-o jsonpath='{.status.instances}'",
            duration="1m",
            description="spec.failover: no instance's engine answers as the primary. A "
            "failover takes seconds; one that cannot happen (every replica too far behind, or "
            "the old primary's pod cannot be stopped on an unreachable node) leaves it so: "
            "see the Database's Events (FailoverImpossible).",
            runbook=f"{docs}#instances-and-failover",
        ),
        _alert(
            "DatabaseTwoPrimaries",
            "database_operator_database_primaries > 1",
            "critical",
            "Database {{ $labels.namespace }}/{{ $labels.name }} has {{ $value }} instances "
            "that accept writes",
            duration="1m",
            description="spec.failover: more than one instance's engine answers as a primary. "
            "The operator fences (stops) every one but the target primary; this lasting means "
            "it cannot: its pods cannot be deleted, or the operator does not run.",
            runbook=f"{docs}#instances-and-failover",
        ),
    ]
    backups = [
        _alert(
            "DatabaseBackupTooOld",
            BACKUP_TOO_OLD,
            "critical",
            f"{DATABASE} has no backup completed within two periods of its schedule",
            duration=BACKUP_TOO_OLD_FOR,
            description="Its newest successful backup is older than two periods of "
            "spec.backup.schedule, or its scheduled backups fail and none ever completed: "
            f"there may be no recent backup to restore. {BACKUPS}; docs/operations.md, "
            "section Backups (The backup alerts).",
            runbook=f"{docs}#the-backup-alerts",
        ),
        _alert(
            "DatabaseBackupFailed",
            BACKUP_FAILED,
            "warning",
            f"the newest backup of {DATABASE} failed",
            duration=BACKUP_FAILED_FOR,
            description="A backup failed after its newest successful one, or none has ever "
            "succeeded. The next one may succeed; with a schedule, DatabaseBackupTooOld pages "
            f"when none does within two periods. {BACKUPS}; docs/operations.md, section "
            "Backups (The backup alerts).",
            runbook=f"{docs}#the-backup-alerts",
        ),
    ]
    return [
        {"name": "database-operator", "rules": operator},
        {"name": "database-backups", "rules": backups},
        {"name": "databases", "rules": database_rules(docs)},
    ]


#: What an alert about one database pod names in its summary.
POD = "{{ $labels.engine }} {{ $labels.role }} {{ $labels.pod }} of " + DATABASE


def database_rules(docs: str) -> list[Rule]:
    """The alerts on what the databases' exporters serve; runbooks in docs/operations.md,
    section Monitoring the databases, one per alert."""
    return [
        _alert(
            "DatabaseDown",
            DATABASE_DOWN,
            "critical",
            f"the {POD} is down",
            duration=DATABASE_DOWN_FOR,
            description="Its exporter has not reached the engine for 5 minutes: writes to the "
            "Database fail. kubectl get pods -n {{ $labels.namespace }} -l "
            "app.kubernetes.io/instance={{ $labels.database }}; docs/operations.md, section "
            "DatabaseDown.",
            runbook=f"{docs}#databasedown",
        ),
        _alert(
            "DatabaseReplicaDown",
            REPLICA_DOWN,
            "warning",
            f"the {POD} is down",
            duration=REPLICA_DOWN_FOR,
            description="Its exporter has not reached the engine for 10 minutes: the read "
            "Service has one replica fewer (a PostgreSQL replica still cloning its primary "
            "looks the same). docs/operations.md, section DatabaseReplicaDown.",
            runbook=f"{docs}#databasereplicadown",
        ),
        _alert(
            "DatabaseExporterDown",
            EXPORTER_DOWN,
            "warning",
            f"the metrics of the {POD} cannot be scraped",
            duration=EXPORTER_DOWN_FOR,
            description="Prometheus has failed to scrape its metrics-exporter container for "
            "15 minutes: the Database's other alerts cannot see it. docs/operations.md, "
            "section DatabaseExporterDown.",
            runbook=f"{docs}#databaseexporterdown",
        ),
        _alert(
            "DatabasePostgresReplicaNotStreaming",
            POSTGRES_REPLICA_NOT_STREAMING,
            "warning",
            f"a read replica of {DATABASE} is up but does not stream from its primary",
            duration=REPLICATION_BROKEN_FOR,
            description="{{ $value }} replica(s) answer, and fewer are streaming in the "
            "primary's pg_stat_replication: the others serve reads that grow older. "
            "docs/operations.md, section DatabasePostgresReplicaNotStreaming.",
            runbook=f"{docs}#databasepostgresreplicanotstreaming",
        ),
        _alert(
            "DatabasePostgresReplicationLag",
            POSTGRES_REPLICATION_LAG,
            "warning",
            f"the read replica at {{{{ $labels.client_addr }}}} of {DATABASE} is "
            "{{ $value | humanize1024 }}B of WAL behind its primary",
            duration=REPLICATION_LAG_FOR,
            description=f"More than {POSTGRES_REPLICATION_LAG_BYTES // 2**20} MiB of WAL yet to "
            "replay for 10 minutes: it is not catching up, and its reads are that far behind. "
            "docs/operations.md, section DatabasePostgresReplicationLag.",
            runbook=f"{docs}#databasepostgresreplicationlag",
        ),
        _alert(
            "DatabaseRedisReplicaLinkDown",
            REDIS_REPLICA_LINK_DOWN,
            "warning",
            f"the {POD} has lost its link to the primary",
            duration=REPLICATION_BROKEN_FOR,
            description="master_link_status has been down for 5 minutes while the primary is "
            "up: the replica serves reads that grow older, or is still in a full sync. "
            "docs/operations.md, section DatabaseRedisReplicaLinkDown.",
            runbook=f"{docs}#databaseredisreplicalinkdown",
        ),
        _alert(
            "DatabaseRedisReplicationLag",
            REDIS_REPLICATION_LAG,
            "warning",
            f"the read replica at {{{{ $labels.slave_ip }}}} of {DATABASE} is "
            "{{ $value | humanize1024 }}B behind its primary",
            duration=REPLICATION_LAG_FOR,
            description=f"Its acknowledged offset has trailed the primary's by more than "
            f"{REDIS_REPLICATION_LAG_BYTES // 2**20} MiB for 10 minutes. docs/operations.md, "
            "section DatabaseRedisReplicationLag.",
            runbook=f"{docs}#databaseredisreplicationlag",
        ),
        _alert(
            "DatabaseConnectionsNearLimit",
            CONNECTIONS_IN_USE,
            "warning",
            f"the {POD} uses {{{{ $value | humanizePercentage }}}} of its connection limit",
            duration=CONNECTIONS_NEAR_LIMIT_FOR,
            description=f"More than {CONNECTIONS_NEAR_LIMIT:.0%} of max_connections "
            "(Redis: maxclients) for 10 minutes: new connections will soon be refused. "
            "docs/operations.md, section DatabaseConnectionsNearLimit.",
            runbook=f"{docs}#databaseconnectionsnearlimit",
        ),
    ]


def prometheus_rule(name: str, namespace: str, labels: Mapping[str, str], docs: str) -> Manifest:
    """The Prometheus Operator's PrometheusRule (monitoring.coreos.com/v1) of `groups`."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"groups": groups(docs)},
    }
