"""The project's two Grafana dashboards, as Grafana's (classic) dashboard JSON model: the one
source of the chart's files/dashboards/*.json and config/grafana/*.json (`make manifests`).

- "Database operator" (``database-operator``): what the operator does — reconciles by result
  and failures by reason, reconcile latency, its work queue, the Databases by phase and
  namespace, webhook latency, watch restarts, API errors, which replica leads, and backups.
- "Databases" (``database-operator-databases``): what the databases do, from the exporter
  sidecars (spec.monitoring) — up, connections against the maximum, replication lag,
  queries per second, memory and data size, for PostgreSQL, MySQL and Redis alike.

Both pick their Prometheus with a ``datasource`` variable (no data source uid is baked in) and
filter by ``namespace`` and ``database`` variables (multi-select, "All" by default). Queries use
``$__rate_interval``, so a rate always spans enough scrapes whatever the scrape interval. The
database series carry the labels the PodMonitor's relabelings give them (namespace, pod,
database, engine, role; job ``database-operator-databases``); the operator's own series are
selected by their ``database_operator_`` names, whatever the job of the ServiceMonitor.

Every panel is a ``timeseries`` or a ``stat``; helm/database-operator/files/dashboards/
dashboard.schema.json describes the fields used here (tests/unit/test_dashboards.py checks both
dashboards against it), and tests/integration/test_dashboards.py runs every query against a real
Prometheus scraping a real operator and real exporters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Dashboard = dict[str, Any]
Panel = dict[str, Any]

#: Grafana 10.4/11's dashboard schema version: what the fields below are written for.
SCHEMA_VERSION = 39
#: Grafana's grid is 24 columns wide.
GRID_WIDTH = 24
OPERATOR_UID = "database-operator"
DATABASES_UID = "database-operator-databases"
#: The PodMonitor's job label of the exporters' series (the contract of issue 25).
DATABASES_JOB = "database-operator-databases"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TAGS = ["database-operator"]

#: The selector of one Database's exporter series, by the dashboard's variables.
DB = f'job="{DATABASES_JOB}", namespace=~"$namespace", database=~"$database"'
#: The operator's per-Database series (Databases by phase, backups), by the same variables.
OPERATOR_NS = 'namespace=~"$namespace"'
OPERATOR_DB = 'namespace=~"$namespace", database=~"$database"'
#: Only the active replica's view of the Databases: a standby's last-known phases are stale.
ACTIVE = "and on (instance) (database_operator_active == 1)"


@dataclass(frozen=True)
class Query:
    """One target: a PromQL expression and its legend (Grafana's ``{{label}}`` template)."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Spec:
    """A panel before layout: its kind, title, unit, queries and size on the grid."""

    title: str
    queries: Sequence[Query]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    height: int = 8
    description: str = ""
    #: Stat panels: values from this one on are red (None: always green).
    red_from: float | None = None
    min: float | None = 0
    extra: dict[str, Any] = field(default_factory=dict)


def stat(title: str, expr: str, unit: str = "short", **kwargs: Any) -> Spec:
    return Spec(title, [Query(expr)], unit, kind="stat", width=6, height=4, **kwargs)


def quantiles(histogram: str, by: str = "", legend: str = "") -> list[Query]:
    """p50 and p99 of a histogram over the rate interval (``by``: labels kept besides le)."""
    keep = f"le, {by}" if by else "le"
    rate = f"sum by ({keep}) (rate({histogram}_bucket[$__rate_interval]))"
    prefix = f"{legend} " if legend else ""
    return [
        Query(f"histogram_quantile({q}, {rate})", f"{prefix}p{int(q * 100)}") for q in (0.5, 0.99)
    ]


def _target(ref: int, query: Query) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": query.expr,
        "legendFormat": query.legend or "__auto",
        "range": True,
        "refId": chr(ord("A") + ref),
    }


