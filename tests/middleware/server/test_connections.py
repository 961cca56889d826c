"""Connections that hold the server without asking anything (issue 35): slow-header clients are
closed after ``server.header_timeout_s``, idle keep-alive ones after
``server.keepalive_timeout_s``, and past ``server.max_idle_connections`` the longest idle one
goes; a request being answered, however long, is never closed. Loopback only."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import resource
import socket
import time
import weakref
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from middleware.errors import RequestError
from middleware.metrics import CONNECTIONS_CLOSED
from tests.support.checkers import ScriptedChecker


def closed(reason: str) -> float:
    return CONNECTIONS_CLOSED.labels(reason=reason)._value.get()


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """True when the server closes the connection within ``within`` seconds (a reset counts:
    a client still writing to a connection the server closed gets one, depending on timing)."""
    try:
        async with asyncio.timeout(within):
            while await reader.read(1024):
                pass
        return True
    except ConnectionResetError:
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


# --- issue 47: the whole request has a deadline, not only its head ---------------------------

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}], "mock": {"text": "Hi."},
                   "factcheck": {"mode": "off"}}).encode()


def head(length: int, path: str = "/v1/chat/completions") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


async def answer_then_close(reader: asyncio.StreamReader, within: float) -> bytes | None:
    """Everything the server sends until it closes, or None if it does not close within ``within`` s."""
    try:
        async with asyncio.timeout(within):
            return await reader.read()
    except TimeoutError:
        return None


async def trickle(writer: asyncio.StreamWriter, data: bytes, every_s: float, piece: int = 1) -> None:
    try:
        for at in range(0, len(data), piece):
            writer.write(data[at:at + piece])
            await writer.drain()
            await asyncio.sleep(every_s)
    except ConnectionError:
        pass


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_a_body_slower_than_the_floor_rate_is_answered_408_and_closed(make_proxy, path):
    proxy = await make_proxy(ScriptedChecker(), **{"server.header_timeout_s": 0.5,
                                                   "server.body_min_rate_bytes_s": 1024})
    before = closed("body_timeout")
    reader, writer = await asyncio.open_connection(*host_port(proxy.url))
    writer.write(head(len(BODY), path))
    sending = asyncio.create_task(trickle(writer, BODY, 0.05))  # 20 bytes/s
    t0 = time.perf_counter()
    answer = await answer_then_close(reader, 5.0)
    assert answer is not None and 0.4 < time.perf_counter() - t0 < 2.0  # before: held as long as the body trickles
    status, _, rest = answer.partition(b"\r\n")
    assert b" 408 " in status and b"Connection: close" in rest
    payload = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert payload["error"]["type"] == "invalid_request_error"  # the face's format
    assert payload.get("type") == "error" if path == "/v1/messages" else payload["error"]["code"] == "request_timeout"
    assert closed("body_timeout") - before == 1
    assert proxy.upstream.requests == []
    sending.cancel()
    writer.close()


async def test_a_body_past_the_total_deadline_is_answered_408(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.body_timeout_s": 0.6, "server.body_min_rate_bytes_s": 0})
    reader, writer = await asyncio.open_connection(*host_port(proxy.url))
    writer.write(head(len(BODY) + 1000) + BODY)  # fast, but never complete
    await writer.drain()
    t0 = time.perf_counter()
    answer = await answer_then_close(reader, 5.0)
    assert answer is not None and b" 408 " in answer.partition(b"\r\n")[0]
    assert 0.4 < time.perf_counter() - t0 < 2.0
    writer.close()


async def test_a_body_above_the_floor_rate_is_served_however_long_it_takes(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.header_timeout_s": 0.3,
                                                   "server.body_min_rate_bytes_s": 200})
    body = BODY[:-1] + b', "padding": "' + b"x" * 600 + b'"}'
    reader, writer = await asyncio.open_connection(*host_port(proxy.url))
    writer.write(head(len(body)))
    await trickle(writer, body, 0.1, piece=60)  # 600 bytes/s for about 1.2 s: past header_timeout_s, above the floor
    answer = await reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in answer.partition(b"\r\n")[0]
    writer.close()


async def test_a_kept_alive_connections_next_head_gets_the_header_timeout(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.header_timeout_s": 0.5, "server.keepalive_timeout_s": 30})
    reader, writer = await asyncio.open_connection(*host_port(proxy.url))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    assert b"200 OK" in await reader.readuntil(b"\r\n\r\n")
    await reader.readexactly(len(b'{"status":"ok"}'))
    sending = asyncio.create_task(trickle(writer, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 100,
                                          0.05))
    t0 = time.perf_counter()
    assert await closed_by_server(reader, 3.0)  # before: the 30 s keep-alive allowance
    assert time.perf_counter() - t0 < 2.0
    sending.cancel()
    writer.close()


async def test_bodies_in_progress_count_against_the_cap_on_waiting_connections(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.max_idle_connections": 5})
    before = closed("idle_cap")
    conns = []
    for _ in range(8):
        reader, writer = await asyncio.open_connection(*host_port(proxy.url))
        writer.write(head(len(BODY)) + BODY[:10])  # a head, then a body that stops
        await writer.drain()
        conns.append((reader, writer))
        await asyncio.sleep(0.05)  # in order
    oldest = await asyncio.gather(*(closed_by_server(r, 1.0) for r, _ in conns[:3]))
    newest = await asyncio.gather(*(closed_by_server(r, 0.2) for r, _ in conns[3:]))
    assert oldest == [True] * 3 and newest == [False] * 5  # before: bodies in progress were never capped
    assert closed("idle_cap") - before == 3
    async with aiohttp.ClientSession() as s, s.get(proxy.url.removesuffix("/v1") + "/healthz") as r:
        assert r.status == 200
    for _, writer in conns:
        writer.close()


def test_the_cap_on_waiting_connections_leaves_descriptors_for_answers():
    from middleware.server.connections import GuardedRunner

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    runner = GuardedRunner(web.Application(), header_timeout_s=10, keepalive_timeout_s=75,
                           max_idle_connections=10**6, body_timeout_s=60, body_min_rate_bytes_s=1024,
                           reserved_descriptors=100)
    assert runner.pending_connections.limits.max_pending == soft - 100


# --- issue 47: a request reaches its handler once its body has arrived (request buffering) ---

class Handlers:
    """A server whose POST /echo handler counts its starts and answers the body's length (or
    the failure that reading it raised)."""

    def __init__(self) -> None:
        self.started = 0

    async def echo(self, request: web.Request) -> web.Response:
        self.started += 1
        try:
            return web.Response(text=str(len(await request.read())))
        except RequestError as exc:  # as the proxy's error middleware answers it
            return web.Response(status=exc.status, text=str(exc))

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @contextlib.asynccontextmanager
    async def serving(self, **server: object) -> AsyncIterator[int]:
        from middleware.commands.serve import start_site
        from middleware.settings import ServerSettings

        app = web.Application()
        app.router.add_post("/echo", self.echo)
        app.router.add_get("/healthz", self.healthz)
        runner, port = await start_site(app, "127.0.0.1", 0, server=ServerSettings(**server))
        self.runner = runner
        try:
            yield port
        finally:
            await runner.cleanup()


def echo_head(length: int, *extra: str) -> bytes:
    return "\r\n".join(["POST /echo HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}", *extra, "", ""]).encode()


async def settle() -> None:
    """Time for the server's loop to act on what was sent (a generous margin, not a bound)."""
    await asyncio.sleep(0.3)


