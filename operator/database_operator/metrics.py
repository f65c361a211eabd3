"""Prometheus metrics: one registry, the metric objects, and the phase gauge's bookkeeping.

Names follow Prometheus conventions: the ``database_operator_`` prefix, ``_total`` counters,
base units (``_seconds``), string facts in an ``_info`` gauge, bounded label values (results,
phases, reasons, child kinds, webhooks and HTTP status codes — and the namespace, never object
names). Label values that repeat on the hot path are looked up once (``_Children``): a
reconcile costs dict lookups, not ``labels()``'s validation and lock.
"""

from __future__ import annotations

import platform
import threading
from collections import Counter as Tally
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from database_operator import __version__
from database_operator.api.backup import BACKUP_PLURAL
from database_operator.api.models import PLURAL, Phase
from database_operator.engines import Engine
from database_operator.reasons import Reason

PREFIX = "database_operator"
#: Reconciles take milliseconds to a few seconds; a slow API server shows in the upper buckets.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RESULTS = ("success", "failed", "paused", "error")
#: A backup takes seconds (a small database) to hours.
FAILOVER_DURATION_BUCKETS = (1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
BACKUP_DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0)
#: 1 MiB to 1 TiB, by 4s.
BACKUP_SIZE_BUCKETS = tuple(float(2**20 * 4**power) for power in range(11))
CHILD_KINDS = ("Secret", "Deployment", "Service", "PersistentVolumeClaim", "NetworkPolicy")
DROP_REASONS = ("queue_full", "export_failed")
#: The reason counted for a reconcile that failed on an API call (retried), and for one that
#: failed on anything else (a bug: the log has its traceback).
API_ERROR = "ApiError"
UNEXPECTED_ERROR = Reason.RECONCILE_ERROR.value
#: The reasons a reconcile can end with in phase Failed or Degraded (the Degraded condition's
#: reason), and those of errors: they start at zero. A unit test holds it to reasons.EXPLAINED.
FAILURE_REASONS = (
    Reason.CREDENTIALS_SECRET_NOT_FOUND,
    Reason.CREDENTIALS_SECRET_INVALID,
    Reason.CREDENTIALS_SECRET_LOST,
    Reason.CHILD_NAME_CONFLICT,
    Reason.DEPLOYMENT_REJECTED,
    Reason.SERVICE_REJECTED,
    Reason.SECRET_REJECTED,
    Reason.PERSISTENT_VOLUME_CLAIM_REJECTED,
    Reason.CHILD_NOT_CONVERGED,
    Reason.RESTORE_FAILED,
    Reason.RESTORE_SOURCE_NOT_FOUND,
    Reason.RESTORE_SOURCE_NOT_COMPLETED,
    Reason.RESTORE_SOURCE_INCOMPATIBLE,
    Reason.DESTINATION_NOT_FOUND,
    Reason.START_DEADLINE_EXCEEDED,
    Reason.PRIMARY_UNAVAILABLE,
    Reason.REPLICAS_UNAVAILABLE,
    UNEXPECTED_ERROR,
    API_ERROR,
)
#: The webhook endpoints: admission (Kopf's handler ids, webhooks/configuration.py) and
#: conversion.
WEBHOOKS = ("mutate", "validate", "convert")
#: Time to answer a review: milliseconds; a slow API server (the validate webhook reads the
#: namespace's Databases) shows in the upper buckets, the API server gives up at 5 s.
WEBHOOK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Time a Database waits for a worker: nothing, normally; a backlog after a start or a burst of
#: changes shows in seconds to minutes.
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
#: The watches whose restarts are counted (lifecycle.WatchRestarts).
WATCHED_RESOURCES = (PLURAL, BACKUP_PLURAL)
#: CPython's generations, as label values (the index is the generation).
GC_GENERATIONS = ("0", "1", "2")
#: A young collection takes microseconds; a full one, tens of milliseconds (gcpauses.py).
GC_PAUSE_BUCKETS = (0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

M = TypeVar("M", bound=MetricWrapperBase)


class _Children(Generic[M]):
    """A metric's children by their one label value, each made (``labels()``) once."""

    def __init__(self, metric: M, known: tuple[str, ...] = ()) -> None:
        self._metric: M = metric
        self._children: dict[str, M] = {value: metric.labels(value) for value in known}

    def __call__(self, value: str) -> M:
        child = self._children.get(value)
        if child is None:
            child = self._children[value] = self._metric.labels(value)
        return child


class _PhaseCollector(Collector):
    """``database_operator_databases{namespace, phase}`` computed at scrape time from the last
    known phase of each Database, so deletes and restarts (resume re-reports every object) keep
    it right. Every phase is served for each namespace that has Databases, 0 included, so
    ``{phase="Failed"} > 0`` and rates work per namespace from the first scrape; a namespace
    whose last Database is gone is no longer served."""

    def __init__(self) -> None:
        self._phases: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, name: str, phase: str | None) -> None:
        with self._lock:
            if phase is None:
                self._phases.pop((namespace, name), None)
            else:
                self._phases[(namespace, name)] = phase

    def forget(self, namespace: str, name: str) -> None:
        self.set(namespace, name, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            counts = Tally((namespace, phase) for (namespace, _), phase in self._phases.items())
        gauge = GaugeMetricFamily(
            f"{PREFIX}_databases",
            "Databases by namespace and phase, as last reconciled.",
            labels=["namespace", "phase"],
        )
        for namespace in sorted({namespace for namespace, _ in counts}):
            for phase in Phase:
                gauge.add_metric([namespace, phase.value], counts[namespace, phase.value])
        yield gauge


@dataclass(frozen=True)
class BackupFacts:
    """What the backup gauges say of one Database (None: there is nothing to say)."""

    last_success: float | None = None
    last_failure: float | None = None
    period: float | None = None


class _BackupCollector(Collector):
    """The per-Database backup gauges, computed at scrape time from what each Database's last
    reconcile found (so deletes and restarts keep them right, as for the phases)."""

    def __init__(self) -> None:
        self._facts: dict[tuple[str, str], BackupFacts] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, name: str, facts: BackupFacts | None) -> None:
        with self._lock:
            if facts is None or facts == BackupFacts():
                self._facts.pop((namespace, name), None)
            else:
                self._facts[(namespace, name)] = facts

    def forget(self, namespace: str, name: str) -> None:
        self.set(namespace, name, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            facts = dict(self._facts)
        labels = ["namespace", "database"]
        gauges = {
            "last_success": GaugeMetricFamily(
                f"{PREFIX}_backup_last_success_timestamp_seconds",
                "When the newest backup of the Database completed (Unix time).",
                labels=labels,
            ),
            "last_failure": GaugeMetricFamily(
                f"{PREFIX}_backup_last_failure_timestamp_seconds",
                "When the newest failed backup of the Database failed (Unix time).",
                labels=labels,
            ),
            "period": GaugeMetricFamily(
                f"{PREFIX}_backup_schedule_period_seconds",
                "The period of the Database's backup schedule now (absent: no schedule, or "
                "suspended).",
                labels=labels,
            ),
        }
        for (namespace, name), fact in sorted(facts.items()):
            for attribute, gauge in gauges.items():
                value = getattr(fact, attribute)
                if value is not None:
                    gauge.add_metric([namespace, name], value)
        yield from gauges.values()


class _BuildInfo(Collector):
    def collect(self) -> Iterator[InfoMetricFamily]:
        yield InfoMetricFamily(
            f"{PREFIX}_build",
            "The operator's version and runtime.",
            value={"version": __version__, "python_version": platform.python_version()},
        )


class Metrics:
    """The operator's metrics on their own registry (tests may make as many as they like)."""

    def __init__(self) -> None:
        # `_created` series double the output and no dashboard reads them.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconciles = Counter(
            f"{PREFIX}_reconciles",
            "Reconciles by result: success, failed (spec cannot be acted on), paused, error "
            "(API failure, retried).",
            ["result"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time one reconcile took.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.status_updates = Counter(
            f"{PREFIX}_status_updates",
            "Writes of a Database's status (only when it changed).",
            registry=self.registry,
        )
        self.resyncs_skipped = Counter(
            f"{PREFIX}_resyncs_skipped",
            "Resyncs skipped: the Database's last reconcile wrote nothing and read only what "
            "the watches deliver, none of which has changed since.",
            registry=self.registry,
        )
        self.drift_corrections = Counter(
            f"{PREFIX}_drift_corrections",
            "Children created or rewritten because they were missing or differed, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.api_errors = Counter(
            f"{PREFIX}_api_errors",
            "Failed Kubernetes API calls by HTTP status code (0: no answer).",
            ["code"],
            registry=self.registry,
        )
        self.spans_dropped = Counter(
            f"{PREFIX}_trace_spans_dropped",
            "Trace spans that never reached the collector, by reason: queue_full (the export "
            "queue was full: a slow or absent collector) or export_failed.",
            ["reason"],
            registry=self.registry,
        )
        self.active = Gauge(
            f"{PREFIX}_active",
            "1 while this replica may reconcile (it holds the Lease; always, without leader "
            "election); 0 while it stands by.",
            registry=self.registry,
        )
        self.phases = _PhaseCollector()
        self.registry.register(self.phases)
        self.backup_duration = Histogram(
            f"{PREFIX}_backup_duration_seconds",
            "Time from a backup's start to its completion, by engine.",
            ["engine"],
            buckets=BACKUP_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.backup_size = Histogram(
            f"{PREFIX}_backup_size_bytes",
            "Size of the completed backups, by engine.",
            ["engine"],
            buckets=BACKUP_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.primaries = Gauge(
            f"{PREFIX}_database_primaries",
            "spec.failover: the instances of a Database whose engine answers as a primary, at "
            "its last look (1 when well; 0: writes fail; more: the engines disagree).",
            ["namespace", "name"],
            registry=self.registry,
        )
        self.failovers = Counter(
            f"{PREFIX}_failovers",
            "Failovers completed (spec.failover): a replica promoted in place of a lost "
            "primary, by engine.",
            ["engine"],
            registry=self.registry,
        )
        self.failover_duration = Histogram(
            f"{PREFIX}_failover_duration_seconds",
            "Time from the loss of a primary (spec.failover) to the promotion of its "
            "replacement, by engine.",
            ["engine"],
            buckets=FAILOVER_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.backup_failures = Counter(
            f"{PREFIX}_backup_failures",
            "Backups that failed, by reason (the DatabaseBackup's condition reason).",
            ["reason"],
            registry=self.registry,
        )
        self.backups = _BackupCollector()
        self.registry.register(self.backups)
        self.registry.register(_BuildInfo())
        self.reconcile_failures = Counter(
            f"{PREFIX}_reconcile_failures",
            "Reconciles that ended in phase Failed or Degraded, by the Degraded condition's "
            "reason, or in an error (ApiError: an API call failed; ReconcileError: anything "
            "else), retried.",
            ["reason"],
            registry=self.registry,
        )
        self.workqueue_depth = Gauge(
            f"{PREFIX}_workqueue_depth",
            "Databases waiting for a worker to reconcile them (not those being reconciled or "
            "scheduled for later).",
            registry=self.registry,
        )
        self.workqueue_wait = Histogram(
            f"{PREFIX}_workqueue_wait_seconds",
            "Time a Database waited for a worker: from its event (or its resync or retry "
            "coming due) to its reconcile's start.",
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.webhook_duration = Histogram(
            f"{PREFIX}_webhook_duration_seconds",
            "Time to answer an admission or conversion review, by webhook.",
            ["webhook"],
            buckets=WEBHOOK_BUCKETS,
            registry=self.registry,
        )
        self.gc_pauses = Histogram(
            f"{PREFIX}_gc_pause_seconds",
            "Time the Python garbage collector stopped the process, by generation (2: a full "
            "collection; the operator freezes what survives one, so the next is short).",
            ["generation"],
            buckets=GC_PAUSE_BUCKETS,
            registry=self.registry,
        )
        self.watch_restarts = Counter(
            f"{PREFIX}_watch_restarts",
            "Watches of the operator's resources started again after they ended or failed: "
            "established again after failed attempts (an API server outage), listed afresh "
            "(410 Gone), or started anew (the CRDs re-created). A watch the API server closes "
            "on time and that resumes at once is not counted.",
            ["resource"],
            registry=self.registry,
        )
        # Known label values start at zero, so rate() and absent() behave from the first scrape;
        # those counted per reconcile are looked up once.
        self.reconciled = _Children(self.reconciles, RESULTS)
        self.failed = _Children(self.reconcile_failures, FAILURE_REASONS)
        self.webhook_answered = _Children(self.webhook_duration, WEBHOOKS)
        self.watch_restarted = _Children(self.watch_restarts, WATCHED_RESOURCES)
        self._gc_paused = _Children(self.gc_pauses, GC_GENERATIONS)
        for kind in CHILD_KINDS:
            self.drift_corrections.labels(kind)
        for reason in DROP_REASONS:
            self.spans_dropped.labels(reason)
        for engine in Engine:
            self.backup_duration.labels(engine.value)
            self.backup_size.labels(engine.value)

    def webhook_took(self, webhook: str, seconds: float) -> None:
        """A review was answered. Only the webhooks served are label values: a request to any
        other path (a typo, a scanner) is not one."""
        if webhook in WEBHOOKS:
            self.webhook_answered(webhook).observe(seconds)

    def gc_paused(self, generation: int, seconds: float) -> None:
        """A garbage collection of ``generation`` stopped the process for ``seconds``."""
        self._gc_paused(GC_GENERATIONS[generation]).observe(seconds)

    def serve(self, port: int, address: str = "0.0.0.0") -> None:  # noqa: S104 - a pod's port
        """Serve /metrics from a background thread."""
        start_http_server(port, addr=address, registry=self.registry)
