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


def steps(changes: dict[int, int]) -> str:
    """promtool's values of a gauge: absent until the first minute of ``changes``, then each
    value from its minute on, one sample a minute up to END."""
    minutes = sorted(changes)
    parts = [f"_x{minutes[0]}"] if minutes[0] else []
    for at, until in zip(minutes, [*minutes[1:], END + 1], strict=True):
        parts.append(f"{changes[at]}x{until - at - 1}")
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


def rendered(template: str, labels: dict[str, str], value: str | None) -> str:
    """``template`` with ``{{ $labels.NAME }}`` and ``{{ $value }}`` put in (no other function:
    a template that uses one fails here, to be taught)."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], "<no value>"), template)
    if value is not None:
        text = text.replace("{{ $value }}", value)
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
    assert "SUCCESS: 11 rules found" in done.stdout


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


def test_database_failed_counts_the_failed_databases(tmp_path: Path) -> None:
    failed = {"phase": "Failed", **SCRAPE}
    run_promtool_test(
        tmp_path,
        {series("database_operator_databases", failed): steps({0: 0, 60: 2})},
        quiet("DatabaseFailed", 65),
        firing("DatabaseFailed", 80, failed, value="2"),
    )


def test_operator_down_fires_when_no_target_is_up(tmp_path: Path) -> None:
    run_promtool_test(
        tmp_path,
        {series("up", SCRAPE): steps({0: 1, 60: 0})},
        quiet("DatabaseOperatorDown", 60),
        firing("DatabaseOperatorDown", 70),
    )
