"""Settings: environment variables, flags that win over them, and bad values named clearly."""

from __future__ import annotations

import pytest

from database_operator.cli import main
from database_operator.config import LogFormat, LogLevel, Settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    settings = Settings()
    assert settings.namespaces == []
    assert settings.log_level is LogLevel.INFO
    assert settings.log_format is LogFormat.JSON
    assert (settings.metrics_port, settings.health_port) == (8080, 8081)
    assert settings.resync_interval == 60
    assert settings.leader_election is False
    assert (settings.lease_name, settings.lease_namespace) == ("database-operator", None)
    # controller-runtime's defaults.
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (15, 10, 2)


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_NAMESPACES", "team-a, team-b")
    monkeypatch.setenv("DATABASE_OPERATOR_LOG_LEVEL", "debug")
    monkeypatch.setenv("DATABASE_OPERATOR_LOG_FORMAT", "console")
    monkeypatch.setenv("DATABASE_OPERATOR_RESYNC_INTERVAL", "15")
    monkeypatch.setenv("DATABASE_OPERATOR_LEADER_ELECTION", "true")
    monkeypatch.setenv("DATABASE_OPERATOR_LEASE_NAME", "ha")
    monkeypatch.setenv("DATABASE_OPERATOR_LEASE_DURATION", "30")
    monkeypatch.setenv("DATABASE_OPERATOR_RENEW_DEADLINE", "20")
    monkeypatch.setenv("DATABASE_OPERATOR_RETRY_PERIOD", "0.5")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    settings = Settings()
    assert settings.namespaces == ["team-a", "team-b"]
    assert settings.log_level is LogLevel.DEBUG
    assert settings.log_format is LogFormat.CONSOLE
    assert settings.resync_interval == 15
    assert settings.leader_election is True
    assert (settings.lease_name, settings.lease_namespace) == ("ha", "ops")
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (
        30,
        20,
        0.5,
    )
    # The Lease's namespace given wins over the pod's.
    monkeypatch.setenv("DATABASE_OPERATOR_LEASE_NAMESPACE", "elsewhere")
    assert Settings().lease_namespace == "elsewhere"


