"""Off mode's cost per front door at one stream: chat completions, the Responses API and the
Messages API, each through the proxy in front of an upstream of its own API, against the
scripted mock upstream itself (which speaks all three).

One stream at a time, ``--requests`` per target and round, targets in rotating order over
``--rounds`` so a noisy shared machine disturbs them alike. Per stream: time to the first text
and to the end of the stream, from the client. A target's overhead is its median minus the
direct median of the same API; the received text must equal the upstream's.

    python -m load_tests.bench_faces --requests 100 --rounds 3 --token-rate 0
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Annotated, Any

import aiohttp
import typer

from load_tests.driver import ANSWER, Process, start_mock_upstream, start_proxy

APIS = ("chat", "responses", "messages")
PATHS = {"chat": "chat/completions", "responses": "responses", "messages": "messages"}


def body(api: str) -> dict[str, Any]:
    mock = {"text": ANSWER}
    if api == "chat":
        return {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}], "mock": mock}
    if api == "responses":
        return {"model": "m", "stream": True, "input": "q", "mock": mock}
    return {"model": "m", "stream": True, "max_tokens": 500, "messages": [{"role": "user", "content": "q"}], "mock": mock}


def text_of(api: str, event: dict[str, Any]) -> str:
    if api == "chat":
        return "".join((c.get("delta") or {}).get("content") or "" for c in event.get("choices") or [])
    if api == "responses":
        return str(event.get("delta") or "") if event.get("type") == "response.output_text.delta" else ""
    delta = event.get("delta") or {}
    return str(delta.get("text") or "") if event.get("type") == "content_block_delta" else ""


async def one_stream(session: aiohttp.ClientSession, url: str, api: str) -> tuple[float, float]:
    """Seconds to the first text and to the end of the stream."""
    t0 = time.perf_counter()
    first = None
    text: list[str] = []
    async with session.post(url, json=body(api), headers={"X-Factcheck-Mode": "off"}) as response:
        assert response.status == 200, await response.text()
        async for line in response.content:
            if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                continue
            if piece := text_of(api, json.loads(line[5:])):
                first = first if first is not None else time.perf_counter() - t0
                text.append(piece)
    if "".join(text) != ANSWER:
        raise RuntimeError(f"{url}: the text differs from the upstream's")
    return first or 0.0, time.perf_counter() - t0


async def run(targets: dict[tuple[str, str], str], requests: int, rounds: int) -> dict[tuple[str, str], list[tuple[float, float]]]:
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in targets}
    order = list(targets)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for key in order:  # warm-up: connections, first-request paths
            for _ in range(5):
                await one_stream(session, targets[key], key[1])
        for round_ in range(rounds):
            for key in order[round_ % len(order):] + order[: round_ % len(order)]:
                for _ in range(requests):
                    samples[key].append(await one_stream(session, targets[key], key[1]))
    return samples


def main(
    requests: Annotated[int, typer.Option(help="streams per target and round")] = 100,
    rounds: Annotated[int, typer.Option(help="rounds, targets in rotating order")] = 3,
    token_rate: Annotated[float, typer.Option(help="mock upstream tokens per second (0: unlimited)")] = 0.0,
) -> None:
    upstream = start_mock_upstream(token_rate)
    proxies: dict[str, Process] = {}
    try:
        for api in APIS:
            proxies[api] = start_proxy(upstream.port, extra_env={"FACTCHECK_UPSTREAM__API": api})
        targets = {}
        for api in APIS:
            targets[("direct", api)] = f"http://127.0.0.1:{upstream.port}/v1/{PATHS[api]}"
            targets[("proxy", api)] = f"http://127.0.0.1:{proxies[api].port}/v1/{PATHS[api]}"
        samples = asyncio.run(run(targets, requests, rounds))
    finally:
        for process in (*proxies.values(), upstream):
            process.stop()
    print("| API | direct first text ms | proxy first text ms | direct stream ms | proxy stream ms | overhead (stream) ms |")
    print("|---|---|---|---|---|---|")
    for api in APIS:
        direct = samples[("direct", api)]
        proxy = samples[("proxy", api)]
        d_first, p_first = (statistics.median(s[0] for s in x) * 1000 for x in (direct, proxy))
        d_all, p_all = (statistics.median(s[1] for s in x) * 1000 for x in (direct, proxy))
        print(f"| {api} | {d_first:.2f} | {p_first:.2f} | {d_all:.2f} | {p_all:.2f} | {p_all - d_all:.2f} |")


if __name__ == "__main__":
    typer.run(main)