def _options(spec: Spec) -> dict[str, Any]:
    if spec.kind == "stat":
        return {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        }
    return {
        "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _field_config(spec: Spec) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if spec.red_from is not None:
        steps.append({"color": "red", "value": spec.red_from})
    defaults: dict[str, Any] = {
        "unit": spec.unit,
        "thresholds": {"mode": "absolute", "steps": steps},
    }
    if spec.min is not None:
        defaults["min"] = spec.min
    return {"defaults": defaults | spec.extra, "overrides": []}


def layout(specs: Sequence[Spec]) -> list[Panel]:
    """Panels from ``specs``, placed left to right in rows of the grid's width (a panel that
    does not fit starts the next row, below the tallest of the row), with ids from 1."""
    panels = []
    x = y = row_height = 0
    for number, spec in enumerate(specs, start=1):
        if x + spec.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        panel: Panel = {
            "datasource": DATASOURCE,
            "fieldConfig": _field_config(spec),
            "gridPos": {"h": spec.height, "w": spec.width, "x": x, "y": y},
            "id": number,
            "options": _options(spec),
            "targets": [_target(ref, query) for ref, query in enumerate(spec.queries)],
            "title": spec.title,
            "type": spec.kind,
        }
        if spec.description:
            panel["description"] = spec.description
        panels.append(panel)
        x += spec.width
        row_height = max(row_height, spec.height)
    return panels


def datasource_variable() -> dict[str, Any]:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "type": "datasource",
    }


def query_variable(name: str, label: str, selector: str) -> dict[str, Any]:
    """A multi-select of the values of label ``name`` on the series of ``selector`` ("All":
    any value, ``.*``), read again whenever the time range changes."""
    definition = f"label_values({selector}, {name})"
    return {
        "allValue": ".*",
        "current": {},
        "datasource": DATASOURCE,
        "definition": definition,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "options": [],
        "query": definition,
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "type": "query",
    }


def dashboard(
    uid: str, title: str, description: str, variables: list[Any], specs: Sequence[Spec]
) -> Dashboard:
    return {
        "annotations": {"list": []},
        "description": description,
        "editable": True,
        "graphTooltip": 1,
        "links": [],
        "panels": layout(specs),
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": TAGS,
        "templating": {"list": [datasource_variable(), *variables]},
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
    }


# --- the operator ---------------------------------------------------------------------------------


