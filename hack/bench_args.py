"""`make bench`'s command line. No sibling imports, so the unit tests load this file on its own."""

from __future__ import annotations

import argparse
from pathlib import Path


def counts(text: str) -> list[int]:
    """ "100,1000" -> [100, 1000]; an argparse type, so a bad list is a usage error."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of counts: {text!r}") from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"counts must be at least 1: {text!r}")
    return values


def at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--n",
        type=counts,
        default="100,1000",
        metavar="N,...",
        help="Database counts, floor against operator at each (default: 100,1000)",
    )
    parser.add_argument(
        "--runs",
        type=at_least_one,
        default=1,
        metavar="K",
        help="runs of each N, interleaved; the tables show each figure's median (default: 1)",
    )
    parser.add_argument(
        "--webhooks",
        action="store_true",
        help="each N's operator create again with its admission webhooks served: its time "
        "against the run without them, the webhooks' p50/p99",
    )
    parser.add_argument(
        "--shards-n",
        type=int,
        default=2000,
        metavar="N",
        help="Databases for the sharding comparison (default: 2000; 0: skip)",
    )
    parser.add_argument(
        "--shard-counts",
        type=counts,
        default="1,2",
        metavar="K,...",
        help="processes the sharding compares (default: 1,2; 1: one unsharded process)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="sharding: etcd + kube-apiserver on the first CPU (taskset), the shards on the rest",
    )
    parser.add_argument(
        "--tracing-n",
        type=int,
        default=1000,
        metavar="N",
        help="Databases for the tracing cost (default: 1000; 0: skip)",
    )
    parser.add_argument(
        "--rss-n",
        type=counts,
        default=[],
        metavar="N,...",
        help="one operator's peak RSS after creating each count in turn, e.g. 1000,2000,5000 "
        "(default: skip)",
    )
    parser.add_argument("--operator-only", action="store_true", help="skip the floor")
    parser.add_argument("--out", type=Path, help="JSON output (default .local/bench/<commit>.json)")
    return parser
