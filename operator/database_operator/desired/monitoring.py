"""The metrics exporter beside the engine (spec.monitoring): the one builder of its container,
used by the pod template and, with other ports, by the tests that run Debian's build of the same
exporter against the real engines (tests/exporters.py).

Credentials reach it as the engine's do, by secretKeyRef from the Secret the pods already read;
a connection string that needs the password names it as ``$(VAR)``, which the kubelet expands
from the container's earlier env, so no value is written into the pod spec or onto a command
line.

The PostgreSQL exporter reads no Secret either: it logs in as a role of its own (pg_monitor)
that pg_hba.conf trusts from the pod's loopback address only (replication.py).

An exporter with a user of its own (Redis) reads no Secret: an init container, from the engine's
image, makes a random password in an in-memory volume of the pod's (kept while the pod lives,
so the engine's restarts agree with the exporter), with the exporter's password file and its
script; the engine creates the user from it at each start. The password never leaves the pod.
"""

from __future__ import annotations

from database_operator.api.models import (
    EXPORTER_CONTAINER,
    EXPORTER_CREDENTIALS_CONTAINER,
    EXPORTER_PORT_NAME,
    Database,
)
from database_operator.desired.common import (
    container_security_context,
    credentials_secret_name,
    engine_facts,
)
from database_operator.engines import MONITORING_DIR, Engine, ExporterFacts, facts
from database_operator.manifest import Manifest

#: The in-memory volume an exporter's own user's credentials are made in.
VOLUME = "monitoring"
#: The engine's env var naming the file with the monitoring user's password.
PASSWORD_FILE_ENV = "MONITORING_PASSWORD_FILE"

# Run in MONITORING_DIR (its first argument) with the engine's port (its second): a password
# from the kernel's CSPRNG, made once per pod (an init container runs again when the pod's
# sandbox is remade: the volume, and so the password the engine has, stays); the exporter's
# password file for the local server only; its script, which reads maxclients from INFO.
# Files readable by the pod's user only.
REDIS_CREDENTIALS = """\
set -eu
umask 077
cd "$1"
if [ ! -s password ]; then
  head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \\n' > password.new
  mv password.new password
fi
printf '{"redis://127.0.0.1:%s":"%s"}\\n' "$2" "$(cat password)" > passwords.json
cat > maxclients.lua <<'LUA'
return {'maxclients', string.match(redis.call('INFO', 'clients'), 'maxclients:(%d+)')}
LUA
"""


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


def own_user(db: Database) -> bool:
    """Whether the Database's exporter logs in as a user of its own, made in the pod."""
    return enabled(db) and exporter_facts(db.spec.engine).own_user


def credentials_volume() -> Manifest:
    return {"name": VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}


def credentials_mount(*, read_only: bool = True) -> Manifest:
    # readOnly only when true: the API server drops a false one, and the child would differ.
    mount: Manifest = {"name": VOLUME, "mountPath": MONITORING_DIR}
    return mount | {"readOnly": True} if read_only else mount


def engine_env(db: Database) -> list[Manifest]:
    """What the engine's container needs to create the exporter's user (nothing without
    monitoring)."""
    if not enabled(db):
        return []
    plain = exporter_facts(db.spec.engine).engine_env
    made = [{"name": PASSWORD_FILE_ENV, "value": f"{MONITORING_DIR}/password"}]
    return [{"name": var, "value": value} for var, value in plain.items()] + (
        made if own_user(db) else []
    )


def credentials_init_container(db: Database, image: str) -> Manifest | None:
    """The init container that makes the exporter's own user's credentials, from the engine's
    ``image`` (the exporter's has no shell); None without such a user."""
    if not own_user(db):
        return None
    spec: Manifest = {
        "name": EXPORTER_CREDENTIALS_CONTAINER,
        "image": image,
        "command": [
            "sh", "-c", REDIS_CREDENTIALS, "credentials", MONITORING_DIR,
            str(engine_facts(db).port),
        ],
        "securityContext": container_security_context() | {"readOnlyRootFilesystem": True},
        "volumeMounts": [credentials_mount(read_only=False)],
    }  # fmt: skip
    # The engine's: a pod's requests are the larger of its init containers' and the sum of the
    # others', so this costs nothing, and a quota that asks every container for limits admits it.
    if db.spec.resources is not None:
        spec["resources"] = db.spec.resources.to_wire()
    return spec


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
    if exporter.own_user:
        spec["volumeMounts"] = [credentials_mount()]
    if monitoring.resources is not None:
        spec["resources"] = monitoring.resources.to_wire()
    return spec
