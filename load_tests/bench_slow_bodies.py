"""Slow-body flood under a descriptor limit (issue 47, item 1): can ``/healthz`` and a chat
request still get through while slow clients hold more connections than the proxy has
descriptors?

    python -m load_tests.bench_slow_bodies [--connections 1100] [--nofile 1024] [--duration 20]
                                           [--checker none] [--reconnect-after 1] [--code PATH]

The proxy (``factcheck serve``) runs in its own process with ``RLIMIT_NOFILE`` set to
``--nofile`` (``resource.setrlimit`` before it starts), in front of the scripted mock
upstream. A child process opens ``--connections`` connections, each sending a complete
request head (``POST /v1/chat/completions``, Content-Length 4,096) and then its body at one
byte per second per connection, reopening any the proxy closes ``--reconnect-after`` seconds
later (0: at once, a connection flood). Meanwhile this process asks ``/healthz`` on a new
connection every 200 ms and sends one streamed chat request (annotate) every two seconds.
Printed: ``/healthz`` latency (p50, p99, max, failures), the chat requests' times and
failures, how many slow connections the proxy answered 408 or closed, the proxy's event loop
lag (``loop_lag.py``), the CPU the proxy and the slow clients used (on a shared machine, the
share the proxy got), and how many "Too many open files" lines and tracebacks the proxy
logged. ``--code``: another checkout's ``middleware`` (for before/after in one sitting).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Annotated

import aiohttp
import psutil
import typer

from load_tests.driver import LOOP_LAG, Process, free_port, start_mock_upstream

LAUNCH = ("import resource, runpy, sys; n = int(sys.argv.pop(1)); "
          "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); sys.argv[0] = 'factcheck'; "
          f"runpy.run_path({str(LOOP_LAG)!r}, run_name='__main__')")
"""``factcheck serve`` under a descriptor limit (set in the process itself), its event loop's
lag sampled (``loop_lag.py``)."""
BODY_BYTES = 4096
CHAT = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me about Paris."}],
                   "mock": {"text": "The Eiffel Tower is in Paris. It was completed in 1889."},
                   "factcheck": {"mode": "annotate"}}).encode()


def start_limited_proxy(upstream_port: int, nofile: int, checker: str, code: Path) -> Process:
    port = free_port()
    env = {"FACTCHECK_CHECK__CHECKER": checker, "FACTCHECK_LOG_LEVEL": "INFO", "PYTHONPATH": str(code),
           "FACTCHECK_LOOP_LAG_FILE": tempfile.mkstemp(prefix="loop-lag-")[1]}
    args = [sys.executable, "-c", LAUNCH, str(nofile), "serve", "--port", str(port), "--upstream-url",
            f"http://127.0.0.1:{upstream_port}/v1"]
    return Process(args, port, env, name="factcheck-proxy", startup_timeout=600,
                   ready_text="factcheck proxy listening", cwd=code)


class SlowClients:
    """``count`` connections trickling their bodies; a closed one is counted and reopened."""

    def __init__(self, port: int, count: int, reconnect_after_s: float) -> None:
        self.port = port
        self.count = count
        self.reconnect_after_s = reconnect_after_s
        self.answered_408 = 0
        self.closed = 0
        self.open_failures = 0

    async def run(self, stop: asyncio.Event) -> None:
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {BODY_BYTES}\r\n\r\n").encode()
        tasks = [asyncio.create_task(self._one(i, head, stop)) for i in range(self.count)]
        await asyncio.gather(*tasks)

    async def _one(self, index: int, head: bytes, stop: asyncio.Event) -> None:
        await asyncio.sleep(index * 0.002)  # opened over about two seconds
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(head)
                sent = 0
                while not stop.is_set() and sent < BODY_BYTES - 1:
                    writer.write(b"x")
                    await writer.drain()
                    sent += 1
                    try:
                        answer = await asyncio.wait_for(reader.read(256), 1.0)
                    except TimeoutError:
                        continue
                    if b" 408 " in answer:
                        self.answered_408 += 1
                    else:
                        self.closed += 1
                    break
                writer.close()
                await asyncio.sleep(self.reconnect_after_s)
            except OSError:
                self.open_failures += 1
                await asyncio.sleep(0.2)


def flood(port: int, count: int, reconnect_after_s: float, stop: EventType, counts: Queue) -> None:
    """The slow clients, in a process of their own (``SlowClients``) until ``stop`` is set;
    then their counts (408s, closes, failed opens, CPU seconds) go to ``counts``. With the
    probes in the same event loop as 1,100 reconnecting clients, what they timed was mostly
    that loop's own lag: 180-205 ms for a /healthz that a client in another process had
    answered in 10-13 ms."""

    async def run() -> None:
        stopping = asyncio.Event()
        clients = SlowClients(port, count, reconnect_after_s)
        flooding = asyncio.create_task(clients.run(stopping))
        await asyncio.to_thread(stop.wait)
        stopping.set()
        await flooding
        counts.put((clients.answered_408, clients.closed, clients.open_failures))

    asyncio.run(run())


async def timed_get(url: str) -> float | None:
    t0 = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as s, s.get(url) as r:
            await r.read()
            return time.perf_counter() - t0 if r.status == 200 else None
    except (aiohttp.ClientError, TimeoutError):
        return None


async def timed_chat(url: str) -> float | None:
    t0 = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s, s.post(
                url, data=CHAT, headers={"Content-Type": "application/json"}) as r:
            text = await r.text()
            return time.perf_counter() - t0 if r.status == 200 and "[DONE]" in text else None
    except (aiohttp.ClientError, TimeoutError):
        return None


def percentiles_ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"p50 {1000 * statistics.median(ordered):.1f} ms, "
            f"p99 {1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]:.1f} ms, "
            f"max {1000 * ordered[-1]:.1f} ms")


async def probe(proxy: Process, connections: int, duration: float, reconnect_after_s: float) -> None:
    """The flood in a child process; ``/healthz`` and chat timed from this one."""
    base = f"http://127.0.0.1:{proxy.port}"
    spawn = multiprocessing.get_context("spawn")
    stop, counts = spawn.Event(), spawn.Queue()
    flooding = spawn.Process(target=flood, args=(proxy.port, connections, reconnect_after_s, stop, counts))
    flooding.start()
    await asyncio.sleep(5.0)  # the child started, every slow connection opened
    health: list[float | None] = []
    chats: list[float | None] = []
    proxy.loop_lag()  # a new window of lag samples
    assert flooding.pid is not None
    clients = psutil.Process(flooding.pid)
    cpu_before, flood_before, started = proxy.cpu_seconds(main_only=True), sum(clients.cpu_times()[:2]), time.perf_counter()
    deadline = started + duration
    while time.perf_counter() < deadline:
        if len(health) % 10 == 0:
            chats.append(await timed_chat(f"{base}/v1/chat/completions"))
        health.append(await timed_get(f"{base}/healthz"))
        await asyncio.sleep(0.2)
    elapsed = time.perf_counter() - started
    proxy_cpu = proxy.cpu_seconds(main_only=True) - cpu_before
    flood_cpu = sum(clients.cpu_times()[:2]) - flood_before
    lags = proxy.loop_lag()
    stop.set()
    answered_408, closed, open_failures = await asyncio.to_thread(counts.get, timeout=60)
    await asyncio.to_thread(flooding.join, 30)
    answered = [h for h in health if h is not None]
    done = [c for c in chats if c is not None]
    print(f"/healthz: {len(answered)} of {len(health)} answered" + (f", {percentiles_ms(answered)}" if answered else ""))
    print(f"chat (annotate, streamed): {len(done)} of {len(chats)} completed"
          + (f", median {1000 * statistics.median(done):.0f} ms, max {1000 * max(done):.0f} ms" if done else ""))
    print(f"slow connections: {answered_408} answered 408, {closed} closed without it, {open_failures} failed to open")
    if lags:
        print(f"proxy event loop lag (a 1 ms timer's overshoot): {percentiles_ms(lags)}")
    print(f"CPU while probing: proxy {100 * proxy_cpu / elapsed:.0f}% of a core, slow clients "
          f"{100 * flood_cpu / elapsed:.0f}%; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def main(
    connections: Annotated[int, typer.Option(help="slow-body connections held open")] = 1100,
    nofile: Annotated[int, typer.Option(help="the proxy's RLIMIT_NOFILE")] = 1024,
    duration: Annotated[float, typer.Option(help="seconds of probing once the flood is open")] = 20.0,
    checker: Annotated[str, typer.Option(help="the proxy's check.checker")] = "none",
    code: Annotated[Path | None, typer.Option(help="checkout whose middleware runs (default: this one)")] = None,
    reconnect_after: Annotated[float, typer.Option(help="seconds a closed slow client waits before reconnecting "
                                                        "(0: at once, a connection flood)")] = 1.0,
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, connections * 2 + 512), hard))
    root = (code or Path(__file__).resolve().parent.parent).resolve()
    upstream = start_mock_upstream(token_rate=50.0)
    proxy = start_limited_proxy(upstream.port, nofile, checker, root)
    print(f"{connections} slow-body connections (1 byte/s each, reconnecting {reconnect_after:g} s after a close) "
          f"against a proxy with RLIMIT_NOFILE {nofile} (checker {checker}, code {root})")
    try:
        asyncio.run(probe(proxy, connections, duration, reconnect_after))
    finally:
        log = proxy.log_path.read_text(errors="replace")
        proxy.stop()
        upstream.stop()
    print(f"proxy log: {log.count('Too many open files')} 'Too many open files' lines, "
          f"{log.count('Traceback')} tracebacks")


if __name__ == "__main__":
    typer.run(main)
