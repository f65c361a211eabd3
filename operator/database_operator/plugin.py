"""`kubectl database`: a kubectl plugin (kubectl runs the executable `kubectl-database` from PATH)
for what people on call do with a Database and its backups — take a backup and follow it, see
a Database and its backups at a glance, write the Database that restores a backup.

It talks to the cluster of the current kubeconfig context as kubectl would (KUBECONFIG, else
~/.kube/config, else the pod's service account), through `kube.api.Kube`; only the watch that
follows a backup is its own (Kube has none), and its failures are classified by kube/errors.py
too, so every API failure reaches the user as one `ApiError`. The pure parts (names, sizes, the
status summary and its rendering, the restore manifest) take plain data and are tested offline.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from database_operator.api.backup import (
    BACKUP_KIND,
    BACKUP_PLURAL,
    BackupPhase,
    DatabaseBackup,
)
from database_operator.api.models import GROUP, KIND, SWITCHOVER_ANNOTATION, VERSION, Database
from database_operator.backups.schedule import backup_for
from database_operator.backups.state import BACKUP_HEALTHY
from database_operator.engines import major_version
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError, UnreachableError, api_error
from database_operator.manifest import Manifest

FIELD_MANAGER = "kubectl-database"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DONE = (BackupPhase.COMPLETED, BackupPhase.FAILED)
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?|(\d+)")


class PluginError(Exception):
    """Something the user must change (a name, a flag, the kubeconfig): not an API failure."""


# --- pure parts -----------------------------------------------------------------------------------


def duration(text: str) -> float:
    """Seconds in a duration as kubectl writes it: "90s", "10m", "1h30m", or plain seconds."""
    found = _DURATION.fullmatch(text)
    hours, minutes, seconds, plain = (
        (int(part or 0) for part in found.groups()) if found else [0] * 4
    )
    total = hours * 3600 + minutes * 60 + seconds + plain
    if total <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 10m or 1h30m")
    return float(total)


def human_size(size: int) -> str:
    """Bytes for people, in powers of 1024: "512 B", "12.3 MiB"."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


def _when(moment: datetime | None) -> str | None:
    return f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" if moment else None


def summarize(db: Database, backups: Sequence[DatabaseBackup]) -> dict[str, Any]:
    """What `status` shows, as JSON-ready data: `-o json` prints it, `render` lays it out."""
    status = db.status
    conditions = [
        {"type": c.type, "status": c.status.value, "reason": c.reason, "message": c.message}
        for c in status.conditions or []
    ]
    records = {
        key: {"name": record.name, "time": _when(record.time)} if record else None
        for key, record in (
            ("lastSuccessfulBackup", status.last_successful_backup),
            ("lastFailedBackup", status.last_failed_backup),
        )
    }
    restored = status.restored_from
    mine = sorted(
        (b for b in backups if b.spec.database == db.name),
        key=lambda b: (str(b.metadata.get("creationTimestamp", "")), b.name),
        reverse=True,
    )
    return {
        "name": db.name,
        "namespace": db.namespace,
        "engine": db.spec.engine.value,
        "version": status.version or db.spec.version,
        "phase": status.phase.value if status.phase else None,
        "replicas": db.spec.replicas if status.replicas is None else status.replicas,
        "readyReplicas": status.ready_replicas or 0,
        "endpoint": status.endpoint,
        "conditions": conditions,
        "backupHealthy": next((c for c in conditions if c["type"] == BACKUP_HEALTHY), None),
        **records,
        "restoredFrom": restored.to_wire() if restored else None,
        "currentPrimary": status.current_primary,
        "instances": [i.to_wire() for i in status.instances or ()],
        "backups": [
            {
                "name": b.name,
                "phase": b.status.phase.value if b.status.phase else None,
                "completedAt": _when(b.status.completed_at),
                "size": b.status.size,
                "location": b.status.location,
                "message": b.status.message,
            }
            for b in mine
        ],
    }


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["  none"]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _record(record: dict[str, Any] | None) -> str:
    return f"{record['name']} at {record['time']}" if record else "-"


