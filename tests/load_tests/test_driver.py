"""The load driver (load_tests/driver.py): its measurements, its comparisons and one short real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
import typer

from adapters.demo_upstream import DemoUpstream
from load_tests.driver import (
    ANSWER,
    LoadRun,
    Pool,
    RunSummary,
    StreamResult,
    Target,
    comparisons,
    markdown,
    mode_gaps,
    one_stream,
    parse_cpus,
    request_body,
    spawning_on,
    split_cpus,
    summarise,
)
from middleware.commands.serve import start_site


async def test_one_stream_measures_and_detects_a_content_mismatch() -> None:
    runner, port = await start_site(DemoUpstream().app(), "127.0.0.1", 0)
    target = Target("direct", "-", f"http://127.0.0.1:{port}/v1/chat/completions", {}, None)
    try:
        async with aiohttp.ClientSession() as session:
            same = await one_stream(session, target, request_body(ANSWER), ANSWER)
            altered = await one_stream(session, target, request_body(ANSWER.replace("1889", "1887")), ANSWER)
    finally:
        await runner.cleanup()
    assert same.error is None and not same.mismatch
    assert same.ttft is not None and same.tokens > 1 and len(same.gaps) == same.tokens - 1
    assert altered.error is None and altered.mismatch


def _row(target: str, mode: str, ttft_p50: float, ttft_p99: float, tokens_per_s: float, cpu: float) -> RunSummary:
    return RunSummary(target=target, mode=mode, streams=200, requests=100, errors=0, error_rate=0.0, mismatches=0,
                      ttft_p50_ms=ttft_p50, ttft_p99_ms=ttft_p99, gap_p50_ms=20.0, gap_p99_ms=25.0,
                      report_p50_ms=None, report_p95_ms=None, reports=0, tokens_per_s=tokens_per_s,
                      cpu_percent=cpu, peak_rss_mb=None)


def test_comparisons_are_against_direct_and_litellm_at_the_same_load() -> None:
    direct = _row("direct", "-", 2.0, 10.0, 1000.0, 20.0)
    off = _row("factcheck", "off", 3.0, 18.0, 990.0, 40.0)
    lite = _row("litellm", "pass", 12.0, 90.0, 500.0, 100.0)
    other_level = replace(direct, streams=1)
    by_target = {c.target: c for c in comparisons([direct, off, lite, other_level])}
    assert set(by_target) == {"factcheck", "litellm"}
    mine = by_target["factcheck"]
    assert (mine.added_ttft_p50_ms, mine.added_ttft_p99_ms) == (1.0, 8.0)
    assert mine.tokens_per_s_ratio == 0.99
    assert mine.ttft_p50_ratio_vs_litellm == 0.1  # +1 ms against LiteLLM's +10 ms
    assert mine.cpu_percent_ratio_vs_litellm == 0.4
    assert "| factcheck | off | 200 |" in markdown([direct, off, lite])


def test_the_cold_burst_and_the_streams_after_it_are_summarised_apart() -> None:
    burst = [StreamResult(ttft=0.1 + i / 1000, first=True) for i in range(50)]
    after = [StreamResult(ttft=0.01) for _ in range(150)]
    pool = Pool(results=burst + after, elapsed=10.0, main_cpu_s=1.0, main_wait_s=0.5)
    row = summarise("factcheck", "annotate", 50, pool)
    assert row.ttft_p99_burst_ms is not None and 140 <= row.ttft_p99_burst_ms <= 150
    assert row.ttft_p99_after_ms is not None and abs(row.ttft_p99_after_ms - 10.0) < 1e-9
    assert row.ttft_p99_ms >= row.ttft_p99_after_ms
    assert row.main_cpu_wait_percent == 5.0
    assert summarise("direct", "-", 50, Pool(results=after, elapsed=1.0)).ttft_p99_burst_ms is None


def test_a_mode_is_compared_with_off_mode_round_by_round() -> None:
    def run(p99: float) -> LoadRun:  # 100 streams whose two slowest (the p99) took p99 s
        return LoadRun([StreamResult(ttft=0.001) for _ in range(98)] + [StreamResult(ttft=p99)] * 2, 1.0, 0.0)

    def pool(*runs: LoadRun) -> Pool:
        rounds = Pool()
        for one in runs:
            rounds.add(one)
        return rounds

    rows = [summarise("factcheck", "off", 200, pool(run(0.1), run(0.5), run(0.1))),
            summarise("factcheck", "annotate", 200, pool(run(0.2), run(0.5), run(0.13))),
            summarise("direct", "-", 200, pool(run(0.01), run(0.01), run(0.01)))]
    assert rows[1].ttft_p99_by_round_ms == [200.0, 500.0, 130.0]
    (gap,) = mode_gaps(rows)
    assert (gap.mode, gap.streams) == ("annotate", 200)
    assert [round(g) for g in gap.by_round_ms] == [100, 0, 30] and round(gap.median_ms) == 30
    assert "by round +100, +0, +30 ms (median +30)" in gap.text()
    assert mode_gaps(rows[1:]) == []  # no off mode at that load: nothing to compare with
    # A round in which every off-mode stream failed is left out; the others stay paired.
    failed = pool(LoadRun([StreamResult(error="HTTP 502")], 1.0, 0.0), run(0.1), run(0.5))
    off = summarise("factcheck", "off", 200, failed)
    assert off.ttft_p99_by_round_ms == [None, 100.0, 500.0]
    (gap,) = mode_gaps([off, rows[1]])
    assert [round(g) for g in gap.by_round_ms] == [400, -370]


def test_cpu_lists_read_as_taskset_writes_them() -> None:
    assert parse_cpus("0") == {0}
    assert parse_cpus("0,2") == {0, 2}
    assert parse_cpus("1-3, 5") == {1, 2, 3, 5}
    assert split_cpus(None) == (None, None)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs")
def test_processes_started_for_the_target_run_on_its_cpus_and_the_driver_on_the_others() -> None:
    allowed = os.sched_getaffinity(0)
    first = min(allowed)
    target, load = split_cpus(str(first))
    assert target == {first} and load == allowed - {first}
    with spawning_on(target):
        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(child.stdout) == [first]
    assert os.sched_getaffinity(0) == allowed  # the driver is back where it was
    for every_cpu in (",".join(map(str, allowed)), "9999"):
        with pytest.raises(typer.BadParameter):
            split_cpus(every_cpu)


def test_short_run_through_real_processes(tmp_path: Path) -> None:
    out, table = tmp_path / "load.json", tmp_path / "load.md"
    command = [sys.executable, "-m", "load_tests.driver", "--streams", "3", "--duration", "2", "--warmup", "0",
               "--token-rate", "200", "--modes", "off,annotate", "--checker", "none",
               "--out", str(out), "--markdown", str(table)]
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:  # the proxy apart from this load, as the acceptance runs are measured
        command += ["--target-cpus", str(cpus[0])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FACTCHECK_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["config"]["target_cpus"] == (cpus[:1] if len(cpus) >= 2 else None)
    runs = {(r["target"], r["mode"]): r for r in results["runs"]}
    assert set(runs) == {("direct", "-"), ("factcheck", "off"), ("factcheck", "annotate")}
    for run in runs.values():
        assert run["requests"] > 0 and run["errors"] == 0 and run["mismatches"] == 0
        assert run["peak_rss_mb"] > 0
    assert runs[("direct", "-")]["lag_max_ms"] is None  # the probe is on the proxy's loop only
    for mode in ("off", "annotate"):
        lag = runs[("factcheck", mode)]
        assert 0 <= lag["lag_p50_ms"] <= lag["lag_p99_ms"] <= lag["lag_max_ms"]
        assert lag["ttft_p99_burst_ms"] > 0  # every worker's first stream
        if sys.platform == "linux":
            assert 0 <= lag["main_cpu_wait_percent"] < 100
    annotate = runs[("factcheck", "annotate")]  # checker none: every report unverified, none checked
    assert annotate["checks_per_s"] == 0 and annotate["shed"] == annotate["timed_out"] == 0
    assert "added TTFT p50" in table.read_text() and "loop lag max ms" in table.read_text()
    (gap,) = results["mode_gaps"]  # one round: one gap, annotate against off
    assert gap["mode"] == "annotate" and len(gap["by_round_ms"]) == 1 and "TTFT p99 by round" in table.read_text()
