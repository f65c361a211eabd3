"""The operator's settings: environment (prefix DATABASE_OPERATOR_), overridden by flags.

Each setting is one field here, the single source of its name, type, default and description:
`database-operator run`'s flags (cli.py) and the README's settings table (`make manifests`) are
made from the fields. An invalid value stops start-up with a message that names the setting.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from database_operator import __version__
from database_operator.api.common import NAME_PATTERN

ENV_PREFIX = "DATABASE_OPERATOR_"
#: Characters that make a namespace setting a pattern rather than a name.
GLOB_CHARACTERS = frozenset("*?[]!")


def is_exact(namespace: str) -> bool:
    """A namespace name, not a pattern."""
    return not set(namespace) & GLOB_CHARACTERS


@dataclass(frozen=True)
class FlagGroup:
    """The heading a setting's flag is listed under in `run --help` (in a field's Annotated)."""

    title: str


ELECTION = FlagGroup("leader election (HA, on a coordination.k8s.io Lease)")
WEBHOOKS = FlagGroup("webhooks (admission and conversion, HTTPS)")


class LogFormat(StrEnum):
    JSON = "json"
    CONSOLE = "console"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


class Settings(BaseSettings):
    """How the operator runs."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Namespaces to watch (globs allowed; the flag once for each); empty watches "
        "all.",
    )
    operator_namespace: str | None = Field(
        default=None,
        description="The operator's own namespace, which a Database's NetworkPolicy "
        "(spec.networkPolicy) lets reach the engines of its instances (spec.failover); empty: "
        "POD_NAMESPACE, or none outside a cluster.",
    )
    log_level: LogLevel = Field(default=LogLevel.INFO, description="DEBUG, INFO, WARNING or ERROR.")
    log_format: LogFormat = Field(
        default=LogFormat.JSON, description="json (one object per line) or console (for people)."
    )
    metrics_port: int = Field(
        default=8080, ge=0, le=65535, description="Port of /metrics; 0 turns metrics off."
    )
    health_port: int = Field(
        default=8081, ge=0, le=65535, description="Port of /healthz and /readyz; 0 turns them off."
    )
    resync_interval: float = Field(
        default=60.0, gt=0, description="Seconds between periodic reconciles of each Database."
    )
    retry_max_delay: float = Field(
        default=60.0,
        gt=0,
        description="Longest wait (seconds) between attempts at a Database whose reconcile "
        "keeps failing; the wait doubles from 0.5 s up to it, and attempts never stop.",
    )
    workers: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Databases reconciled at the same time (each Database one at a time).",
    )
    shard: str | None = Field(
        default=None,
        pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        max_length=63,
        description="Reconcile only the Databases labelled databases.example.com/shard=SHARD "
        "(selected by the API server); empty reconciles every Database.",
    )
    leader_election: Annotated[bool, ELECTION] = Field(
        default=False,
        description="Elect the one replica that reconciles on a coordination.k8s.io Lease (HA); "
        "the others watch, serve the webhooks and stand by. The chart and config/manager turn "
        "it on.",
    )
    lease_name: Annotated[str, ELECTION] = Field(
        default="database-operator",
        min_length=1,
        description="Name of the Lease (with a shard: database-operator-SHARD).",
    )
    lease_namespace: Annotated[str | None, ELECTION] = Field(
        default=None,
        description="Namespace of the Lease (needed with leader election); empty: the "
        "operator's own (POD_NAMESPACE).",
    )
    lease_duration: Annotated[float, ELECTION] = Field(
        default=15.0,
        gt=0,
        description="Seconds a standby waits, after the leader's last renewal, to take over.",
    )
    renew_deadline: Annotated[float, ELECTION] = Field(
        default=10.0,
        gt=0,
        description="Seconds the leader keeps trying to renew before it stops reconciling "
        "(shorter than the lease duration: it stops before anyone can take over).",
    )
    retry_period: Annotated[float, ELECTION] = Field(
        default=2.0,
        gt=0,
        description="Seconds between renewals, and between a standby's tries.",
    )
    webhook_port: Annotated[int, WEBHOOKS] = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the admission and conversion webhooks (HTTPS); 0 turns them off "
        "(the chart sets 9443).",
    )
    webhook_address: Annotated[str, WEBHOOKS] = Field(
        default="0.0.0.0",  # noqa: S104 - the API server reaches the pod from outside it
        description="Address the webhooks listen on.",
    )
    webhook_service: Annotated[str | None, WEBHOOKS] = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="NAMESPACE/NAME of the Service in front of the webhooks: the operator keeps "
        "its own CA and certificate for it in --webhook-secret, and writes the CA into the "
        "webhook configurations and the CRD.",
    )
    webhook_secret: Annotated[str, WEBHOOKS] = Field(
        default="database-operator-webhook-cert",
        description="Secret (in the Service's namespace) with the webhooks' own CA and "
        "certificate, shared by the replicas.",
    )
    webhook_cert_dir: Annotated[str | None, WEBHOOKS] = Field(
        default=None,
        description="Folder with tls.crt and tls.key (a mounted Secret, e.g. cert-manager's), "
        "re-read when they change; the caBundles are then someone else's (cert-manager's CA "
        "injector).",
    )
    webhook_url: Annotated[str | None, WEBHOOKS] = Field(
        default=None,
        pattern=r"^https://",
        description="Outside the cluster: the https:// address the API server reaches the "
        "operator at; the operator registers URL-based webhook configurations itself.",
    )
    webhook_configuration: Annotated[str, WEBHOOKS] = Field(
        default="database-operator",
        description="Name of the Validating- and MutatingWebhookConfiguration.",
    )
    image_registries: Annotated[list[str], NoDecode, WEBHOOKS] = Field(
        default_factory=list,
        description="Image policy: registry prefixes a Database's images (the engine's and, with "
        "monitoring, the exporter's) must start with, comma-separated "
        "(e.g. registry.example.com/,docker.io/library/); empty allows any.",
    )
    tracing: bool = Field(
        default=False,
        description="Export OpenTelemetry traces of reconciles and webhooks over OTLP, as the "
        "standard OTEL_* variables configure it (endpoint, protocol, sampler, resource).",
    )
    agent_image: str = Field(
        default=f"ghcr.io/example/database-operator:{__version__}",
        min_length=1,
        description="Image of the backup, restore and delete Jobs' agent: the operator's own "
        "(the chart sets the image it runs).",
    )
    agent_image_pull_secrets: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Secrets the backup, restore and delete Jobs' pods pull their images with, "
        "by name (the chart passes its imagePullSecrets); each must exist in every Database's "
        "namespace. Empty: none, and the namespace's default ServiceAccount's apply.",
    )
    job_start_deadline: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a backup, restore or delete Job's pod may wait to start a container "
        "(not scheduled, an image that cannot be pulled, a missing Secret) before the operator "
        "stops the Job and what it was for fails.",
    )
    job_run_deadline: int = Field(
        default=86400,
        ge=1,
        description="Seconds a backup, restore or delete Job may run in all (its "
        "activeDeadlineSeconds): Kubernetes then stops it, DeadlineExceeded.",
    )

    @field_validator("namespaces", "image_registries", "agent_image_pull_secrets", mode="before")
    @classmethod
    def _split_namespaces(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("agent_image_pull_secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not re.fullmatch(NAME_PATTERN, name)]
        if bad:
            raise ValueError(f"not the name of a Secret: {', '.join(map(repr, bad))}")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _lease_per_shard(cls, data: object) -> object:
        # Each shard's replicas elect their leader among themselves.
        if isinstance(data, dict) and data.get("shard") and not data.get("lease_name"):
            return {**data, "lease_name": f"database-operator-{data['shard']}"}
        return data

    @model_validator(mode="before")
    @classmethod
    def _lease_in_own_namespace(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("lease_namespace"):
            return {**data, "lease_namespace": os.environ.get("POD_NAMESPACE") or None}
        return data

    @model_validator(mode="before")
    @classmethod
    def _own_namespace(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("operator_namespace"):
            return {**data, "operator_namespace": os.environ.get("POD_NAMESPACE") or None}
        return data

    @field_validator("shard", mode="before")
    @classmethod
    def _no_shard_when_empty(cls, value: object) -> object:
        return value or None

    @model_validator(mode="after")
    def _webhooks_need_an_address(self) -> Settings:
        if self.webhook_port and not (
            self.webhook_service or self.webhook_url or self.webhook_cert_dir
        ):
            raise ValueError(
                "webhook_port needs webhook_service (in the cluster), webhook_url (outside it) "
                "or webhook_cert_dir (a mounted certificate)"
            )
        return self

    @model_validator(mode="after")
    def _lease_timings(self) -> Settings:
        if not self.leader_election:
            return self
        if self.lease_namespace is None:
            raise ValueError(
                "leader_election needs lease_namespace (in a pod: the POD_NAMESPACE variable)"
            )
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "lease_duration must be longer than renew_deadline, and renew_deadline longer "
                f"than retry_period (given {self.lease_duration}, {self.renew_deadline}, "
                f"{self.retry_period})"
            )
        return self
