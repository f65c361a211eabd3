"""The metrics exporter beside the engine (spec.monitoring): the one builder of its container,
used by the pod template and, with other ports, by the tests that run Debian's build of the same
exporter against the real engines (tests/exporters.py).

Credentials reach it as the engine's do, by secretKeyRef from the Secret the pods already read;
a connection string that needs the password names it as ``$(VAR)``, which the kubelet expands
from the container's earlier env, so no value is written into the pod spec or onto a command
line.
"""

from __future__ import annotations

from database_operator.api.models import EXPORTER_CONTAINER, EXPORTER_PORT_NAME, Database
from database_operator.desired.common import (
    container_security_context,
    credentials_secret_name,
    engine_facts,
)
from database_operator.engines import Engine, ExporterFacts, facts
from database_operator.manifest import Manifest


def exporter_facts(engine: Engine | str) -> ExporterFacts:
    """The engine's exporter (every engine has one)."""
    found = facts(engine).exporter
    if found is None:  # pragma: no cover - engines.py gives every engine one
        raise ValueError(f"{engine} has no metrics exporter")
    return found


def enabled(db: Database) -> bool:
    """Whether spec.monitoring asks for the exporter."""
    return db.spec.monitoring is not None and db.spec.monitoring.enabled


def exporter_env(
    engine: Engine | str, secret_name: str, engine_port: int | None = None
) -> list[Manifest]:
    """The exporter's env: the Secret's keys by reference first (the later values may name
    them as ``$(VAR)``), then the connection to the engine on loopback at ``engine_port`` (the
    engine's own port unless given)."""
    exporter = exporter_facts(engine)
    port = engine_port if engine_port is not None else facts(engine).port
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}
        for var, key in exporter.secret_env.items()
    ] + [{"name": var, "value": value.format(port=port)} for var, value in exporter.env.items()]


def exporter_args(engine: Engine | str, listen_port: int | None = None) -> list[str]:
    """The exporter's command-line flags: where it listens (its own port unless given)."""
    exporter = exporter_facts(engine)
    port = listen_port if listen_port is not None else exporter.port
    return [f"{exporter.listen_flag}=:{port}", *exporter.args]


def exporter_container(db: Database) -> Manifest | None:
    """The exporter's container, or None when monitoring is off. No probes: an exporter that
    cannot reach the engine says so in its metrics (``*_up 0``), and must never take the pod
    out of its Service."""
    if not enabled(db):
        return None
    monitoring = db.spec.monitoring
    assert monitoring is not None
    exporter = exporter_facts(db.spec.engine)
    spec: Manifest = {
        "name": EXPORTER_CONTAINER,
        "image": monitoring.image or exporter.image,
        "args": exporter_args(db.spec.engine),
        "env": exporter_env(db.spec.engine, credentials_secret_name(db), engine_facts(db).port),
        "ports": [{"name": EXPORTER_PORT_NAME, "containerPort": exporter.port, "protocol": "TCP"}],
        # The engine's restricted context; the exporter writes nothing, so its root file
        # system is read-only too. It runs as the pod's (the engine's) UID.
        "securityContext": container_security_context() | {"readOnlyRootFilesystem": True},
    }
    if monitoring.resources is not None:
        spec["resources"] = monitoring.resources.to_wire()
    return spec
