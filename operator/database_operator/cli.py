"""`database-operator run | crd | render | version | agent`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from database_operator import __version__


def _crd(_: argparse.Namespace) -> int:
    from database_operator.api.crd import crd_yaml
    from database_operator.webhooks.configuration import default_conversion

    sys.stdout.write(crd_yaml(default_conversion()))
    return 0


def _version(_: argparse.Namespace) -> int:
    print(f"database-operator {__version__}")
    return 0


def _render(args: argparse.Namespace) -> int:
    """Print the children of each Database in the file(s), built offline by the same builders."""
    import yaml
    from pydantic import ValidationError

    from database_operator import desired
    from database_operator.api.models import KIND, Database

    documents: list[dict[str, Any]] = []
    for path in args.filename:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        for doc in yaml.safe_load_all(text):
            if not doc or doc.get("kind") != KIND:
                continue
            try:
                db = Database.model_validate(doc)
            except ValidationError as error:
                print(f"{path}: invalid Database: {error}", file=sys.stderr)
                return 1
            db.metadata.setdefault("namespace", args.namespace)
            if db.spec.credentials_secret_ref is None:
                secret = desired.secret(db, "placeholder", "placeholder")
                # The password is generated in the cluster, once; never printed.
                secret["data"] = {key: "<generated>" for key in secret["data"]}
                documents.append(secret)
            documents.extend(desired.children(db))
            documents.append(_connection_preview(db))
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    return 0


def _connection_preview(db: Any) -> dict[str, Any]:
    """The connection Secret with its entries in plain text and the credentials left out."""
    import base64

    from database_operator import desired

    placeholder = base64.b64encode(b"PASSWORD").decode()
    username = base64.b64encode(b"USERNAME").decode()
    preview = desired.connection_secret(db, {"username": username, "password": placeholder})
    entries = {key: base64.b64decode(value).decode() for key, value in preview.pop("data").items()}
    preview["stringData"] = {
        key: value.replace("PASSWORD", "<from the credentials Secret>").replace(
            "USERNAME", "<username>"
        )
        for key, value in entries.items()
    }
    return dict(preview)


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from pydantic import ValidationError

    from database_operator import logs
    from database_operator.config import ENV_PREFIX, Settings

    flags = {
        key: value
        for key, value in vars(args).items()
        if key in Settings.model_fields and value is not None
    }
    if args.all_namespaces:
        flags["namespaces"] = []
    try:
        settings = Settings(**flags)
    except ValidationError as error:
        for problem in error.errors():
            name = str(problem["loc"][0]) if problem["loc"] else "?"
            print(
                f"invalid setting {name} (flag --{name.replace('_', '-')}, "
                f"env {ENV_PREFIX}{name.upper()}): {problem['msg']} (got {problem.get('input')!r})",
                file=sys.stderr,
            )
        return 2
    if settings.tracing:
        from database_operator import tracing

        try:
            tracing.check()
        except tracing.TracingConfigError as error:
            print(f"invalid tracing setting: {error}", file=sys.stderr)
            return 2
    logs.setup(settings.log_level, settings.log_format)
    from database_operator import runner

    asyncio.run(runner.run(settings))
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="database-operator",
        description="A Kubernetes operator that turns Database resources into running databases.",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run the operator against the in-cluster config or the current kubeconfig",
        description="Run the operator. Every flag overrides the DATABASE_OPERATOR_* env variable "
        "of the same name.",
    )
    scope = run.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        dest="namespaces",
        action="append",
        metavar="NS",
        help="watch this namespace (repeatable, globs allowed)",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch all namespaces")
    run.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    run.add_argument("--log-format", help="json or console")
    run.add_argument("--metrics-port", help="port of /metrics (0: off)")
    run.add_argument("--health-port", help="port of /healthz and /readyz (0: off)")
    run.add_argument("--resync-interval", help="seconds between periodic reconciles")
    run.add_argument(
        "--retry-max-delay", help="longest wait between attempts at a failing Database (seconds)"
    )
    run.add_argument("--workers", help="Databases reconciled at the same time")
    run.add_argument(
        "--shard", help="reconcile only Databases labelled databases.example.com/shard=SHARD"
    )
    election = run.add_argument_group("leader election (HA, on a coordination.k8s.io Lease)")
    election.add_argument(
        "--leader-election",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect the one replica that reconciles; the others stand by",
    )
    election.add_argument("--lease-name", help="name of the Lease")
    election.add_argument("--lease-namespace", help="namespace of the Lease (POD_NAMESPACE)")
    election.add_argument("--lease-duration", help="seconds before a silent leader is replaced")
    election.add_argument("--renew-deadline", help="seconds the leader tries to renew, then stops")
    election.add_argument("--retry-period", help="seconds between renewals and between tries")
    hooks = run.add_argument_group("webhooks (admission and conversion, HTTPS)")
    hooks.add_argument("--webhook-port", help="port of the webhooks (0: off)")
    hooks.add_argument("--webhook-address", help="address the webhooks listen on")
    hooks.add_argument(
        "--webhook-service",
        help="NAMESPACE/NAME of the webhook Service: keep an own CA and certificate for it",
    )
    hooks.add_argument("--webhook-secret", help="Secret of the own CA and certificate")
    hooks.add_argument("--webhook-cert-dir", help="folder with tls.crt and tls.key to serve")
    hooks.add_argument(
        "--webhook-url", help="outside the cluster: the https:// URL the API server calls"
    )
    hooks.add_argument("--webhook-configuration", help="name of the webhook configurations")
    hooks.add_argument(
        "--image-registries", help="comma-separated registry prefixes images must start with"
    )
    run.add_argument(
        "--agent-image", help="image of the backup, restore and delete Jobs' agent (ours)"
    )
    run.add_argument(
        "--tracing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="export OpenTelemetry traces (OTLP; configured by the OTEL_* variables)",
    )
    run.set_defaults(func=_run)

    render = commands.add_parser(
        "render", help="print the children a Database file would get (offline)"
    )
    render.add_argument("-f", "--filename", action="append", required=True, help="file, or -")
    render.add_argument("--namespace", default="default", help="namespace when the file has none")
    render.set_defaults(func=_render)

    commands.add_parser(
        "crd", help="print the Database CRD generated from the API models"
    ).set_defaults(func=_crd)
    commands.add_parser("version", help="print the version").set_defaults(func=_version)
    commands.add_parser(
        "agent",
        help="store, fetch or delete a backup (what the backup Jobs run; "
        "`database-operator agent --help`)",
        add_help=False,
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["agent"]:
        # The backup Jobs' agent (backups/agent.py) has its own command line; it imports only
        # what it needs, so a Job's container starts fast.
        from database_operator.backups import agent

        return agent.main(argv[1:])
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