def render(summary: dict[str, Any]) -> str:
    """The summary for people, laid out like `kubectl describe`."""
    healthy, restored = summary["backupHealthy"], summary["restoredFrom"]
    lines = [
        f"Database:         {summary['namespace']}/{summary['name']}",
        f"Engine:           {summary['engine']} {summary['version'] or '(default version)'}",
        f"Phase:            {summary['phase'] or '- (not reconciled yet)'}",
        f"Ready replicas:   {summary['readyReplicas']}/{summary['replicas']}",
        f"Endpoint:         {summary['endpoint'] or '-'}",
    ]
    if restored:
        source = restored.get("backup") or restored["location"]
        lines.append(f"Restored from:    {source} at {restored.get('time') or '-'}")
    conditions = [
        [c[k] for k in ("type", "status", "reason", "message")] for c in summary["conditions"]
    ]
    instances = [
        [
            i["name"],
            i["role"],
            "yes" if i["ready"] else "no",
            "-" if i.get("lagBytes") is None else human_size(i["lagBytes"]),
            i.get("pod") or "-",
        ]
        for i in summary.get("instances") or ()
    ]
    backups = [
        [
            b["name"],
            b["phase"] or "-",
            b["completedAt"] or "-",
            "-" if b["size"] is None else human_size(b["size"]),
            b["location"] or (b["phase"] == BackupPhase.FAILED and b["message"]) or "-",
        ]
        for b in summary["backups"]
    ]
    if instances:
        lines += [
            "",
            f"Instances (primary: {summary.get('currentPrimary') or 'none'}):",
            *_table(["NAME", "ROLE", "READY", "LAG", "POD"], instances),
        ]
    lines += [
        "",
        "Conditions:",
        *_table(["TYPE", "STATUS", "REASON", "MESSAGE"], conditions),
        "",
        "Backups:",
        "  BackupHealthy:    "
        + (f"{healthy['status']} ({healthy['reason']}) {healthy['message']}" if healthy else "-"),
        f"  Last successful:  {_record(summary['lastSuccessfulBackup'])}",
        f"  Last failed:      {_record(summary['lastFailedBackup'])}",
        *_table(["NAME", "PHASE", "COMPLETED", "SIZE", "LOCATION"], backups),
    ]
    return "\n".join(lines) + "\n"


def restore_manifest(backup: DatabaseBackup, name: str, storage: str) -> Manifest:
    """A new Database ``name`` restored from ``backup``: its engine, its major version (the
    Database's image is that major's newest), a volume of ``storage``."""
    phase = backup.status.phase
    if phase != BackupPhase.COMPLETED:
        raise PluginError(
            f"DatabaseBackup {backup.name} is {phase or 'not started'}, not Completed: "
            "there is nothing to restore from it"
        )
    if not backup.status.engine:
        raise PluginError(f"DatabaseBackup {backup.name} does not record its engine")
    spec: Manifest = {"engine": backup.status.engine}
    major = major_version(backup.status.engine_version or "")
    if major is not None:
        spec["version"] = str(major)
    spec |= {"storage": {"size": storage}, "restore": {"backup": backup.name}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": backup.namespace},
        "spec": spec,
    }


# --- the cluster ----------------------------------------------------------------------------------


@dataclass
class Session:
    """The API of the chosen context, and the namespace a command acts in."""

    kube: Kube
    namespace: str

    @property
    def host(self) -> str:
        return str(self.kube.api.configuration.host)

    def find(self, kind: str, name: str) -> Manifest | None:
        return asyncio.run(self.kube.get(kind, self.namespace, name))

    def get(self, kind: str, name: str) -> Manifest:
        found = self.find(kind, name)
        if found is None:
            raise PluginError(f'{kind} "{name}" not found in namespace "{self.namespace}"')
        return found

    def create(self, manifest: Manifest) -> Manifest:
        created = asyncio.run(self.kube.create(manifest))
        assert created is not None  # None is for exist_ok
        return created

    def items(self, kind: str) -> list[Manifest]:
        async def every() -> list[Manifest]:
            pages = self.kube.list_pages(kind, self.namespace)
            return [item async for page in pages for item in page]

        return asyncio.run(every())


def connect(kubeconfig: str | None, context: str | None, namespace: str | None) -> Session:
    """The API as kubectl would reach it, and the namespace: ``namespace``, else the context's,
    else (in a pod) the service account's, else "default"."""
    configuration = client.Configuration()
    try:
        config.load_kube_config(kubeconfig, context, client_configuration=configuration)
        contexts, current = config.list_kube_config_contexts(kubeconfig)
        chosen = (
            next((c for c in contexts if c["name"] == context), current) if context else current
        )
        default = chosen.get("context", {}).get("namespace")
    except config.ConfigException as error:
        where = f"kubeconfig {kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'}"
        if kubeconfig or context:
            raise PluginError(f"{where}: {error}") from error
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            raise PluginError(f"{where}: {error} (and not in a pod either)") from error
        default = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    api = Kube(client.ApiClient(configuration), field_manager=FIELD_MANAGER)
    return Session(api, namespace or default or "default")


