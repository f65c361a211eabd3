"""The Grafana dashboards of dashboards.py, offline: each is valid against the chart's
files/dashboards/dashboard.schema.json (and that schema refuses a misspelt field), panel ids are
unique, panels do not overlap on the grid, every target has a query, and every metric a query
reads is one the operator defines or one the exporters serve.

The schema is checked by Helm's JSON Schema validator (the one that checks values.schema.json):
a throwaway chart whose values.schema.json is the dashboard schema, given the dashboard as its
values. Needs bin/helm (`make tools`); its absence fails these tests rather than skipping them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from database_operator import dashboards
from database_operator.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / "bin" / "helm"
SCHEMA = ROOT / "helm" / "database-operator" / "files" / "dashboards" / "dashboard.schema.json"
DASHBOARDS = dashboards.dashboards()

#: The exporters' metrics the dashboards may read: the contract of issue 25 (as the Debian
#: releases of the exporters the sidecar runs serve them; tests/integration/test_dashboards.py
#: shows each query returning data from the real programs).
DATABASE_METRICS = {
    "pg_up",
    "pg_stat_database_numbackends",
    "pg_settings_max_connections",
    "pg_stat_database_xact_commit",
    "pg_stat_database_xact_rollback",
    "pg_settings_shared_buffers_bytes",
    "pg_database_size_bytes",
    "pg_stat_replication_pg_wal_lsn_diff",
    "mysql_up",
    "mysql_global_status_threads_connected",
    "mysql_global_variables_max_connections",
    "mysql_global_status_queries",
    "mysql_global_status_innodb_buffer_pool_bytes_data",
    "mysql_info_schema_table_size",
    "redis_up",
    "redis_connected_clients",
    "redis_config_maxclients",
    "redis_script_values",
    "redis_commands_processed_total",
    "redis_memory_used_bytes",
    "redis_db_keys",
    "redis_master_link_up",
    "redis_master_last_io_seconds_ago",
    "redis_connected_slaves",
    "redis_connected_slave_offset_bytes",
    "redis_master_repl_offset",
    "redis_connected_slave_lag_seconds",
}
#: Prometheus's own series of every target (the variables list the exporters' targets by it).
SCRAPE_METRICS = {"up"}
METRIC = re.compile(r"\b(?:(?:database_operator|pg|mysql|redis)_[a-z0-9_]+|up(?=\{))")


def operator_metrics() -> set[str]:
    """The names the operator serves: counters with ``_total``, histograms' ``_bucket``."""
    names = {metric.name for metric in Metrics().registry.collect()}
    served = names | {f"{name}_total" for name in names}
    return served | {f"{name}_bucket" for name in served}


def targets(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (panel["title"], target) for panel in dashboard["panels"] for target in panel["targets"]
    ]


@pytest.fixture(scope="module")
def validate(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Validate a dashboard against the schema: Helm's error output, "" when it is valid."""
    assert HELM.is_file(), f"{HELM} is missing: run `make tools`"
    base = tmp_path_factory.mktemp("dashboard-schema")
    chart = base / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: dashboard-schema\nversion: 0.0.0\n")
    (chart / "values.schema.json").write_text(SCHEMA.read_text())
    env = {
        **os.environ,
        **{
            var: str(base / "helm")
            for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
        },
    }

    def run(dashboard: dict[str, Any]) -> str:
        values = base / "dashboard.json"
        values.write_text(json.dumps(dashboard))
        done = subprocess.run(
            [str(HELM), "template", "check", str(chart), "--values", str(values)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        return "" if done.returncode == 0 else done.stderr

    return run


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_each_dashboard_is_valid_against_the_schema(validate: Any, name: str) -> None:
    assert validate(DASHBOARDS[name]) == ""


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(titel="x"), "titel"),
        (lambda d: d["panels"][0]["gridPos"].update(wdith=3), "wdith"),
        (lambda d: d["panels"][0]["fieldConfig"]["defaults"].update(unti="s"), "unti"),
        (lambda d: d["panels"][0]["targets"][0].update(exp="up"), "exp"),
        (lambda d: d["panels"][-1].update(type="graph"), "type"),
        (lambda d: d["panels"][-1]["options"]["legend"].update(placment="right"), "placment"),
        (lambda d: d["templating"]["list"][1].update(qurey="x"), "qurey"),
    ],
)
def test_the_schema_refuses_a_misspelt_field(validate: Any, change: Any, field: str) -> None:
    dashboard = json.loads(json.dumps(DASHBOARDS["operator"]))
    change(dashboard)
    assert field in validate(dashboard)


def test_uids_are_stable_and_distinct() -> None:
    assert {name: d["uid"] for name, d in DASHBOARDS.items()} == {
        "operator": "database-operator",
        "databases": "database-operator-databases",
    }


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panel_ids_are_unique(name: str) -> None:
    ids = [panel["id"] for panel in DASHBOARDS[name]["panels"]]
    assert len(ids) == len(set(ids)), ids


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_no_two_panels_overlap_on_the_grid(name: str) -> None:
    def overlap(a: dict[str, int], b: dict[str, int]) -> bool:
        return (
            a["x"] < b["x"] + b["w"]
            and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"]
            and b["y"] < a["y"] + a["h"]
        )

    panels = DASHBOARDS[name]["panels"]
    for panel in panels:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= dashboards.GRID_WIDTH, panel
    clashes = [
        (a["title"], b["title"])
        for a, b in combinations(panels, 2)
        if overlap(a["gridPos"], b["gridPos"])
    ]
    assert clashes == []


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_target_has_a_query_with_a_distinct_ref_id(name: str) -> None:
    for panel in DASHBOARDS[name]["panels"]:
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_metric_read_exists(name: str) -> None:
    """Operator metrics are metrics.py's; database metrics the contract's."""
    known = operator_metrics() | DATABASE_METRICS | SCRAPE_METRICS
    queries = [(title, target["expr"]) for title, target in targets(DASHBOARDS[name])]
    queries += [
        (f"variable {v['name']}", v["query"])
        for v in DASHBOARDS[name]["templating"]["list"]
        if v["type"] == "query"
    ]
    for title, expr in queries:
        # A selector by a name pattern (the backups variable) names no metric itself.
        read = set(METRIC.findall(re.sub(r'__name__=~"[^"]*"', "", expr)))
        assert read or "__name__" in expr, (title, expr)
        assert read <= known, (title, sorted(read - known))


def test_variables_are_datasource_namespace_and_database() -> None:
    for dashboard in DASHBOARDS.values():
        variables = dashboard["templating"]["list"]
        assert [v["name"] for v in variables] == ["datasource", "namespace", "database"]
        assert variables[0]["query"] == "prometheus"
        for variable in variables[1:]:
            assert variable["query"].startswith("label_values(")
            assert variable["allValue"] == ".*"


def test_every_query_filters_by_the_variables_where_its_series_have_the_labels() -> None:
    """The exporters' series all carry namespace and database: every database query is
    filtered by both, so the variables never show another Database's data."""
    for title, target in targets(DASHBOARDS["databases"]):
        selectors = re.findall(r"\b(?:pg|mysql|redis)_[a-z0-9_]+(\{[^}]*\})?", target["expr"])
        for selector in selectors:
            assert dashboards.DB in selector, (title, target["expr"])


def test_generated_files_are_the_dashboards() -> None:
    for name, dashboard in DASHBOARDS.items():
        for folder in ("helm/database-operator/files/dashboards", "config/grafana"):
            text = (ROOT / folder / f"{name}.json").read_text()
            assert json.loads(text) == dashboard
            assert text == json.dumps(dashboard, indent=2, sort_keys=True) + "\n"
