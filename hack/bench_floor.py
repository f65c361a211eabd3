"""`make bench`'s floor: one client process that creates the N Databases and does only the
writes the job needs, built by the operator's own `desired` and `status` code (credentials
Secret, each child, the connection Secret, one status patch), 32 requests at a time, no reads.

`run_floor` starts it as ``hack/bench.py floor KUBECONFIG N`` so its CPU and memory are its own.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_plane import (
    CONCURRENCY,
    ROOT,
    Requests,
    Watcher,
    call,
    control_plane,
    database,
    db_path,
    new_api,
    request_totals,
)
from bench_process import peak_rss_mib

#: The script that runs the floor client in its own process (its `floor` command).
BENCH = ROOT / "hack" / "bench.py"


def floor_client(kubeconfig: Path, n: int) -> dict[str, float]:
    """Create the N Databases and write exactly what each needs, 32 requests at a time."""
    from database_operator import desired
    from database_operator.api.models import Database
    from database_operator.kube.api import Kube
    from database_operator.status import Outcome, Workloads, compute_status

    api = new_api(kubeconfig)
    cpu0, t0, wall0 = time.process_time(), time.monotonic(), time.time()

    def one(i: int) -> None:
        body = database(i)
        namespace = body["metadata"]["namespace"]
        created = call(api, "POST", db_path(namespace), body)
        db = Database.model_validate(created)
        secret = desired.secret(db, desired.generate_password(), desired.generate_password())
        objects = [
            secret,
            *desired.children(db, desired.credentials_checksum(db, secret["data"])),
            desired.connection_secret(db, secret["data"]),
        ]
        for manifest in objects:
            call(api, "POST", Kube.path(manifest["kind"], namespace), manifest)
        status = compute_status(db, Workloads(), db.status, Outcome(), datetime.now(UTC))
        call(
            api,
            "PATCH",
            db_path(namespace, db.name) + "/status",
            {"status": status.to_wire()},
            content_type="application/merge-patch+json",
        )

    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(n)))
    return {
        "seconds": time.monotonic() - t0,
        "cpu_s": time.process_time() - cpu0,
        "peak_rss_mib": peak_rss_mib(os.getpid()),
        "started_wall": wall0,
    }


def run_floor(n: int) -> dict[str, Any]:
    with control_plane() as (plane, api):
        watcher = Watcher(api)
        before = request_totals(api)
        done = subprocess.run(
            [sys.executable, str(BENCH), "floor", str(plane.kubeconfig), str(n)],
            check=True,
            capture_output=True,
            text=True,
        )
        figures = json.loads(done.stdout)
        watcher.wait_reconciled(n, 120)
        watcher.close()
        requests = Requests.between(before, request_totals(api), {("POST", "databases"): n})
        return {
            "seconds": figures["seconds"],
            "cpu_s": figures["cpu_s"],
            "peak_rss_mib": figures["peak_rss_mib"],
            "writes_per_db": requests.writes / n,
            "events_per_db": requests.events / n,
            "reads_per_db": requests.reads / n,
            "requests": requests.summary(),
        }