def operator_dashboard() -> Dashboard:
    """ "Database operator": the operator's own metrics (operator/database_operator/metrics.py)."""
    databases = f"database_operator_databases{{{OPERATOR_NS}}} {ACTIVE}"
    specs = [
        stat(
            "Active replicas",
            "sum(database_operator_active)",
            description="Replicas that hold the Lease and reconcile: 1 (0: nothing reconciles).",
            red_from=None,
        ),
        stat("Databases", f"sum({databases})"),
        stat(
            "Databases not Active",
            f'sum(database_operator_databases{{{OPERATOR_NS}, phase!="Active"}} {ACTIVE})',
            red_from=1,
        ),
        stat(
            "Reconcile errors",
            'sum(increase(database_operator_reconciles_total{result="error"}[$__range]))',
            description="Reconciles that ended in an API failure over the dashboard's range.",
            red_from=1,
        ),
        Spec(
            "Reconciles by result",
            [
                Query(
                    "sum by (result) (rate(database_operator_reconciles_total[$__rate_interval]))",
                    "{{result}}",
                )
            ],
            "ops",
        ),
        Spec(
            "Reconcile failures by reason",
            [
                Query(
                    "sum by (reason) "
                    "(rate(database_operator_reconcile_failures_total[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            "ops",
            description="Reconciles that ended Failed or Degraded, or in error, by the "
            "condition's reason (docs/operations.md explains each).",
        ),
        Spec(
            "Reconcile latency",
            quantiles("database_operator_reconcile_duration_seconds"),
            "s",
        ),
        Spec(
            "Work queue",
            [Query("sum(database_operator_workqueue_depth)", "waiting")],
            description="Databases waiting for a worker.",
        ),
        Spec(
            "Work queue wait",
            quantiles("database_operator_workqueue_wait_seconds"),
            "s",
            description="Time from a Database's enqueue to the start of its reconcile.",
        ),
        Spec(
            "Databases by phase",
            [Query(f"sum by (phase) ({databases})", "{{phase}}")],
        ),
        Spec(
            "Databases by namespace",
            [Query(f"sum by (namespace) ({databases})", "{{namespace}}")],
        ),
        Spec(
            "Webhook latency",
            quantiles("database_operator_webhook_duration_seconds", "webhook", "{{webhook}}"),
            "s",
        ),
        Spec(
            "Watch restarts",
            [
                Query(
                    "sum by (resource) "
                    "(increase(database_operator_watch_restarts_total[$__rate_interval]))",
                    "{{resource}}",
                )
            ],
            description="Watches started again after they ended or failed (an API server "
            "outage, CRDs re-created).",
        ),
        Spec(
            "API errors by code",
            [
                Query(
                    "sum by (code) (rate(database_operator_api_errors_total[$__rate_interval]))",
                    "{{code}}",
                )
            ],
            "ops",
            description="Failed Kubernetes API calls by HTTP status (0: no answer).",
        ),
        Spec(
            "Leader",
            [Query("database_operator_active", "{{instance}}")],
            description="1 on the replica that holds the Lease, 0 on those standing by.",
            extra={"max": 1},
        ),
        Spec(
            "Backup age",
            [
                Query(
                    "time() - max by (namespace, database) "
                    f"(database_operator_backup_last_success_timestamp_seconds{{{OPERATOR_DB}}})",
                    "{{namespace}}/{{database}}",
                )
            ],
            "s",
            description="Time since each Database's newest successful backup.",
        ),
        Spec(
            "Backup schedule period",
            [
                Query(
                    "max by (namespace, database) "
                    f"(database_operator_backup_schedule_period_seconds{{{OPERATOR_DB}}})",
                    "{{namespace}}/{{database}}",
                )
            ],
            "s",
            description="Alerts fire when a backup is older than two periods.",
        ),
        Spec(
            "Backup failures by reason",
            [
                Query(
                    "sum by (reason) "
                    "(increase(database_operator_backup_failures_total[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
        ),
        Spec(
            "Backup duration",
            quantiles("database_operator_backup_duration_seconds", "engine", "{{engine}}"),
            "s",
        ),
    ]
    variables = [
        query_variable("namespace", "Namespace", "database_operator_databases"),
        query_variable(
            "database",
            "Database (backups)",
            '{__name__=~"database_operator_backup_.+_seconds", namespace=~"$namespace"}',
        ),
    ]
    return dashboard(
        OPERATOR_UID,
        "Database operator",
        "The database operator's reconciles, work queue, webhooks, watches, leader and backups.",
        variables,
        specs,
    )


# --- the databases --------------------------------------------------------------------------------

#: Per pod (a Database's primary and replicas each have an exporter).
POD = "namespace, database, pod"
POD_LEGEND = "{{database}} {{pod}}"


def _by_engine(postgres: str, mysql: str, redis: str) -> list[Query]:
    """One query per engine, each legend naming the engine."""
    return [
        Query(postgres, f"postgres {POD_LEGEND}"),
        Query(mysql, f"mysql {POD_LEGEND}"),
        Query(redis, f"redis {POD_LEGEND}"),
    ]


def _rate(metric: str) -> str:
    return f"rate({metric}{{{DB}}}[$__rate_interval])"


def databases_dashboard() -> Dashboard:
    """ "Databases": the exporter sidecars' metrics of every monitored Database."""
    specs = [
        Spec(
            "Up",
            _by_engine(f"pg_up{{{DB}}}", f"mysql_up{{{DB}}}", f"redis_up{{{DB}}}"),
            description="1 while the exporter reaches its database server, 0 when it cannot.",
            extra={"max": 1},
        ),
        Spec(
            "Connections used of max",
            _by_engine(
                f"sum by ({POD}) (pg_stat_database_numbackends{{{DB}}}) / on ({POD}) "
                f"max by ({POD}) (pg_settings_max_connections{{{DB}}})",
                f"mysql_global_status_threads_connected{{{DB}}} / on ({POD}) "
                f"mysql_global_variables_max_connections{{{DB}}}",
                f"redis_connected_clients{{{DB}}} / on ({POD}) max by ({POD}) "
                f'(redis_script_values{{{DB}, key="maxclients"}} '
                f"or redis_config_maxclients{{{DB}}})",
            ),
            "percentunit",
            extra={"max": 1},
        ),
        Spec(
            "Connections",
            _by_engine(
                f"sum by ({POD}) (pg_stat_database_numbackends{{{DB}}})",
                f"mysql_global_status_threads_connected{{{DB}}}",
                f"redis_connected_clients{{{DB}}}",
            ),
        ),
        Spec(
            "Queries per second",
            _by_engine(
                f"sum by ({POD}) ({_rate('pg_stat_database_xact_commit')} + "
                f"{_rate('pg_stat_database_xact_rollback')})",
                _rate("mysql_global_status_queries"),
                _rate("redis_commands_processed_total"),
            ),
            "ops",
            description="PostgreSQL: transactions committed and rolled back; MySQL: "
            "statements; Redis: commands.",
        ),
        Spec(
            "PostgreSQL replication lag",
            [
                Query(
                    "max by (namespace, database, application_name, state) "
                    f'(pg_stat_replication_pg_wal_lsn_diff{{{DB}, role="primary"}})',
                    "{{database}} {{application_name}} ({{state}})",
                )
            ],
            "bytes",
            description="WAL each replica has yet to replay, as its primary sees it (a "
            "replica missing here is not streaming).",
        ),
        Spec(
            "Redis replication lag",
            [
                Query(
                    f'redis_master_repl_offset{{{DB}, role="primary"}} - on (instance) '
                    f"group_right () redis_connected_slave_offset_bytes{{{DB}}}",
                    "{{database}} {{slave_ip}}:{{slave_port}}",
                )
            ],
            "bytes",
            description="Replication stream each replica has yet to acknowledge, as its "
            "primary sees it.",
        ),
        Spec(
            "Redis replicas: link to the primary",
            [Query(f"redis_master_link_up{{{DB}}}", POD_LEGEND)],
            description="1 while a replica is connected to its primary.",
            extra={"max": 1},
        ),
        Spec(
            "Redis replicas: last I/O with the primary",
            [Query(f"redis_master_last_io_seconds_ago{{{DB}}}", POD_LEGEND)],
            "s",
        ),
        Spec(
            "Memory",
            _by_engine(
                f"pg_settings_shared_buffers_bytes{{{DB}}}",
                f"mysql_global_status_innodb_buffer_pool_bytes_data{{{DB}}}",
                f"redis_memory_used_bytes{{{DB}}}",
            ),
            "bytes",
            description="PostgreSQL: shared buffers configured; MySQL: InnoDB buffer pool "
            "data; Redis: memory used.",
        ),
        Spec(
            "Data size",
            [
                Query(
                    f"sum by ({POD}) (pg_database_size_bytes{{{DB}}})",
                    f"postgres {POD_LEGEND}",
                ),
                Query(
                    f"sum by ({POD}) (mysql_info_schema_table_size{{{DB}}})",
                    f"mysql {POD_LEGEND}",
                ),
            ],
            "bytes",
            description="PostgreSQL: every database's size; MySQL: the tables' data and indexes.",
        ),
        Spec(
            "Redis keys",
            [Query(f"sum by ({POD}) (redis_db_keys{{{DB}}})", POD_LEGEND)],
        ),
    ]
    selector = f'up{{job="{DATABASES_JOB}"}}'
    variables = [
        query_variable("namespace", "Namespace", selector),
        query_variable(
            "database",
            "Database",
            f'up{{job="{DATABASES_JOB}", namespace=~"$namespace"}}',
        ),
    ]
    return dashboard(
        DATABASES_UID,
        "Databases",
        "PostgreSQL, MySQL and Redis Databases of the database operator, from their exporter "
        "sidecars (spec.monitoring.enabled).",
        variables,
        specs,
    )


def dashboards() -> dict[str, Dashboard]:
    """Both dashboards by their file's name (without .json)."""
    return {"operator": operator_dashboard(), "databases": databases_dashboard()}
