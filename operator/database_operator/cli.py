"""`database-operator run | crd | render | version | agent`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from database_operator import __version__

if TYPE_CHECKING:  # the agent's Jobs start through main(): no pydantic before it is needed
    from pydantic.fields import FieldInfo


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


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _variable(name: str) -> str:
    from database_operator.config import ENV_PREFIX

    return ENV_PREFIX + name.upper()


def _is_list(field: FieldInfo) -> bool:
    """A list setting, read comma-separated from its variable."""
    return field.annotation == list[str]


def shown_default(field: FieldInfo) -> str:
    """A setting's default as people read it: off/on, none, or the value."""
    value = field.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == []:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def add_setting_flags(run: argparse.ArgumentParser) -> list[argparse.Action]:
    """`run`'s flags, made from the Settings fields (name, type, default, description), under
    their FlagGroup's heading; returns the actions added, each with its setting as ``dest``.
    Values stay strings for Settings to check, so a bad one is named the same way from a flag
    as from the environment. The namespaces keep kubectl's spelling: ``-n NS``, repeatable, or
    ``-A`` for all of them."""
    from database_operator.config import FlagGroup, Settings

    fields = Settings.model_fields
    group_of = {
        name: next((meta for meta in field.metadata if isinstance(meta, FlagGroup)), None)
        for name, field in fields.items()
    }
    sections = {
        group: run.add_argument_group(group.title)
        for group in dict.fromkeys(group_of.values())
        if group is not None
    }
    actions = []
    for name, field in fields.items():
        group = group_of[name]
        where = run if group is None else sections[group]
        comma = ", comma-separated" if _is_list(field) else ""
        shown = f"default: {shown_default(field)}; env {_variable(name)}{comma}"
        help_text = f"{field.description} ({shown})".replace("%", "%%")
        if name == "namespaces":
            scope = where.add_mutually_exclusive_group()
            actions += [
                scope.add_argument(
                    "-n", "--namespace", dest=name, action="append", metavar="NS", help=help_text
                ),
                scope.add_argument(
                    "-A",
                    "--all-namespaces",
                    dest=name,
                    action="store_const",
                    const=[],
                    help="watch all namespaces",
                ),
            ]
        elif field.annotation is bool:
            actions.append(
                where.add_argument(
                    _flag(name),
                    dest=name,
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=help_text,
                )
            )
        else:
            actions.append(where.add_argument(_flag(name), dest=name, help=help_text))
    return actions


def settings_markdown() -> str:
    """The README's settings table: each setting's flags, variable, default and description,
    made from the same fields and flags as `run` (a default with the operator's version in it
    shows ``<version>``, so the table need not change with each release)."""
    from database_operator.config import Settings

    flags: dict[str, list[str]] = {}
    for action in add_setting_flags(argparse.ArgumentParser(add_help=False)):
        spelled = " / ".join(f"`{option}`" for option in action.option_strings)
        flags.setdefault(action.dest, []).append(spelled)
    rows = []
    for name, field in Settings.model_fields.items():
        env = f"`{_variable(name)}`" + (" (comma-separated)" if _is_list(field) else "")
        default = shown_default(field).replace(__version__, "<version>")
        if default not in ("on", "off", "none"):
            default = f"`{default}`"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| {', '.join(flags[name])} | {env} | {default} | {description} |")
    header = "| flag | env | default | description |\n| --- | --- | --- | --- |\n"
    return header + "\n".join(rows) + "\n"


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
    add_setting_flags(run)
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
