"""Does one request's large context stall the others? ``/healthz`` latency while large-context
chat requests arrive (issue 47, item 5).

    python -m load_tests.bench_large_context [--requests 3] [--chars 390000] [--checker pipeline]
                                             [--rounds 3] [--mode annotate] [--check-workers 0] [--code PATH]

The proxy (``factcheck serve``, default settings but the checker) runs in its own process in
front of the scripted mock upstream (``load_tests.mock_upstream``), both on loopback. This
process polls ``/healthz`` on a connection of its own every ``--interval`` seconds, first
with nothing else arriving (the baseline), then while ``--requests`` chat requests, each
with a context of ``--chars`` characters (demo-corpus documents repeated, as one system
message: how a RAG app sends them), are sent at once and streamed to their end. Printed per
round and pooled: ``/healthz`` p50, p99 and max in each phase, and each chat request's time.
``--code``: another checkout's ``middleware`` (for before/after in one sitting).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import typer

from load_tests.driver import Process, start_mock_upstream, start_proxy
from middleware.evidence.index import DEMO_CORPUS

ANSWER = ("The Eiffel Tower is in Paris. It was completed in 1889. Marie Curie was born in Warsaw in 1867. "
          "She won the Nobel Prize in Physics in 1903.")


def context_text(chars: int) -> str:
    """Demo-corpus documents, repeated until ``chars`` characters."""
    documents = "\n\n".join(path.read_text() for path in sorted(DEMO_CORPUS.rglob("*.md")))
    return (documents * (chars // len(documents) + 1))[:chars]


def chat_body(context: str, mode: str) -> dict[str, Any]:
    return {"model": "m", "stream": True, "mock": {"text": ANSWER}, "factcheck": {"mode": mode},
            "messages": [{"role": "system", "content": context}, {"role": "user", "content": "Tell me about Paris."}]}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def poll_healthz(url: str, stop: asyncio.Event, interval: float) -> list[float]:
    """``/healthz`` latencies (seconds) on one keep-alive connection until ``stop``."""
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        while not stop.is_set():
            t0 = time.perf_counter()
            async with session.get(url) as response:
                await response.read()
            latencies.append(time.perf_counter() - t0)
            await asyncio.sleep(interval)
    return latencies


async def one_chat(url: str, body: bytes) -> float:
    t0 = time.perf_counter()
    async with aiohttp.ClientSession() as session, session.post(
            url, data=body, headers={"Content-Type": "application/json"}) as response:
        text = await response.text()
        if response.status != 200 or "[DONE]" not in text:
            raise RuntimeError(f"chat answered {response.status}: {text[:300]}")
    return time.perf_counter() - t0


async def one_round(proxy: Process, requests: int, body: bytes, interval: float,
                    quiet_s: float) -> tuple[list[float], list[float], list[float]]:
    base = f"http://127.0.0.1:{proxy.port}"
    stop = asyncio.Event()
    quiet_task = asyncio.create_task(poll_healthz(f"{base}/healthz", stop, interval))
    await asyncio.sleep(quiet_s)
    stop.set()
    quiet = await quiet_task
    stop = asyncio.Event()
    busy_task = asyncio.create_task(poll_healthz(f"{base}/healthz", stop, interval))
    await asyncio.sleep(interval * 3)
    chats = await asyncio.gather(*(one_chat(f"{base}/v1/chat/completions", body) for _ in range(requests)))
    stop.set()
    return quiet, await busy_task, list(chats)


def line(name: str, values: list[float]) -> str:
    return (f"  {name:<26} n={len(values):<5} p50 {1000 * statistics.median(values):7.1f} ms   "
            f"p99 {1000 * pct(values, 0.99):7.1f} ms   max {1000 * max(values):7.1f} ms")


def main(
    requests: Annotated[int, typer.Option(help="large-context chat requests sent at once")] = 3,
    chars: Annotated[int, typer.Option(help="characters of context per request")] = 390_000,
    checker: Annotated[str, typer.Option(help="the proxy's check.checker: pipeline or none")] = "pipeline",
    mode: Annotated[str, typer.Option(help="factcheck mode of the chat requests")] = "annotate",
    rounds: Annotated[int, typer.Option(help="rounds, pooled")] = 3,
    interval: Annotated[float, typer.Option(help="seconds between two /healthz requests")] = 0.005,
    quiet_s: Annotated[float, typer.Option(help="seconds of the baseline phase of each round")] = 2.0,
    check_workers: Annotated[int, typer.Option(help="the proxy's check.workers (0: checks on the relay's loop)")] = 0,
    code: Annotated[Path | None, typer.Option(help="checkout whose middleware runs (default: this one)")] = None,
) -> None:
    body = json.dumps(chat_body(context_text(chars), mode)).encode()
    upstream = start_mock_upstream(token_rate=50.0)
    proxy = start_proxy(upstream.port, checker=checker, extra_env={"FACTCHECK_CHECK__WORKERS": str(check_workers)},
                        code=code)
    print(f"{requests} requests x {chars:,} characters of context ({len(body):,} bytes each), checker {checker}, "
          f"check.workers {check_workers}, mode {mode}; /healthz every {1000 * interval:.0f} ms; code {code or 'this checkout'}")
    pooled: tuple[list[float], list[float], list[float]] = ([], [], [])
    try:
        asyncio.run(one_chat(f"http://127.0.0.1:{proxy.port}/v1/chat/completions", body))  # warm: models loaded
        for n in range(rounds):
            quiet, busy, chats = asyncio.run(one_round(proxy, requests, body, interval, quiet_s))
            print(f"round {n + 1}:")
            print(line("/healthz, nothing else", quiet))
            print(line("/healthz, contexts arriving", busy))
            print(line("chat request (end to end)", chats))
            for pool, values in zip(pooled, (quiet, busy, chats)):
                pool.extend(values)
        print("pooled:")
        for name, values in zip(("/healthz, nothing else", "/healthz, contexts arriving", "chat request (end to end)"),
                                pooled):
            print(line(name, values))
    finally:
        proxy.stop()
        upstream.stop()


if __name__ == "__main__":
    typer.run(main)
