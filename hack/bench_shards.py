"""`make bench`'s sharding comparison: N Databases labelled over two shards, reconciled by one
process or by one process per shard (`--shard`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_plane import Watcher, control_plane, create_databases
from bench_process import Operator


def run_sharded(n: int, shards: int, logs: Path) -> dict[str, Any]:
    """N Databases labelled over two shards: one process for all (``shards`` = 1), or one per
    shard."""
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        operators = [
            Operator(
                plane.kubeconfig,
                logs / f"shard-{n}-{s}.log",
                resync=60.0,
                shard=f"s{s}" if shards > 1 else None,
            ).start()
            for s in range(shards)
        ]
        cpu0 = sum(o.cpu() for o in operators)
        started = create_databases(api, n, shards=2)
        finished = watcher.wait_reconciled(n, 900)
        figures = {
            "processes": shards,
            "seconds": finished - started,
            "cpu_s": sum(o.cpu() for o in operators) - cpu0,
            "peak_rss_mib_per_process": max(o.rss() for o in operators),
        }
        for operator in operators:
            operator.stop()
        watcher.close()
    return figures