def changes(session: Session, since: Manifest, deadline: float) -> Iterator[Manifest]:
    """Each new version of the DatabaseBackup ``since`` until ``deadline`` (time.monotonic),
    from a watch that starts at the version ``since`` is: no change is missed, none polled for."""
    name = since["metadata"]["name"]
    version = since["metadata"]["resourceVersion"]
    custom = client.CustomObjectsApi(session.kube.api)
    while (left := deadline - time.monotonic()) > 0:
        events = watch.Watch().stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            session.namespace,
            BACKUP_PLURAL,
            field_selector=f"metadata.name={name}",
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=math.ceil(left),
            _request_timeout=left + 10,
        )
        try:
            for event in events:
                found = event["raw_object"]
                version = found["metadata"]["resourceVersion"]
                if event["type"] == "DELETED":
                    raise PluginError(f"DatabaseBackup {name} was deleted before it finished")
                if event["type"] != "BOOKMARK":
                    yield found
        except (ApiException, HTTPError, OSError) as raw:
            # Read as every other failed call is (kube/errors.py).
            error = api_error(raw, "WATCH", Kube.path(BACKUP_KIND, session.namespace, name))
            if not error.expired:
                raise error from raw
            # The version is too old to watch from: go on from the object as it is now.
            current = session.get(BACKUP_KIND, name)
            version = current["metadata"]["resourceVersion"]
            yield current


def follow(session: Session, created: Manifest, timeout: float) -> DatabaseBackup | None:
    """Print each phase the backup enters until it completes or fails (None: ``timeout`` first)."""
    shown = None
    deadline = time.monotonic() + timeout
    for manifest in itertools.chain([created], changes(session, created, deadline)):
        backup = DatabaseBackup.model_validate(manifest)
        phase = backup.status.phase
        if phase is not None and phase != shown:
            print(f"phase: {phase.value}", flush=True)
            shown = phase
        if phase in DONE:
            return backup
    return None


# --- the commands ---------------------------------------------------------------------------------


def _backup(session: Session, args: argparse.Namespace) -> int:
    db = Database.model_validate(session.get(KIND, args.name))
    created = session.create(backup_for(db, datetime.now(UTC), scheduled=False))
    name = created["metadata"]["name"]
    print(name, flush=True)
    if not args.wait:
        return 0
    done = follow(session, created, args.timeout)
    if done is None:
        raise PluginError(
            f"DatabaseBackup {name} did not finish within {args.timeout:g}s; it goes on "
            f"(kubectl get dbbackup {name} -n {session.namespace})"
        )
    if done.status.phase == BackupPhase.FAILED:
        raise PluginError(f"DatabaseBackup {name} failed: {done.status.message or 'no message'}")
    print(f"location: {done.status.location or '-'}")
    print(f"size: {'-' if done.status.size is None else human_size(done.status.size)}")
    return 0


def _status(session: Session, args: argparse.Namespace) -> int:
    db = Database.model_validate(session.get(KIND, args.name))
    backups = [DatabaseBackup.model_validate(b) for b in session.items(BACKUP_KIND)]
    summary = summarize(db, backups)
    sys.stdout.write(
        json.dumps(summary, indent=2) + "\n" if args.output == "json" else render(summary)
    )
    return 0


def _restore(session: Session, args: argparse.Namespace) -> int:
    backup = DatabaseBackup.model_validate(session.get(BACKUP_KIND, args.source))
    storage = args.storage
    if storage is None:
        # As large as the volume of the Database it was taken from, if that is still there.
        found = session.find(KIND, backup.spec.database) or {}
        storage = (found.get("spec", {}).get("storage") or {}).get("size")
        if storage is None:
            raise PluginError(
                f"give --storage SIZE: Database {backup.spec.database} is gone, or has no volume"
            )
    manifest = restore_manifest(backup, args.name, str(storage))
    if not args.apply:
        sys.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
        return 0
    session.create(manifest)
    print(f"database.{GROUP}/{args.name} created")
    return 0


def switchover_request(to: str | None, now: datetime) -> str:
    """The value of the switchover annotation: the instance (or ``any``), and the time that
    makes the request new."""
    return f"{to or 'any'} {now.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _switchover(session: Session, args: argparse.Namespace) -> int:
    db = Database.model_validate(session.get(KIND, args.name))
    if db.spec.failover is None or not db.spec.failover.enabled:
        raise PluginError(f"Database {args.name} has no spec.failover: it has no instances")
    before = db.status.current_primary
    request = switchover_request(args.to, datetime.now(UTC))
    patch = {"metadata": {"annotations": {SWITCHOVER_ANNOTATION: request}}}
    asyncio.run(session.kube.merge_patch(KIND, session.namespace, args.name, patch))
    print(f"switchover asked: {request} (the primary was {before or 'none'})", flush=True)
    if not args.wait:
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        status = Database.model_validate(session.get(KIND, args.name)).status
        now = status.current_primary
        if now and now != before and (args.to is None or now == args.to):
            print(f"primary: {now}")
            return 0
        time.sleep(1)
    raise PluginError(
        f"the primary is still {before or 'none'} after {args.timeout:g}s: see the Events of "
        f"Database {args.name} (SwitchoverImpossible says why)"
    )


