"""`make bench`'s report: the Markdown tables it prints (the README's Performance section shows
them), and the commit the JSON is named after."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def ratio(a: float, b: float) -> str:
    return f" ({a / b:.1f}x)" if b else ""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def collections(pauses: dict[str, float]) -> str:
    if not pauses["count"]:
        return "none"
    return f"{pauses['count']:.0f}, p99 {ms(pauses['p99_s'])}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table, its first column padded to the widest."""
    width = max(len(cell) for cell in [header[0]] + [row[0] for row in rows])
    lines = [
        "| " + " | ".join([header[0].ljust(width), *header[1:]]) + " |",
        "| " + "-" * width + " |" + " --- |" * (len(header) - 1),
    ]
    lines += ["| " + " | ".join([row[0].ljust(width), *row[1:]]) + " |" for row in rows]
    return "\n".join(lines)


def table(
    n: int, floor: dict[str, Any], op: dict[str, Any], each: list[dict[str, Any]] | None = None
) -> str:
    """The floor against the operator; with ``each`` run's figures (more than one), these are
    their medians, and each run's time is shown too."""
    c, r, s, lat = op["create"], op["restart"], op["steady"], op["latency"]
    short = op["latency_short_resync"]
    rows = [
        (
            "time from first create to every Database reconciled",
            f"{floor['seconds']:.1f} s",
            f"{c['seconds']:.1f} s{ratio(c['seconds'], floor['seconds'])}",
        ),
        (
            "client CPU",
            f"{floor['cpu_s']:.1f} s",
            f"{c['cpu_s']:.1f} s{ratio(c['cpu_s'], floor['cpu_s'])}"
            + (f"; {c['gc_s']:.1f} s of it collecting garbage" if "gc_s" in c else ""),
        ),
        (
            "writes per Database on create (+ Events)",
            f"{floor['writes_per_db']:.1f}",
            f"{c['writes_per_db']:.1f} (+ {c['events_per_db']:.1f} Events)",
        ),
        (
            "reads per Database on create",
            f"{floor['reads_per_db']:.1f}",
            f"{c['reads_per_db']:.1f}",
        ),
        ("reconciles per Database on create", "-", f"{c['reconciles_per_db']:.2f}"),
        ("peak memory (RSS)", f"{floor['peak_rss_mib']:.0f} MiB", f"{op['peak_rss_mib']:.0f} MiB"),
        (
            f"restart: time to resume {n}",
            "-",
            f"{r['seconds']:.1f} s, {r['reads_per_db']:.1f} reads and "
            f"{r['writes_per_db'] + r['events_per_db']:.1f} writes per Database",
        ),
        (
            f"steady state, resync {s['resync_s']:.0f} s: writes / reads per Database per resync",
            "-",
            f"{s['writes_per_db_per_resync']:.2f} / {s['reads_per_db_per_resync']:.2f}",
        ),
        (
            f"steady state, resync {s['resync_s']:.0f} s: reconciles / resyncs skipped per "
            "Database per period, CPU per period",
            "-",
            f"{s['reconciles_per_db_per_period']:.2f} / "
            f"{s.get('skipped_per_db_per_period', 0.0):.2f}, {s['cpu_s_per_period']:.2f} s",
        ),
        (
            "spec change -> status p50 / p95, default resync (60 s)",
            f"watch event p95 {lat['watch_p95_s'] * 1000:.0f} ms",
            f"{lat['status_p50_s'] * 1000:.0f} ms / {lat['status_p95_s'] * 1000:.0f} ms",
        ),
        (
            f"spec change -> status p50 / p95, resync {s['resync_s']:.0f} s",
            f"watch event p95 {short['watch_p95_s'] * 1000:.0f} ms",
            f"{short['status_p50_s'] * 1000:.0f} ms / {short['status_p95_s'] * 1000:.0f} ms",
        ),
    ]
    if "gc_full" in short:  # since the operator kept its garbage collector's pauses short
        rows.append(
            (
                "full garbage collections since the restart (count, p99 pause); at resync "
                f"{s['resync_s']:.0f} s",
                "-",
                f"{collections(lat['gc_full'])}; {collections(short['gc_full'])}",
            )
        )
    title = f"N = {n:,}"
    if each and len(each) > 1:
        title += f", median of {len(each)} runs"
        rows.append(
            (
                "time to every Database reconciled, each run",
                ", ".join(f"{run['floor']['seconds']:.1f}" for run in each if run["floor"]) + " s",
                ", ".join(f"{run['operator']['create']['seconds']:.1f}" for run in each) + " s",
            )
        )
    return markdown([title, "floor", "operator"], [list(row) for row in rows])