async def test_a_handler_starts_once_its_body_has_arrived():
    handlers = Handlers()
    async with handlers.serving() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(echo_head(100) + b"x" * 50)
        await settle()
        assert handlers.started == 0  # before: the handler started at the head and waited for the body
        writer.write(b"x" * 50)
        answer = await reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in answer.partition(b"\r\n")[0] and handlers.started == 1
        assert await reader.readexactly(3) == b"100"
        writer.close()


async def held_when_sent_before_the_accept() -> int:
    """Handlers started for 20 requests whose heads and partial bodies were in the kernel
    before the server accepted their connections."""
    handlers = Handlers()
    async with handlers.serving() as port:
        clients = []
        for _ in range(20):  # blocking: the server's loop does not run in between
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(echo_head(100) + b"x" * 50)
            clients.append(client)
        await settle()
        for client in clients:
            client.close()
    return handlers.started


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_request_sent_before_its_connection_is_accepted_waits_for_its_body_too(loop):
    """As behind a flood in the accept queue: on uvloop the first read reaches the connection
    before aiohttp's request loop first runs (before: all 20 handlers started)."""
    run = asyncio.run if loop == "asyncio" else pytest.importorskip("uvloop").run
    assert run(held_when_sent_before_the_accept()) == 0


@pytest.mark.parametrize("closed_by", ["client", "cap"])
async def test_a_connection_closed_while_its_request_is_held_is_freed_at_once(closed_by):
    """Freed by reference counting, not left to the cyclic collector: a held request's body
    refers back to its connection (before: a cycle per connection, 150,000 objects freed in
    400 ms collector pauses under a reconnect flood)."""
    handlers = Handlers()
    async with handlers.serving(max_idle_connections=1) as port:
        server = handlers.runner.server
        assert server is not None
        gc.disable()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(echo_head(100) + b"x" * 50)
            await settle()
            (connection,) = server.connections
            held = weakref.ref(connection)
            del connection
            if closed_by == "client":
                writer.close()
            else:  # a newer connection past the cap of 1
                _, newer = await asyncio.open_connection("127.0.0.1", port)
            await settle()
            assert held() is None
        finally:
            gc.enable()
        if closed_by == "cap":
            newer.close()
        writer.close()


