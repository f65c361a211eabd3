"""`make bench`: the operator against a floor client, on one local control plane, side by side.

For each N (100 and 1,000 by default; `N=` or `--n` to change) the bench starts a fresh
etcd + kube-apiserver for each contender, interleaved (floor, operator, next N: floor,
operator) so both see the same machine; `--runs K` repeats that K times and reports the median
of each figure (each run's in the JSON):

- floor: one process that creates the N Databases and does only the writes the job needs,
  built by the operator's own `desired` and `status` code: credentials Secret, each child,
  the connection Secret, one status patch. 32 requests at a time, no reads.
- operator: `database-operator run -A`, while the bench creates the same N Databases, 32 at a
  time. Then it is restarted (resume), runs in steady state with a 5 s resync, and its
  spec-change -> status latency is measured against the watch-event floor.
- `--webhooks`: the operator's create again, with its admission webhooks served and registered
  as `make demo` runs them; their p50/p99 as the operator and kube-apiserver time them.

Request counts come from kube-apiserver's own `apiserver_request_total`, less the bench's own
creates; CPU and peak RSS from /proc of the measured process. `--shards-n` (2,000 by default;
0: skip) compares one process with shard processes (`--shard-counts`, 1,2 by default; `--pin`
puts etcd and kube-apiserver on the first CPU, the shards on the others). `--tracing-n` (1,000
by default; 0: skip) compares tracing off, on (every reconcile sampled, exported to a real
Jaeger) and on with no collector at all. `--rss-n` (off by default) is one operator's peak RSS
after creating each count in turn. Figures are printed as tables and written as JSON (`--out`,
default .local/bench/<commit>.json) for comparison between commits.

The parts: bench_args (the command line), bench_plane (control plane, requests counted, the
watch), bench_process (the operator process, /proc), bench_floor, bench_operator (create,
restart, steady, latency, webhooks, RSS), bench_shards, bench_tracing, bench_report (tables),
bench_stats (arithmetic).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.controlplane and tests.jaeger

from bench_args import parser  # noqa: E402
from bench_floor import floor_client, run_floor  # noqa: E402
from bench_operator import run_operator, run_rss, run_webhooks  # noqa: E402
from bench_report import (  # noqa: E402
    commit,
    rss_table,
    shard_table,
    table,
    tracing_table,
    webhooks_table,
)
from bench_shards import pinned_cpus, run_sharded  # noqa: E402
from bench_stats import median_of  # noqa: E402
from bench_tracing import MODES, off_span_ns, run_traced  # noqa: E402


def show(table: str) -> None:
    """A table, apart from what is around it (Markdown joins lines that touch)."""
    print(f"\n{table}\n", flush=True)


def bench_runs(n: int, options: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """N's runs, interleaved (floor, operator, operator with webhooks; again), each on a fresh
    control plane: the medians under the keys one run has always had, each run under "each"."""
    each: list[dict[str, Any]] = []
    runs = options.runs
    for k in range(runs):
        of = f" (run {k + 1} of {runs})" if runs > 1 else ""
        run: dict[str, Any] = {"floor": None}
        if not options.operator_only:
            print(f"N = {n}: floor{of} ...", flush=True)
            run["floor"] = run_floor(n)
        print(f"N = {n}: operator{of} ...", flush=True)
        run["operator"] = run_operator(n, logs)
        if options.webhooks:
            print(f"N = {n}: operator with webhooks{of} ...", flush=True)
            run["webhooks"] = run_webhooks(n, logs)
        each.append(run)
    result: dict[str, Any] = median_of(each)
    if options.webhooks:
        without, with_ = result["operator"]["create"]["seconds"], result["webhooks"]["seconds"]
        result["webhooks"]["seconds_vs_without"] = with_ / without if without else None
    if runs > 1:
        result["each"] = each
    if result["floor"]:
        show(table(n, result["floor"], result["operator"], each))
    else:
        print(json.dumps(result["operator"], indent=1), flush=True)
    if options.webhooks:
        show(webhooks_table(n, result["operator"]["create"], result["webhooks"]))
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["floor"]:  # the floor client's own process
        print(json.dumps(floor_client(Path(args[1]), int(args[2]))))
        return 0
    options = parser((__doc__ or "").splitlines()[0]).parse_args(args)
    if options.pin and options.shards_n:
        pinned_cpus()  # with a single CPU, refuse now rather than after the other runs
    logs = ROOT / ".local" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "commit": commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": {},
        "sharding": None,
        "tracing": None,
        "rss": None,
    }
    for n in options.n:
        report["runs"][str(n)] = bench_runs(n, options, logs)
    if options.shards_n:
        shard_counts = options.shard_counts
        print(
            f"N = {options.shards_n}: {', '.join(map(str, shard_counts))} processes ...", flush=True
        )
        by_count = [
            run_sharded(options.shards_n, k, logs, labels=max(shard_counts), pin=options.pin)
            for k in shard_counts
        ]
        report["sharding"] = {
            "n": options.shards_n,
            "pinned": options.pin,
            # "one" and "shards": the keys of the JSON before --shard-counts, for comparisons.
            "one": next((r for r in by_count if r["processes"] == 1), None),
            "shards": next((r for r in by_count if r["processes"] > 1), None),
            "by_count": {str(r["processes"]): r for r in by_count},
        }
        show(shard_table(options.shards_n, by_count))
    if options.tracing_n:
        print(f"N = {options.tracing_n}: tracing off, on (Jaeger), on (no collector) ...")
        runs = [run_traced(options.tracing_n, logs, mode) for mode in MODES]
        off_ns = off_span_ns()
        report["tracing"] = {"n": options.tracing_n, "runs": runs, "off_span_ns": off_ns}
        show(tracing_table(options.tracing_n, runs, off_ns))
    if options.rss_n:
        print(f"RSS: one operator, creating up to {max(options.rss_n)} ...", flush=True)
        points = run_rss(options.rss_n, logs)
        report["rss"] = {"points": points}
        show(rss_table(points))
    out = options.out or logs / f"{report['commit']}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
