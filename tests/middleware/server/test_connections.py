"""Connections that hold the server without asking anything (issue 35): slow-header clients are
closed after ``server.header_timeout_s``, idle keep-alive ones after
``server.keepalive_timeout_s``, and past ``server.max_idle_connections`` the longest idle one
goes; a request being answered, however long, is never closed. Loopback only."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from middleware.metrics import CONNECTIONS_CLOSED
from tests.support.checkers import ScriptedChecker


def closed(reason: str) -> float:
    return CONNECTIONS_CLOSED.labels(reason=reason)._value.get()


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """True when the server closes the connection within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while await reader.read(1024):
                pass
        return True
    except TimeoutError:
        return False


async def test_slow_header_connections_are_closed_and_healthz_stays_up(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.header_timeout_s": 0.5})
    host, port = host_port(proxy.url)
    before = closed("header_timeout")
    slow = [await asyncio.open_connection(host, port) for _ in range(50)]

    async def trickle(writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            for _ in range(40):  # one header byte every 50 ms: never a complete head
                await asyncio.sleep(0.05)
                writer.write(b"x")
                await writer.drain()
        except ConnectionError:
            pass

    t0 = time.perf_counter()
    tricklers = [asyncio.create_task(trickle(w)) for _, w in slow]
    async with aiohttp.ClientSession() as s, s.get(proxy.url.removesuffix("/v1") + "/healthz") as r:
        assert r.status == 200
    results = await asyncio.gather(*(closed_by_server(r, 3.0) for r, _ in slow))
    assert all(results) and time.perf_counter() - t0 < 2.5
    assert closed("header_timeout") - before == 50
    for task in tricklers:
        task.cancel()
    for _, writer in slow:
        writer.close()


async def test_a_long_answer_is_never_cut_by_the_header_timeout(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.header_timeout_s": 0.3, "server.keepalive_timeout_s": 0.3})
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}],
            "mock": {"text": "word " * 40, "token_rate": 40}, "factcheck": {"mode": "off"}}  # about a second
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}/chat/completions", data=json.dumps(body)) as r:
        text = await r.text()
    assert r.status == 200 and text.rstrip().endswith("[DONE]")


async def test_idle_keepalive_connections_are_closed(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.keepalive_timeout_s": 0.5})
    reader, writer = await asyncio.open_connection(*host_port(proxy.url))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    assert b"200 OK" in await reader.readuntil(b"\r\n\r\n")
    t0 = time.perf_counter()
    assert await closed_by_server(reader, 3.0)
    assert 0.3 < time.perf_counter() - t0 < 2.0
    writer.close()


async def test_past_the_idle_cap_the_longest_idle_connection_goes(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.max_idle_connections": 5})
    before = closed("idle_cap")
    conns = []
    for _ in range(8):
        conns.append(await asyncio.open_connection(*host_port(proxy.url)))
        await asyncio.sleep(0.02)  # in order
    oldest = await asyncio.gather(*(closed_by_server(r, 1.0) for r, _ in conns[:3]))
    newest = await asyncio.gather(*(closed_by_server(r, 0.2) for r, _ in conns[3:]))
    assert oldest == [True] * 3 and newest == [False] * 5
    assert closed("idle_cap") - before == 3
    async with aiohttp.ClientSession() as s, s.get(proxy.url.removesuffix("/v1") + "/healthz") as r:
        assert r.status == 200  # a client with a request still gets in
    for _, writer in conns:
        writer.close()
