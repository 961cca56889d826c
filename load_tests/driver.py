"""Load driver: N concurrent streamed chats against a target, measured from the client side.

Targets run in their own processes (the mock upstream, the proxy, optionally LiteLLM) so the
driver's own event loop does not distort them. Each stream records time to first content,
inter-token gaps, per-sentence report latency (annotate/correct), content mismatches and
errors; the proxy's peak RSS is sampled with psutil.

    python -m load_tests.driver --streams 1,50 --duration 15 --token-rate 50 --modes off
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import psutil
import typer

ANSWER = (
    "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair. "
    "Marie Curie won the Nobel Prize in Physics in 1903. She was born in Warsaw in 1867. "
    "Mount Everest is 8,849 metres tall. The Amazon flows into the Atlantic Ocean."
)


@dataclass
class StreamResult:
    ttft: float | None = None
    gaps: list[float] = field(default_factory=list)
    report_latencies: list[float] = field(default_factory=list)
    tokens: int = 0
    duration: float = 0.0
    error: str | None = None
    mismatch: bool = False


@dataclass
class RunSummary:
    target: str
    mode: str
    streams: int
    requests: int
    errors: int
    mismatches: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    gap_p50_ms: float
    gap_p99_ms: float
    report_p50_ms: float | None
    report_p95_ms: float | None
    tokens_per_s: float
    peak_rss_mb: float | None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class Process:
    """A server in a child process on loopback."""

    def __init__(self, args: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.proc = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_port(port)
        self.peak_rss = 0

    def sample_rss(self) -> None:
        try:
            self.peak_rss = max(self.peak_rss, psutil.Process(self.proc.pid).memory_info().rss)
        except psutil.Error:
            pass

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=10)


def start_mock_upstream(token_rate: float) -> Process:
    port = free_port()
    return Process([sys.executable, "-m", "load_tests.mock_upstream", "--port", str(port),
                    "--token-rate", str(token_rate)], port)


def start_proxy(upstream_port: int, checker: str = "pipeline", extra_env: dict[str, str] | None = None) -> Process:
    port = free_port()
    env = {"FACTCHECK_CHECK__CHECKER": checker, "FACTCHECK_LOG_LEVEL": "WARNING", **(extra_env or {})}
    return Process([sys.executable, "-m", "middleware.cli", "serve", "--port", str(port),
                    "--upstream-url", f"http://127.0.0.1:{upstream_port}/v1"], port, env)


async def one_stream(session: aiohttp.ClientSession, url: str, mode: str, text: str) -> StreamResult:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}],
            "mock": {"text": text}, "factcheck": {"mode": mode}}
    result = StreamResult()
    t0 = time.perf_counter()
    last = None
    content: list[str] = []
    reached: list[tuple[int, float]] = []  # (content length, time it was reached)
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                result.error = f"HTTP {response.status}"
                return result
            async for line in response.content:
                if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                    continue
                now = time.perf_counter()
                chunk: dict[str, Any] = json.loads(line[5:])
                if "error" in chunk:
                    result.error = chunk["error"].get("message", "error event")
                    break
                piece = "".join((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
                if piece:
                    if result.ttft is None:
                        result.ttft = now - t0
                    elif last is not None:
                        result.gaps.append(now - last)
                    last = now
                    content.append(piece)
                    result.tokens += 1
                    reached.append((sum(map(len, content)), now))
                report = (chunk.get("factcheck") or {}).get("report")
                if report:
                    done_at = next((t for n, t in reached if n >= report["end"]), now)
                    result.report_latencies.append(now - done_at)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        result.error = type(exc).__name__
    result.duration = time.perf_counter() - t0
    if mode in ("off", "annotate") and result.error is None:  # correct mode may legitimately edit
        result.mismatch = "".join(content) != text
    return result


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def run_load(url: str, mode: str, streams: int, duration: float, text: str,
                   sample: Process | None = None) -> tuple[list[StreamResult], float]:
    results: list[StreamResult] = []
    stop_at = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)

    async def worker(session: aiohttp.ClientSession) -> None:
        while time.perf_counter() < stop_at:
            results.append(await one_stream(session, url, mode, text))

    async def sampler() -> None:
        while sample is not None:
            sample.sample_rss()
            await asyncio.sleep(0.25)

    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        sampling = asyncio.create_task(sampler())
        await asyncio.gather(*(worker(session) for _ in range(streams)))
        sampling.cancel()
    return results, time.perf_counter() - t0


def summarise(target: str, mode: str, streams: int, results: list[StreamResult], elapsed: float,
              peak_rss: int | None) -> RunSummary:
    ok = [r for r in results if r.error is None]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    gaps = [g for r in ok for g in r.gaps]
    reports = [x for r in ok for x in r.report_latencies]
    return RunSummary(
        target=target, mode=mode, streams=streams, requests=len(results),
        errors=len(results) - len(ok), mismatches=sum(r.mismatch for r in ok),
        ttft_p50_ms=1000 * statistics.median(ttfts) if ttfts else float("nan"),
        ttft_p99_ms=1000 * _pct(ttfts, 0.99),
        gap_p50_ms=1000 * _pct(gaps, 0.5), gap_p99_ms=1000 * _pct(gaps, 0.99),
        report_p50_ms=1000 * _pct(reports, 0.5) if reports else None,
        report_p95_ms=1000 * _pct(reports, 0.95) if reports else None,
        tokens_per_s=sum(r.tokens for r in ok) / elapsed if elapsed else 0.0,
        peak_rss_mb=peak_rss / 2**20 if peak_rss else None,
    )


def markdown(rows: list[RunSummary]) -> str:
    head = ("| target | mode | streams | requests | errors | mismatches | TTFT p50 ms | TTFT p99 ms | gap p50 ms "
            "| gap p99 ms | report p50 ms | report p95 ms | tokens/s | peak RSS MB |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        cells = [r.target, r.mode, r.streams, r.requests, r.errors, r.mismatches, r.ttft_p50_ms, r.ttft_p99_ms,
                 r.gap_p50_ms, r.gap_p99_ms, r.report_p50_ms, r.report_p95_ms, r.tokens_per_s, r.peak_rss_mb]
        lines.append("| " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in cells) + " |")
    return "\n".join(lines)


def comparisons(rows: list[RunSummary]) -> list[str]:
    """Side-by-side figures: proxy minus direct TTFT, proxy/direct tokens/s."""
    out = []
    direct = {(r.streams): r for r in rows if r.target == "direct"}
    for r in rows:
        base = direct.get(r.streams)
        if r.target == "direct" or base is None:
            continue
        out.append(
            f"{r.target}/{r.mode} @ {r.streams} streams: added TTFT p50 {r.ttft_p50_ms - base.ttft_p50_ms:+.2f} ms, "
            f"p99 {r.ttft_p99_ms - base.ttft_p99_ms:+.2f} ms; tokens/s ratio {r.tokens_per_s / base.tokens_per_s:.3f}; "
            f"added gap p99 {r.gap_p99_ms - base.gap_p99_ms:+.2f} ms"
        )
    return out


def main(
    streams: Annotated[str, typer.Option(help="comma-separated concurrency levels")] = "1,50",
    duration: Annotated[float, typer.Option(help="seconds per run")] = 15.0,
    token_rate: Annotated[float, typer.Option(help="mock upstream tokens/s per stream (0: unlimited)")] = 50.0,
    modes: Annotated[str, typer.Option(help="proxy modes to run: off,annotate,correct")] = "off",
    checker: Annotated[str, typer.Option(help="proxy checker: pipeline or none")] = "pipeline",
    litellm: Annotated[bool, typer.Option(help="also run LiteLLM's proxy in pass-through (needs litellm[proxy])")] = False,
    out: Annotated[Path | None, typer.Option(help="write JSON results here")] = None,
) -> None:
    """Run the load and print a markdown table plus side-by-side ratios."""
    levels = [int(s) for s in streams.split(",")]
    upstream = start_mock_upstream(token_rate)
    proxy = start_proxy(upstream.port, checker)
    lite = None
    if litellm:
        from load_tests.litellm_target import start_litellm

        lite = start_litellm(upstream.port)
    rows: list[RunSummary] = []
    try:
        for n in levels:
            direct_url = f"http://127.0.0.1:{upstream.port}/v1/chat/completions"
            results, elapsed = asyncio.run(run_load(direct_url, "off", n, duration, ANSWER))
            rows.append(summarise("direct", "-", n, results, elapsed, None))
            for mode in modes.split(","):
                proxy.peak_rss = 0
                url = f"http://127.0.0.1:{proxy.port}/v1/chat/completions"
                results, elapsed = asyncio.run(run_load(url, mode, n, duration, ANSWER, proxy))
                rows.append(summarise("factcheck", mode, n, results, elapsed, proxy.peak_rss))
            if lite is not None:
                lite.peak_rss = 0
                url = f"http://127.0.0.1:{lite.port}/v1/chat/completions"
                results, elapsed = asyncio.run(run_load(url, "off", n, duration, ANSWER, lite))
                rows.append(summarise("litellm", "pass", n, results, elapsed, lite.peak_rss))
    finally:
        for process in (proxy, upstream, lite):
            if process is not None:
                process.stop()
    print(markdown(rows))
    print()
    print("\n".join(comparisons(rows)))
    if out is not None:
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    typer.run(main)
