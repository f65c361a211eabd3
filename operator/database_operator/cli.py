"""`database-operator run | crd | render | version`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from database_operator import __version__


def _crd(_: argparse.Namespace) -> int:
    from database_operator.api.crd import crd_yaml

    sys.stdout.write(crd_yaml())
    return 0


def _version(_: argparse.Namespace) -> int:
    print(f"database-operator {__version__}")
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="database-operator",
        description="A Kubernetes operator that turns Database resources into running databases.",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "crd", help="print the Database CRD generated from the API models"
    ).set_defaults(func=_crd)
    commands.add_parser("version", help="print the version").set_defaults(func=_version)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