@pytest.mark.parametrize(("buffer", "length", "sent"), [(0, 100, 50), (1024, 10_000, 2000)])
async def test_past_the_body_buffer_a_handler_starts_while_its_body_arrives(buffer, length, sent):
    """With no buffer, at the head (the setting turns buffering off); past the buffer, before
    the body is complete (a large upload is not held whole)."""
    handlers = Handlers()
    async with handlers.serving(body_buffer_bytes=buffer) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(echo_head(length) + b"x" * sent)
        await settle()
        assert handlers.started == 1
        writer.write(b"x" * (length - sent))
        assert b" 200 " in (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")[0]
        writer.close()


async def test_a_client_expecting_100_continue_gets_it_before_its_body():
    handlers = Handlers()
    async with handlers.serving() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(echo_head(100, "Expect: 100-continue"))
        continued = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)  # held for its body: never
        assert continued.startswith(b"HTTP/1.1 100 Continue")
        writer.write(b"x" * 100)
        assert b" 200 " in (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")[0]
        writer.close()


async def test_a_held_body_that_arrives_too_slowly_is_answered_408_by_its_handler():
    handlers = Handlers()
    async with handlers.serving(header_timeout_s=0.3, body_min_rate_bytes_s=1024) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(echo_head(100) + b"x" * 10)
        answer = await answer_then_close(reader, 5.0)
        assert answer is not None and b" 408 " in answer.partition(b"\r\n")[0]
        assert handlers.started == 1  # released to answer the failure
        writer.close()


async def test_a_reconnect_flood_at_the_cap_starts_no_handler_and_healthz_answers():
    """40 slow-body clients reconnecting as soon as the cap (20) closes them: every one is
    closed before its handler starts (before: each started one, then had it cancelled: most
    of what a flood connection cost), and /healthz answers each time it is asked."""
    handlers = Handlers()
    before = closed("idle_cap")
    stop = asyncio.Event()

    async def slow_client(port: int) -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(echo_head(4096) + b"x")
                while not stop.is_set() and not reader.at_eof():
                    await asyncio.wait_for(reader.read(256), 0.2)
                writer.close()
            except (ConnectionError, TimeoutError):
                pass

    async with handlers.serving(max_idle_connections=20) as port:
        flood = [asyncio.create_task(slow_client(port)) for _ in range(40)]
        statuses = []
        async with aiohttp.ClientSession() as session:
            for _ in range(5):
                await settle()
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    statuses.append(r.status)
        stop.set()
        await asyncio.gather(*flood)
    assert statuses == [200] * 5
    assert closed("idle_cap") - before > 40  # the cap was reached, over and over
    assert handlers.started == 0
