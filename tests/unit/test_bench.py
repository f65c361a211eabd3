"""hack/bench_*.py's pure parts: the command line, the arithmetic (percentiles, the medians
`--runs` reports, webhook latencies read from Prometheus histograms) and the tables."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.hack import load

stats: Any = load("bench_stats")
report: Any = load("bench_report")
args: Any = load("bench_args")


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, without their padding."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def operator_run(seconds: float) -> dict[str, Any]:
    create = {
        "seconds": seconds,
        "cpu_s": 2.0,
        "peak_rss_mib": 120.0,
        "writes_per_db": 5.0,
        "events_per_db": 1.0,
        "reads_per_db": 0.0,
        "reconciles_per_db": 1.0,
    }
    latency = {"status_p50_s": 0.05, "status_p95_s": 0.1, "watch_p50_s": 0.01, "watch_p95_s": 0.02}
    return {
        "create": create,
        "restart": {
            "seconds": 1.5,
            "writes_per_db": 0.0,
            "events_per_db": 0.0,
            "reads_per_db": 0.1,
        },
        "steady": {
            "resync_s": 5.0,
            "writes_per_db_per_resync": 0.0,
            "reads_per_db_per_resync": 0.0,
            "reconciles_per_db_per_period": 1.0,
            "cpu_s_per_period": 0.3,
        },
        "latency": latency,
        "latency_short_resync": latency,
        "peak_rss_mib": 130.0,
    }


FLOOR = {"seconds": 2.0, "cpu_s": 1.0, "peak_rss_mib": 60.0, "writes_per_db": 5.0}
FLOOR |= {"events_per_db": 0.0, "reads_per_db": 0.0}


def test_percentile_is_nearest_rank() -> None:
    assert stats.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert stats.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.95) == 5.0
    assert math.isnan(stats.percentile([], 0.5))


def test_counts_are_comma_separated_lists() -> None:
    assert args.counts("100, 200") == [100, 200]
    assert args.counts("") == []
    assert args.parser("bench").parse_args(["--n", "100,200"]).n == [100, 200]
    assert args.parser("bench").parse_args([]).n == [100, 1000]


@pytest.mark.parametrize(
    "argv",
    [
        ["--n", "100,x"],
        ["--n", "0,100"],
        ["--runs", "0"],
        ["--shard-counts", "0,2"],
    ],
)
def test_the_command_line_refuses_what_cannot_be_run(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        args.parser("bench").parse_args(argv)
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_the_table_pads_its_first_column() -> None:
    lines = report.table(100, FLOOR, operator_run(5.0)).splitlines()
    assert cells(lines[0]) == ["N = 100", "floor", "operator"]
    assert cells(lines[2]) == [
        "time from first create to every Database reconciled",
        "2.0 s",
        "5.0 s (2.5x)",
    ]
    assert cells(lines[-1])[0] == "spec change -> status p50 / p95, resync 5 s"
    assert cells(lines[-1])[1:] == ["watch event p95 20 ms", "50 ms / 100 ms"]
    assert len({line.index(" | ") for line in lines}) == 1  # the cells line up


def test_the_cpu_row_says_how_much_of_it_collected_garbage_when_measured() -> None:
    run = operator_run(5.0)
    assert "garbage" not in report.table(100, FLOOR, run)
    run["create"]["gc_s"] = 0.3
    rows = [cells(line) for line in report.table(100, FLOOR, run).splitlines()]
    cpu = next(row for row in rows if row[0] == "client CPU")
    assert cpu[1:] == ["1.0 s", "2.0 s (2.0x); 0.3 s of it collecting garbage"]


# --- --runs ---------------------------------------------------------------------------------------


def test_runs_default_to_one() -> None:
    assert args.parser("bench").parse_args([]).runs == 1
    assert args.parser("bench").parse_args(["--runs", "3"]).runs == 3


def test_the_median_of_runs_is_taken_figure_by_figure() -> None:
    runs = [
        {"seconds": 3.0, "tracing": "off", "floor": None, "requests": {"GET secrets": 2.0}},
        {"seconds": 1.0, "tracing": "off", "floor": None, "requests": {"POST secrets": 4.0}},
        {"seconds": 2.0, "tracing": "off", "floor": None, "requests": {"GET secrets": 6.0}},
    ]
    assert stats.median_of(runs) == {
        "seconds": 2.0,
        "tracing": "off",
        "floor": None,
        # A request a run did not make counts 0 in that run.
        "requests": {"GET secrets": 2.0, "POST secrets": 0.0},
    }
    assert stats.median_of([{"seconds": 1.0}, {"seconds": 2.0}]) == {"seconds": 1.5}


def test_the_table_of_medians_says_so_and_shows_each_runs_time() -> None:
    each = [
        {"floor": {**FLOOR, "seconds": s}, "operator": operator_run(o)}
        for s, o in ((2.0, 4.0), (3.0, 6.0), (1.0, 5.0))
    ]
    median = stats.median_of(each)
    lines = report.table(100, median["floor"], median["operator"], each).splitlines()
    assert cells(lines[0]) == ["N = 100, median of 3 runs", "floor", "operator"]
    assert cells(lines[2]) == [
        "time from first create to every Database reconciled",
        "2.0 s",
        "5.0 s (2.5x)",
    ]
    assert cells(lines[-1])[1:] == ["2.0, 3.0, 1.0 s", "4.0, 6.0, 5.0 s"]
    assert len({line.index(" | ") for line in lines}) == 1
    single = report.table(100, FLOOR, operator_run(4.0), each[:1]).splitlines()
    assert cells(single[0])[0] == "N = 100"
    assert len(single) == len(lines) - 1  # one run: no row of each run's time


# --- --webhooks -----------------------------------------------------------------------------------


TEXT = """\
# HELP database_operator_webhook_duration_seconds Time to answer a review.
# TYPE database_operator_webhook_duration_seconds histogram
database_operator_webhook_duration_seconds_bucket{webhook="mutate",le="0.001"} 0.0
database_operator_webhook_duration_seconds_bucket{webhook="mutate",le="0.01"} 50.0
database_operator_webhook_duration_seconds_bucket{webhook="mutate",le="0.1"} 100.0
database_operator_webhook_duration_seconds_bucket{webhook="mutate",le="+Inf"} 100.0
database_operator_webhook_duration_seconds_count{webhook="mutate"} 100.0
database_operator_webhook_duration_seconds_bucket{webhook="convert",le="0.001"} 0.0
database_operator_webhook_duration_seconds_bucket{webhook="convert",le="+Inf"} 0.0
database_operator_webhook_durations_other{webhook="mutate"} 7.0
"""


def test_webhook_latency_is_read_from_the_histograms_buckets() -> None:
    buckets = stats.buckets_by(TEXT, "database_operator_webhook_duration_seconds", "webhook")
    assert buckets["mutate"] == [(0.001, 0.0), (0.01, 50.0), (0.1, 100.0), (math.inf, 100.0)]
    summary = stats.latency_summary(buckets)
    # Rank 50 is the top of the 1-10 ms bucket; rank 99 lies 98 % into the 10-100 ms one.
    assert summary["mutate"]["p50_s"] == pytest.approx(0.01)
    assert summary["mutate"]["p99_s"] == pytest.approx(0.01 + 0.09 * 49 / 50)
    assert summary["mutate"]["count"] == 100.0
    assert math.isnan(summary["convert"]["p50_s"])  # never called


def test_a_quantile_in_the_open_bucket_is_the_highest_bound() -> None:
    assert stats.histogram_quantile(0.99, [(0.5, 1.0), (math.inf, 10.0)]) == 0.5


def test_the_webhooks_table_compares_the_creates_and_shows_each_webhooks_latency() -> None:
    without = operator_run(4.0)["create"]
    with_ = {
        **operator_run(6.0)["create"],
        "webhook_latency": {
            "mutate": {"count": 100.0, "p50_s": 0.002, "p99_s": 0.019},
            "convert": {"count": 0.0, "p50_s": math.nan, "p99_s": math.nan},
        },
        "apiserver_webhook_latency": {
            "mutate.databases.example.com": {"count": 100.0, "p50_s": 0.004, "p99_s": 0.03}
        },
    }
    text = report.webhooks_table(100, without, with_)
    rows = [cells(line) for line in text.splitlines()]
    assert rows[0] == ["N = 100, operator", "webhooks off", "webhooks on"]
    assert rows[2][1:] == ["4.0 s", "6.0 s (1.5x)"]
    assert [
        "webhook mutate: p50 / p99 (operator's histogram), calls",
        "-",
        "2 ms / 19 ms, 100",
    ] in rows
    assert "convert" not in text  # never called: no row of NaNs
    assert [
        "mutate.databases.example.com: p50 / p99 (kube-apiserver's histogram), calls",
        "-",
        "4 ms / 30 ms, 100",
    ] in rows


# --- --rss-n --------------------------------------------------------------------------------------


def test_the_rss_table_shows_what_each_database_added() -> None:
    assert args.parser("bench").parse_args(["--rss-n", "1000,2000"]).rss_n == [1000, 2000]
    assert args.parser("bench").parse_args([]).rss_n == []
    points = [
        {"n": 1000, "seconds": 1.0, "peak_rss_mib": 150.0, "rss_mib": 140.0},
        {"n": 2000, "seconds": 1.0, "peak_rss_mib": 190.0, "rss_mib": 180.0},
    ]
    lines = report.rss_table(points).splitlines()
    assert lines[0].endswith("| 1,000 | 2,000 |")
    assert lines[-1].endswith("| - | 41 KiB |")  # 40 MiB over 1,000 Databases


# --- --shard-counts, --pin ------------------------------------------------------------------------


def test_the_shard_table_has_a_column_per_process_count() -> None:
    options = args.parser("bench").parse_args(["--shard-counts", "1,2,4", "--pin"])
    assert (options.shard_counts, options.pin) == ([1, 2, 4], True)
    assert args.parser("bench").parse_args([]).shard_counts == [1, 2]

    def run(processes: int, seconds: float) -> dict[str, Any]:
        return {
            "processes": processes,
            "pinned": True,
            "seconds": seconds,
            "cpu_s": 8.0,
            "cpu_s_per_process": [8.0 / processes] * processes,
            "control_plane_cpu_s": 6.0,
            "peak_rss_mib_per_process": 100.0,
            "control_plane_cpus": "0",
            "operator_cpus": "1,2,3",
        }

    rows = [
        cells(line)
        for line in report.shard_table(200, [run(1, 10.0), run(2, 6.0), run(4, 5.0)]).splitlines()
    ]
    assert rows[0] == [
        "N = 200, etcd + kube-apiserver on CPU 0, the operators on CPU 1,2,3",
        "1 process",
        "2 shards",
        "4 shards",
    ]
    assert rows[2][1:] == ["10.0 s", "6.0 s (0.6x)", "5.0 s (0.5x)"]
    assert rows[4][1:] == ["8.0 s", "4.0, 4.0 s", "2.0, 2.0, 2.0, 2.0 s"]
    unpinned = report.shard_table(200, [{**run(1, 10.0), "pinned": False}, run(2, 6.0)])
    assert cells(unpinned.splitlines()[0]) == ["N = 200", "1 process", "2 shards"]
