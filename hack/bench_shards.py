"""`make bench`'s sharding comparison: N Databases labelled over K shards, reconciled by one
process (K = 1) or by one process per shard (`--shard`), optionally with etcd and kube-apiserver
pinned to their own CPU and the shard processes to the others."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench_plane import Watcher, control_plane, create_databases
from bench_process import Operator, cpu_seconds


def pinned_cpus() -> tuple[str, str]:
    """(the control plane's CPU, the operators' CPUs) as taskset lists: the first CPU this
    process may use for etcd and kube-apiserver, the rest for the shards."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    return str(cpus[0]), ",".join(str(cpu) for cpu in cpus[1:])


def cpu_list(pid: int) -> str:
    """The CPUs process ``pid`` may run on, as a taskset list ("0,1")."""
    return ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(pid)))


def run_sharded(
    n: int, shards: int, logs: Path, *, labels: int = 2, pin: bool = False
) -> dict[str, Any]:
    """N Databases over ``shards`` processes: one for all (``shards`` = 1, the Databases still
    labelled over ``labels`` shards, so the objects are the same), or one per shard."""
    plane_cpus, operator_cpus = pinned_cpus() if pin else (None, None)
    with control_plane(cpus=plane_cpus) as (plane, api):
        watcher = Watcher(api)
        operators = [
            Operator(
                plane.kubeconfig,
                logs / f"shard-{n}-{shards}-{s}.log",
                resync=60.0,
                shard=f"s{s}" if shards > 1 else None,
                cpus=operator_cpus,
            ).start()
            for s in range(shards)
        ]
        control = [proc.pid for proc in plane.processes.values()]
        cpu0 = [o.cpu() for o in operators]
        control0 = sum(cpu_seconds(pid) for pid in control)
        started = create_databases(api, n, shards=shards if shards > 1 else labels)
        finished = watcher.wait_reconciled(n, 900)
        cpu = [o.cpu() - before for o, before in zip(operators, cpu0, strict=True)]
        figures = {
            "processes": shards,
            "pinned": pin,
            "seconds": finished - started,
            "cpu_s": sum(cpu),
            "cpu_s_per_process": cpu,
            "control_plane_cpu_s": sum(cpu_seconds(pid) for pid in control) - control0,
            # Where the kernel may run them, read back: proof that --pin took.
            "control_plane_cpus": cpu_list(control[0]),
            "operator_cpus": cpu_list(operators[0].proc.pid),
            "peak_rss_mib_per_process": max(o.rss() for o in operators),
        }
        for operator in operators:
            operator.stop()
        watcher.close()
    return figures
