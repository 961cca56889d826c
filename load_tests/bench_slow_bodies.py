"""Slow-body flood under a descriptor limit (issue 47, item 1): can ``/healthz`` and a chat
request still get through while slow clients hold more connections than the proxy has
descriptors?

    python -m load_tests.bench_slow_bodies [--connections 1100] [--nofile 1024] [--duration 20]
                                           [--checker none] [--code PATH]

The proxy (``factcheck serve``) runs in its own process with ``RLIMIT_NOFILE`` set to
``--nofile`` (``resource.setrlimit`` before it starts), in front of the scripted mock
upstream. This process opens ``--connections`` connections, each sending a complete request
head (``POST /v1/chat/completions``, Content-Length 4,096) and then its body at one byte per
second per connection, reopening any the proxy closes ``--reconnect-after`` seconds later. Meanwhile it asks ``/healthz`` on a
new connection every 200 ms and sends one streamed chat request (annotate) every two
seconds. Printed: ``/healthz`` latency (p50, p99, max, failures), the chat requests' times
and failures, how many slow connections the proxy answered 408 or closed, and how many "Too
many open files" lines the proxy logged. ``--code``: another checkout's ``middleware`` (for
before/after in one sitting).
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated

import aiohttp
import typer

from load_tests.driver import Process, free_port, start_mock_upstream

LAUNCH = ("import resource, runpy, sys; n = int(sys.argv.pop(1)); "
          "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); sys.argv[0] = 'factcheck'; "
          "runpy.run_module('middleware.cli', run_name='__main__')")
"""``factcheck serve`` under a descriptor limit: the limit is set in the process itself."""
BODY_BYTES = 4096
CHAT = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me about Paris."}],
                   "mock": {"text": "The Eiffel Tower is in Paris. It was completed in 1889."},
                   "factcheck": {"mode": "annotate"}}).encode()


def start_limited_proxy(upstream_port: int, nofile: int, checker: str, code: Path) -> Process:
    port = free_port()
    env = {"FACTCHECK_CHECK__CHECKER": checker, "FACTCHECK_LOG_LEVEL": "INFO", "PYTHONPATH": str(code)}
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
        self._writers: list[asyncio.StreamWriter | None] = [None] * count

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


async def probe(port: int, connections: int, duration: float, reconnect_after_s: float) -> None:
    base = f"http://127.0.0.1:{port}"
    stop = asyncio.Event()
    clients = SlowClients(port, connections, reconnect_after_s)
    flood = asyncio.create_task(clients.run(stop))
    await asyncio.sleep(3.0)  # every slow connection opened
    health: list[float | None] = []
    chats: list[float | None] = []
    deadline = time.perf_counter() + duration
    while time.perf_counter() < deadline:
        if len(health) % 10 == 0:
            chats.append(await timed_chat(f"{base}/v1/chat/completions"))
        health.append(await timed_get(f"{base}/healthz"))
        await asyncio.sleep(0.2)
    stop.set()
    await flood
    answered = [h for h in health if h is not None]
    done = [c for c in chats if c is not None]
    print(f"/healthz: {len(answered)} of {len(health)} answered", end="")
    if answered:
        ordered = sorted(answered)
        print(f", p50 {1000 * statistics.median(answered):.1f} ms, "
              f"p99 {1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]:.1f} ms, "
              f"max {1000 * max(answered):.1f} ms")
    else:
        print()
    print(f"chat (annotate, streamed): {len(done)} of {len(chats)} completed"
          + (f", median {1000 * statistics.median(done):.0f} ms, max {1000 * max(done):.0f} ms" if done else ""))
    print(f"slow connections: {clients.answered_408} answered 408, {clients.closed} closed without it, "
          f"{clients.open_failures} failed to open")


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
        asyncio.run(probe(proxy.port, connections, duration, reconnect_after))
    finally:
        log = proxy.log_path.read_text(errors="replace")
        proxy.stop()
        upstream.stop()
    print(f"proxy log: {log.count('Too many open files')} 'Too many open files' lines, "
          f"{log.count('Traceback')} tracebacks")


if __name__ == "__main__":
    typer.run(main)