def test_flags_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_METRICS_PORT", "9000")
    assert Settings(metrics_port=9100).metrics_port == 9100


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("DATABASE_OPERATOR_METRICS_PORT", "70000", "metrics_port"),
        ("DATABASE_OPERATOR_HEALTH_PORT", "http", "health_port"),
        ("DATABASE_OPERATOR_LOG_FORMAT", "xml", "log_format"),
        ("DATABASE_OPERATOR_LOG_LEVEL", "LOUD", "log_level"),
        ("DATABASE_OPERATOR_RESYNC_INTERVAL", "0", "resync_interval"),
        ("DATABASE_OPERATOR_LEADER_ELECTION", "maybe", "leader_election"),
        ("DATABASE_OPERATOR_LEASE_DURATION", "0", "lease_duration"),
        ("DATABASE_OPERATOR_RENEW_DEADLINE", "soon", "renew_deadline"),
        ("DATABASE_OPERATOR_RETRY_PERIOD", "-1", "retry_period"),
    ],
)
def test_bad_environment_stops_start_up_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: str,
    value: str,
    named: str,
) -> None:
    monkeypatch.setenv(env, value)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert f"invalid setting {named}" in err
    assert env in err


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"),
    [(10, 10, 2), (15, 10, 10), (5, 10, 2), (15, 1, 2)],
)
def test_lease_timings_must_shrink_from_duration_to_deadline_to_retry(
    monkeypatch: pytest.MonkeyPatch, duration: float, deadline: float, retry: float
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    with pytest.raises(ValueError, match="lease_duration must be longer than renew_deadline"):
        Settings(
            leader_election=True,
            lease_duration=duration,
            renew_deadline=deadline,
            retry_period=retry,
        )
    # Without leader election they are not used, and not checked.
    alone = Settings(lease_duration=duration, renew_deadline=deadline, retry_period=retry)
    assert alone.lease_duration == duration


def test_leader_election_needs_the_leases_namespace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(ValueError, match="leader_election needs lease_namespace"):
        Settings(leader_election=True)
    assert main(["run", "--leader-election"]) == 2
    assert "POD_NAMESPACE" in capsys.readouterr().err
    # In a pod: its own namespace; or named.
    assert Settings(leader_election=True, lease_namespace="ops").lease_namespace == "ops"
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    assert Settings(leader_election=True).lease_namespace == "ops"


def test_the_operators_namespace_is_its_pods_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Database's NetworkPolicy admits with spec.failover."""
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert Settings().operator_namespace is None
    monkeypatch.setenv("POD_NAMESPACE", "database-operator-system")
    assert Settings().operator_namespace == "database-operator-system"
    assert Settings(operator_namespace="ops").operator_namespace == "ops"


def test_bad_flag_stops_start_up_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--resync-interval", "-5"]) == 2
    assert "--resync-interval" in capsys.readouterr().err


def test_all_namespaces_flag_overrides_namespaces_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_NAMESPACES", "team-a")
    assert Settings(namespaces=[]).namespaces == []


# --- webhooks and tracing -----------------------------------------------------------------------


def test_webhooks_and_tracing_are_off_by_default() -> None:
    settings = Settings()
    assert settings.webhook_port == 0
    assert settings.tracing is False
    assert settings.image_registries == []


@pytest.mark.parametrize(
    "where",
    [
        {"webhook_service": "ops/database-operator-webhook"},
        {"webhook_url": "https://127.0.0.1:9443"},
        {"webhook_cert_dir": "/etc/database-operator/webhook"},
    ],
)
def test_a_webhook_port_takes_one_of_three_certificate_modes(where: dict[str, str]) -> None:
    assert Settings(webhook_port=9443, **where).webhook_port == 9443  # type: ignore[arg-type]


def test_a_webhook_port_alone_is_refused_naming_what_it_needs() -> None:
    with pytest.raises(ValueError, match="webhook_port needs webhook_service") as refused:
        Settings(webhook_port=9443)
    assert "webhook_url" in str(refused.value)
    assert "webhook_cert_dir" in str(refused.value)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("webhook_url", "http://127.0.0.1:9443"),
        ("webhook_service", "database-operator-webhook"),
        ("webhook_service", "Ops/Webhook"),
        ("webhook_port", 70000),
    ],
)
def test_bad_webhook_settings_are_refused(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match=setting):
        Settings(**{setting: value})  # type: ignore[arg-type]


def test_image_registries_come_comma_separated_from_env_or_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "DATABASE_OPERATOR_IMAGE_REGISTRIES", "registry.example.com/, docker.io/library/"
    )
    assert Settings().image_registries == ["registry.example.com/", "docker.io/library/"]
    assert Settings(image_registries="quay.io/team/").image_registries == ["quay.io/team/"]


def test_tracing_is_turned_on_by_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_TRACING", "true")
    assert Settings().tracing is True


def test_run_refuses_a_tracing_variable_it_cannot_use(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    assert main(["run", "--tracing"]) == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported" in capsys.readouterr().err


# --- the Jobs of backups, restores and deletions ---------------------------------------------


def test_jobs_start_within_five_minutes_run_within_a_day_and_pull_with_no_secret() -> None:
    settings = Settings()
    assert (settings.job_start_deadline, settings.job_run_deadline) == (300, 86400)
    assert settings.agent_image_pull_secrets == []


def test_the_jobs_pull_secrets_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_OPERATOR_AGENT_IMAGE_PULL_SECRETS", "ghcr, mirror.example")
    monkeypatch.setenv("DATABASE_OPERATOR_JOB_START_DEADLINE", "30")
    settings = Settings()
    assert settings.agent_image_pull_secrets == ["ghcr", "mirror.example"]
    assert settings.job_start_deadline == 30


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("agent_image_pull_secrets", ["Not_A_Name"], "not the name of a Secret: 'Not_A_Name'"),
        ("job_start_deadline", 0, "greater than 0"),
        ("job_run_deadline", 0, "greater than or equal to 1"),
    ],
)
def test_bad_job_settings_are_refused(setting: str, value: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Settings(**{setting: value})  # type: ignore[arg-type]
