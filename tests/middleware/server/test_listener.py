"""The listening site: a burst of connections is accepted in one turn of the loop, on uvloop
too (whose own server accepts one connection per turn); requests are served as before."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from middleware.commands.serve import start_site
from middleware.server.listener import AcceptingServer, free_descriptors, listening_sockets, open_descriptors

uvloop = pytest.importorskip("uvloop")

ROOT = Path(__file__).resolve().parents[3]
"""The checkout whose ``middleware`` the flooded server runs."""


class Counting(asyncio.Protocol):
    made = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        Counting.made += 1


async def accepted_within_turns(make_server: str, burst: int, turns: int) -> int:
    """Connections of a burst (all completed by the kernel before the loop runs) that the
    loop has handed to their protocol after ``turns`` turns."""
    loop = asyncio.get_running_loop()
    Counting.made = 0
    if make_server == "accepting":
        server: asyncio.AbstractServer = AcceptingServer(loop, Counting, listening_sockets("127.0.0.1", 0))
        await server.start_serving()
    else:
        server = await loop.create_server(Counting, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    clients = []
    for _ in range(burst):  # blocking connects: the kernel completes them, the loop does not run
        client = socket.create_connection(("127.0.0.1", port))
        clients.append(client)
    for _ in range(turns):
        await asyncio.sleep(0)
    made = Counting.made
    for client in clients:
        client.close()
    server.close()
    await server.wait_closed()
    return made


def test_a_burst_of_connections_is_accepted_at_once_on_uvloop() -> None:
    burst = 50
    assert uvloop.run(accepted_within_turns("accepting", burst, turns=5)) == burst
    # uvloop's own server: one connection a turn (what the site replaces)
    assert uvloop.run(accepted_within_turns("uvloop", burst, turns=5)) < burst


async def test_the_site_serves_many_requests_at_once_and_stops_listening_when_cleaned_up() -> None:
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app.router.add_get("/", hello)
    runner, port = await start_site(app, "127.0.0.1", 0)
    assert runner.addresses == [("127.0.0.1", port)]
    try:
        async with aiohttp.ClientSession() as session:
            async def get() -> str:
                async with session.get(f"http://127.0.0.1:{port}/") as response:
                    return await response.text()

            assert await asyncio.gather(*(get() for _ in range(200))) == ["hello"] * 200
    finally:
        await runner.cleanup()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_listening_sockets_set_reuse_port_when_asked() -> None:
    plain, = listening_sockets("127.0.0.1", 0)
    port = plain.getsockname()[1]
    shared_a, = listening_sockets("127.0.0.1", 0, reuse_port=True)
    shared_port = shared_a.getsockname()[1]
    shared_b, = listening_sockets("127.0.0.1", shared_port, reuse_port=True)  # a second process's socket
    try:
        assert plain.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 0
        assert shared_b.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
        with pytest.raises(OSError):
            listening_sockets("127.0.0.1", port)  # taken, and not shared
    finally:
        for sock in (plain, shared_a, shared_b):
            sock.close()


def test_a_family_the_kernel_lacks_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.socket

    def no_ipv6(family: int = socket.AF_INET, *args: object) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(97, "Address family not supported by protocol")
        return real(family, *args)  # type: ignore[arg-type]

    infos = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 0, 0, 0)),
             (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: infos)
    monkeypatch.setattr(socket, "socket", no_ipv6)
    sockets = listening_sockets("localhost", 0)
    assert [sock.family for sock in sockets] == [socket.AF_INET]
    sockets[0].close()
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: infos[:1])
    with pytest.raises(OSError, match="no address"):
        listening_sockets("localhost", 0)


FLOODED_SERVER = """
import asyncio, logging, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from aiohttp import web
from middleware import eventloop
from middleware.commands.serve import start_site
from middleware.settings import ServerSettings

async def main() -> None:
    app = web.Application()
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")
    async def upload(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/upload", upload)
    _, port = await start_site(app, "127.0.0.1", 0, server=ServerSettings(reserved_descriptors=64))
    print(port, flush=True)
    await asyncio.Event().wait()

eventloop.run(main())
"""
"""A server whose descriptor limit is ``argv[1]``: its cap on waiting connections is the
limit less 64."""


async def reconnect_forever(port: int, stop: asyncio.Event, head_after_s: float) -> None:
    """A client that sends a request head and the first byte of its body ``head_after_s``
    after connecting, waits to be closed, and reconnects at once (a reconnect flood)."""
    head = b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4096\r\n\r\nx"
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            await asyncio.sleep(head_after_s)
            writer.write(head)
            while not stop.is_set() and not reader.at_eof():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(256), 0.5)
        except OSError:
            pass
        finally:
            writer.close()


async def healthz_time(port: int) -> float | None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
                session.get(f"http://127.0.0.1:{port}/healthz") as response:
            ok = response.status == 200 and await response.text() == "ok"
    except (aiohttp.ClientError, TimeoutError):
        return None
    return loop.time() - started if ok else None


async def test_a_reconnect_flood_never_runs_the_server_out_of_descriptors() -> None:
    """400 clients that reconnect as soon as they are closed, against a server at a
    256-descriptor limit (its cap on waiting connections: 192): accepting takes no more per
    turn than the descriptors free, so no accept (or anything else) fails with "Too many open
    files", and /healthz is answered throughout. (Accepting the whole queue in one turn ran
    out of descriptors before the cap had closed anything.) A connection closed by the cap
    while its handler starts reading its body is no traceback either."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip("the clients need 1,024 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1024), hard))
    server = subprocess.Popen([sys.executable, "-c", FLOODED_SERVER, "256"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(server.stdout.readline), 60)
        port = int(line)
        stop = asyncio.Event()
        flood = [asyncio.create_task(reconnect_forever(port, stop, head_after_s=i % 8 * 0.05))
                 for i in range(400)]
        times = []
        for _ in range(10):
            await asyncio.sleep(0.4)
            times.append(await healthz_time(port))
        stop.set()
        await asyncio.gather(*flood)
    finally:
        server.terminate()
        _, log = await asyncio.to_thread(server.communicate, timeout=30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert "Too many open files" not in log, log[-2000:]
    assert None not in times, log[-2000:]
    assert "Traceback" not in log, log[-3000:]


def test_free_descriptors_counts_what_the_process_holds() -> None:
    before = free_descriptors()
    if before is None:
        pytest.skip("no descriptor limit, or no /proc/self/fd to count them in")
    assert open_descriptors() == len(os.listdir("/proc/self/fd")) - 1  # the size of the folder (Linux 6.2+), or its listing
    held = [socket.socket() for _ in range(5)]
    try:
        assert free_descriptors() == before - 5
    finally:
        for sock in held:
            sock.close()
    assert free_descriptors() == before