def shard_table(n: int, runs: list[dict[str, Any]]) -> str:
    """One column per process count; the first is the one the others are compared with."""
    base = runs[0]
    pinned = (
        f", etcd + kube-apiserver on CPU {base['control_plane_cpus']}, "
        f"the operators on CPU {base['operator_cpus']}"
        if base["pinned"]
        else ""
    )

    def name(run: dict[str, Any]) -> str:
        return "1 process" if run["processes"] == 1 else f"{run['processes']} shards"

    rows = [
        [
            "time to every Database reconciled",
            f"{base['seconds']:.1f} s",
            *(f"{r['seconds']:.1f} s{ratio(r['seconds'], base['seconds'])}" for r in runs[1:]),
        ],
        ["CPU (all processes)", *(f"{r['cpu_s']:.1f} s" for r in runs)],
        [
            "CPU per process",
            *(", ".join(f"{c:.1f}" for c in r["cpu_s_per_process"]) + " s" for r in runs),
        ],
        ["CPU of etcd + kube-apiserver", *(f"{r['control_plane_cpu_s']:.1f} s" for r in runs)],
        ["peak RSS per process", *(f"{r['peak_rss_mib_per_process']:.0f} MiB" for r in runs)],
    ]
    return markdown([f"N = {n:,}{pinned}", *(name(r) for r in runs)], rows)


def webhooks_table(n: int, without: dict[str, Any], with_: dict[str, Any]) -> str:
    """The operator's create without and with its admission webhooks, and their latency."""
    rows = [
        [
            "time from first create to every Database reconciled",
            f"{without['seconds']:.1f} s",
            f"{with_['seconds']:.1f} s{ratio(with_['seconds'], without['seconds'])}",
        ],
        [
            "operator CPU",
            f"{without['cpu_s']:.1f} s",
            f"{with_['cpu_s']:.1f} s{ratio(with_['cpu_s'], without['cpu_s'])}",
        ],
        [
            "reads / writes per Database on create",
            f"{without['reads_per_db']:.1f} / {without['writes_per_db']:.1f}",
            f"{with_['reads_per_db']:.1f} / {with_['writes_per_db']:.1f}",
        ],
        ["peak RSS", f"{without['peak_rss_mib']:.0f} MiB", f"{with_['peak_rss_mib']:.0f} MiB"],
    ]
    for hook, figures in with_["webhook_latency"].items():
        if figures["count"]:
            rows.append(
                [
                    f"webhook {hook}: p50 / p99 (operator's histogram), calls",
                    "-",
                    f"{ms(figures['p50_s'])} / {ms(figures['p99_s'])}, {figures['count']:.0f}",
                ]
            )
    for hook, figures in with_["apiserver_webhook_latency"].items():
        rows.append(
            [
                f"{hook}: p50 / p99 (kube-apiserver's histogram), calls",
                "-",
                f"{ms(figures['p50_s'])} / {ms(figures['p99_s'])}, {figures['count']:.0f}",
            ]
        )
    return markdown([f"N = {n:,}, operator", "webhooks off", "webhooks on"], rows)


def rss_table(points: list[dict[str, float]]) -> str:
    """Peak RSS after creating each count, and what each Database added since the last."""
    rows = [
        ["peak RSS", *(f"{p['peak_rss_mib']:.0f} MiB" for p in points)],
        ["RSS now", *(f"{p['rss_mib']:.0f} MiB" for p in points)],
        [
            "per Database added (peak)",
            *(
                f"{(p['peak_rss_mib'] - q['peak_rss_mib']) * 1024 / (p['n'] - q['n']):.0f} KiB"
                if q
                else "-"
                for q, p in zip([None, *points[:-1]], points, strict=True)
            ),
        ],
    ]
    return markdown(["one operator, Databases created", *(f"{p['n']:,.0f}" for p in points)], rows)


def tracing_table(n: int, runs: list[dict[str, Any]], off_ns: float) -> str:
    off = runs[0]
    spans = next((r["spans_per_trace"] for r in runs if "spans_per_trace" in r), 0.0)
    per_reconcile_us = off_ns * spans / 1000
    share = per_reconcile_us / 1e6 / (off["cpu_s"] / n)
    names = {"off": "off", "jaeger": "on, to Jaeger", "absent": "on, no collector"}
    lines = [
        f"| N = {n:,}, tracing | " + " | ".join(names[r["tracing"]] for r in runs) + " |",
        "| --- |" + " --- |" * len(runs),
        "| time to every Database reconciled | "
        + " | ".join(
            f"{r['seconds']:.1f} s ({r['seconds'] / off['seconds'] - 1:+.0%})" for r in runs
        )
        + " |",
        "| operator CPU | "
        + " | ".join(f"{r['cpu_s']:.1f} s ({r['cpu_s'] / off['cpu_s'] - 1:+.0%})" for r in runs)
        + " |",
        "| peak RSS | " + " | ".join(f"{r['peak_rss_mib']:.0f} MiB" for r in runs) + " |",
        "| spans dropped (counted) | "
        + " | ".join(f"{r['spans_dropped']:.0f}" for r in runs)
        + " |",
        f"| tracing off: {off_ns:.0f} ns per span x {spans:.1f} spans per reconcile | "
        f"{per_reconcile_us:.1f} µs per reconcile, {share:.3%} of its CPU |"
        + " |"
        * (len(runs) - 1),
    ]
    return "\n".join(lines)


def commit() -> str:
    with contextlib.suppress(Exception):
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    return "unknown"
