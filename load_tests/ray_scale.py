"""One proxy replica against two, both on one local Ray Serve model tier, on loopback.

Starts, all on 127.0.0.1: the Ray tier (``python -m middleware.runtime.ray_tier --address
local``: a one-node Ray cluster owned by that process, serving the embedder and the NLI model
with dynamic batching), a redis-server when one is installed (the replicas' shared evidence
cache), the scripted mock upstream, and ``factcheck serve`` processes with
``runtime.backend: ray``. Then the same load (``--streams`` concurrent annotate-mode streams
for ``--duration`` seconds) goes through one replica, then through two (the driver spreads
the streams over them, as a load balancer would), and it prints per run:

- completed checks/s: sentence reports with a verdict reached inside the budget (not
  ``unverified`` for timeout, overload or error), per second of the run;
- TTFT p50/p99 (time to the first answer token at the client);
- shed checks: reports ``unverified`` with reason ``overload`` (and timeouts beside them).

    python -m load_tests.ray_scale --streams 40 --duration 30 --rounds 2

What the figures can show depends on the machine: every process here (the tier, the proxies,
Redis, the mock upstream and this driver) shares its cores, so two replicas on a 2-core box
compete with the tier for the same CPU; on a machine with spare cores (or replicas on other
machines) the second replica adds the CPU that the checks' non-model work needs.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import aiohttp
import typer

from load_tests.driver import ANSWER, Process, StreamResult, Target, _pct, free_port, one_stream, request_body, \
    start_mock_upstream, start_proxy
from load_tests.ray_cluster import RayTier

FAILED_REASONS = ("timeout", "overload", "error")


@dataclass
class ReplicaRun:
    replicas: int
    streams: int
    seconds: float
    requests: int
    errors: int
    checks: int
    completed: int
    completed_per_s: float
    shed: int
    timeouts: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    verdicts: dict[str, int]


def summarise(replicas: int, streams: int, results: list[StreamResult], seconds: float) -> ReplicaRun:
    ok = [r for r in results if r.error is None]
    verdicts = Counter(v for r in ok for v in r.verdicts if v != "skipped")
    shed = sum(n for v, n in verdicts.items() if v == "unverified (overload)")
    timeouts = sum(n for v, n in verdicts.items() if v == "unverified (timeout)")
    failed = sum(n for v, n in verdicts.items() if v.startswith("unverified (") and v[12:].startswith(FAILED_REASONS))
    checks = sum(verdicts.values())
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    return ReplicaRun(
        replicas=replicas, streams=streams, seconds=round(seconds, 1), requests=len(results),
        errors=len(results) - len(ok), checks=checks, completed=checks - failed,
        completed_per_s=(checks - failed) / seconds if seconds else 0.0, shed=shed, timeouts=timeouts,
        ttft_p50_ms=1000 * _pct(ttfts, 0.5), ttft_p99_ms=1000 * _pct(ttfts, 0.99),
        verdicts=dict(verdicts.most_common()),
    )


async def drive(targets: list[Target], streams: int, duration: float, ramp: float) -> tuple[list[StreamResult], float]:
    """``streams`` workers, each bound to one target in turn (round robin), each opening one
    stream after another until ``duration`` is over."""
    results: list[StreamResult] = []
    body = request_body(ANSWER)
    start = time.perf_counter()
    stop_at = start + duration

    async def worker(session: aiohttp.ClientSession, target: Target) -> None:
        await asyncio.sleep(random.uniform(0, ramp))
        while time.perf_counter() < stop_at:
            results.append(await one_stream(session, target, body, ANSWER))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        await asyncio.gather(*(worker(session, targets[i % len(targets)]) for i in range(streams)))
    return results, time.perf_counter() - start


def table(rows: list[ReplicaRun]) -> str:
    head = ("proxy replicas", "streams", "streams done", "errors", "checks", "completed checks/s", "TTFT p50 ms",
            "TTFT p99 ms", "shed checks", "timed-out checks")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = (r.replicas, r.streams, r.requests, r.errors, r.checks, f"{r.completed_per_s:.1f}",
                 f"{r.ttft_p50_ms:.0f}", f"{r.ttft_p99_ms:.0f}", r.shed, r.timeouts)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _start_redis() -> tuple[str | None, Process | None]:
    if url := os.environ.get("FACTCHECK_TEST_REDIS_URL"):
        return url, None
    if shutil.which("redis-server") is None:
        return None, None
    port = free_port()
    process = Process(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
                      port, name="redis")
    return f"redis://127.0.0.1:{port}/0", process


def main(
    streams: Annotated[int, typer.Option(help="concurrent streams, spread over the replicas")] = 40,
    duration: Annotated[float, typer.Option(help="seconds of load per run")] = 30.0,
    token_rate: Annotated[float, typer.Option(help="mock upstream tokens/s per stream")] = 50.0,
    replicas: Annotated[str, typer.Option(help="comma-separated replica counts to run")] = "1,2",
    tier_cpus: Annotated[int, typer.Option(help="CPUs of the local Ray cluster")] = 2,
    replica_cpus: Annotated[float, typer.Option(help="CPUs Ray reserves per model replica")] = 0.5,
    warmup: Annotated[float, typer.Option(help="seconds of unmeasured load before each run")] = 5.0,
    rounds: Annotated[int, typer.Option(help="runs of each replica count, in alternating order, pooled")] = 2,
    out: Annotated[Path | None, typer.Option(help="write the runs as JSON here")] = None,
) -> None:
    """Start the tier, Redis, the mock upstream and the proxies on loopback; print the table."""
    counts = [int(n) for n in replicas.split(",")]
    index_dir = tempfile.mkdtemp(prefix="factcheck-ray-scale-index-")
    processes: list[Process] = []
    tier = RayTier.start({"FACTCHECK_RUNTIME__RAY_REPLICA_CPUS": str(replica_cpus)}, num_cpus=tier_cpus)
    print(f"Ray tier at {tier.url} (node {tier.node})", file=sys.stderr)
    try:
        redis_url, redis_process = _start_redis()
        if redis_process is not None:
            processes.append(redis_process)
        upstream = start_mock_upstream(token_rate)
        processes.append(upstream)
        env = {"FACTCHECK_RUNTIME__BACKEND": "ray", "FACTCHECK_RUNTIME__RAY_SERVE_URL": tier.url,
               "FACTCHECK_EVIDENCE__INDEX_DIR": index_dir,
               "FACTCHECK_CHECK__WORKERS": "0"}  # each replica checks in its own process, as measured in docs/scaling.md
        if redis_url:
            env |= {"FACTCHECK_EVIDENCE__CACHE": "redis", "FACTCHECK_EVIDENCE__REDIS_URL": redis_url,
                    "FACTCHECK_EVIDENCE__REDIS_KEY_PREFIX": f"ray-scale-{os.getpid()}:"}
        proxies = [start_proxy(upstream.port, "pipeline", env)]  # builds the demo index (through the tier)
        while len(proxies) < max(counts):  # the others reuse it
            proxies.append(start_proxy(upstream.port, "pipeline", env))
        processes += proxies
        pooled: dict[int, tuple[list[StreamResult], float]] = {}
        ramp = min(len(ANSWER.split()) / token_rate, duration / 2)
        for round_no in range(rounds):  # alternate the order, so warm caches favour neither
            for count in counts if round_no % 2 == 0 else counts[::-1]:
                targets = [Target(f"replica-{i}", "annotate", f"http://127.0.0.1:{p.port}/v1/chat/completions",
                                  {"X-Factcheck-Mode": "annotate"}, p) for i, p in enumerate(proxies[:count])]
                if warmup > 0:
                    asyncio.run(drive(targets, streams, warmup, ramp))
                results, seconds = asyncio.run(drive(targets, streams, duration, ramp))
                pool = pooled.setdefault(count, ([], 0.0))
                pooled[count] = (pool[0] + results, pool[1] + seconds)
                print(f"  round {round_no + 1}, {count} replica(s): {len(results)} streams in {seconds:.1f}s",
                      file=sys.stderr)
        rows = [summarise(count, streams, *pooled[count]) for count in counts]
    finally:
        for process in reversed(processes):
            process.stop()
        tier.stop()
        shutil.rmtree(index_dir, ignore_errors=True)
    print(table(rows))
    print(f"\nredis: {redis_url or 'none (evidence cache per replica)'}; cores on this machine: {os.cpu_count()}; "
          f"Ray tier: {tier_cpus} CPUs, {replica_cpus} per model replica")
    for row in rows:
        print(f"verdicts with {row.replicas} replica(s): {row.verdicts}")
    if out is not None:
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    typer.run(main)