def parser() -> argparse.ArgumentParser:
    # Accepted before and after the command; SUPPRESS keeps a command's parser from resetting
    # what was given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namespace",
        default=argparse.SUPPRESS,
        metavar="NS",
        help="namespace (default: the context's)",
    )
    common.add_argument(
        "--context", default=argparse.SUPPRESS, metavar="NAME", help="kubeconfig context to use"
    )
    common.add_argument(
        "--kubeconfig", default=argparse.SUPPRESS, metavar="FILE", help="kubeconfig file to use"
    )
    root = argparse.ArgumentParser(
        prog="kubectl database",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Back up, inspect and restore the Databases of database-operator.",
        epilog="examples:\n"
        "  kubectl database backup orders -n shop --wait\n"
        "  kubectl database status orders -n shop\n"
        "  kubectl database restore orders-copy --from orders-20250102-020000 -n shop --apply\n"
        "  kubectl database switchover orders --to orders-2 -n shop --wait",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    backup = commands.add_parser(
        "backup",
        parents=[common],
        help="take a backup of a Database now",
        description="Create a DatabaseBackup of Database NAME, named NAME-<UTC yyyymmdd-hhmmss>, "
        "and print its name. With --wait, follow it until it completes (print where it is "
        "stored and its size; exit 0) or fails (print why; exit 1).",
    )
    backup.add_argument("name", metavar="NAME", help="the Database")
    backup.add_argument("--wait", action="store_true", help="follow the backup until it ends")
    backup.add_argument(
        "--timeout",
        type=duration,
        default=duration("10m"),
        metavar="DURATION",
        help="with --wait, give up after this long, e.g. 90s, 10m, 1h (default: 10m)",
    )
    backup.set_defaults(func=_backup)

    status = commands.add_parser(
        "status",
        parents=[common],
        help="show a Database, its conditions and its backups",
        description="Show Database NAME: engine and version, phase, ready replicas, endpoint, "
        "conditions, and its backups newest first, with BackupHealthy and the last successful "
        "and failed backups.",
    )
    status.add_argument("name", metavar="NAME", help="the Database")
    status.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or json"
    )
    status.set_defaults(func=_status)

    restore = commands.add_parser(
        "restore",
        parents=[common],
        help="print (or --apply) a new Database restored from a backup",
        description="Print a Database NAME restored from DatabaseBackup BACKUP: the backup's "
        "engine, its major version, and a volume of --storage. Pipe it to `kubectl apply -f -`, "
        "or give --apply to create it.",
    )
    restore.add_argument("name", metavar="NAME", help="the new Database")
    restore.add_argument(
        "--from", dest="source", required=True, metavar="BACKUP", help="a Completed DatabaseBackup"
    )
    restore.add_argument(
        "--storage",
        metavar="SIZE",
        help="volume size, e.g. 10Gi (default: that of the Database backed up, if it exists)",
    )
    restore.add_argument("--apply", action="store_true", help="create the Database")
    restore.set_defaults(func=_restore)

    switchover = commands.add_parser(
        "switchover",
        parents=[common],
        help="move a Database's primary to another instance (spec.failover)",
        description="Ask the operator to make instance --to (default: the most advanced "
        "replica) the primary of Database NAME: the old primary stops cleanly (every write it "
        "acknowledged reaches the replicas), the new one is promoted, the old one follows it. "
        "With --wait, wait until the Database's status names the new primary.",
    )
    switchover.add_argument("name", metavar="NAME", help="the Database")
    switchover.add_argument("--to", metavar="INSTANCE", help="the instance, e.g. NAME-2")
    switchover.add_argument("--wait", action="store_true", help="wait for the new primary")
    switchover.add_argument(
        "--timeout",
        type=duration,
        default=duration("1m"),
        metavar="DURATION",
        help="with --wait, give up after this long (default: 1m)",
    )
    switchover.set_defaults(func=_switchover)
    return root


def explain(error: Exception, host: str) -> str:
    """One line for people of an expected failure."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return (
            f"the server sent what this plugin does not understand ({where}: {first['msg']}): "
            "is the plugin older than the operator?"
        )
    if isinstance(error, UnreachableError):
        # The innermost reason ("Connection refused"), not urllib3's retry story.
        reason, cause = error.message, error.__cause__
        while cause is not None:
            reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else reason
            inner = getattr(cause, "reason", None)
            cause = inner if isinstance(inner, BaseException) else cause.__cause__
        return f"cannot reach the API server at {host}: {reason}"
    return error.message if isinstance(error, ApiError) else str(error)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        options = ("kubeconfig", "context", "namespace")
        session = connect(*(getattr(args, option, None) for option in options))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return int(args.func(session, args))
    except (PluginError, ApiError, ValidationError) as error:
        print(f"error: {explain(error, session.host)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        session.kube.close()


if __name__ == "__main__":
    sys.exit(main())
