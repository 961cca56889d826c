"""The server's listening sockets: every waiting connection accepted at each turn of the loop.

uvloop (libuv since 1.45) accepts one connection per turn of the event loop and counts on
the socket staying readable for the next. A relay busy with hundreds of streams turns its
loop every 10-20 ms, so a burst of new connections waits in the kernel's accept queue one
turn each: with 200 annotate streams starting within half a second, the queue grew to 89
connections and the last ones waited 300 ms to be accepted, before the proxy had read a
byte of their requests (off mode's shorter turns kept up). asyncio's own loop accepts up to
the backlog at once (bpo-27906). ``AcceptingSite`` does that on either loop: it watches each
listening socket itself (``add_reader``), accepts until the kernel's queue is empty, and
hands every connection to aiohttp's server (``connect_accepted_socket``). The work per
connection is the same; what changes is that none waits for other turns of the loop.

Accepting never runs the process out of descriptors: each turn takes at most as many
connections as the descriptors still free under ``RLIMIT_NOFILE`` (less ``DESCRIPTOR_SPARE``),
counted in ``/proc/self/fd``. The cap on waiting connections (``middleware.server.connections``)
closes the oldest waiting one for each connection accepted past it, but those descriptors are
freed a turn or two later: under a reconnect flood (1,100 slow-body clients reconnecting at
once, a 1,024-descriptor limit) a turn that accepted the whole queue ran out of descriptors
before the cap had closed anything ("Too many open files"). With no room left, accepting
pauses for ``FULL_RETRY_S`` and resumes once the closed connections have given theirs back.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

BACKLOG = 1024
"""The kernel's accept queue per socket (capped by ``net.core.somaxconn``): room for a burst."""
RETRY_AFTER_S = 0.05
"""Out of file descriptors (or memory), accepting pauses this long. asyncio's loop pauses a
second; here the cap on waiting connections (``middleware.server.connections``) frees
descriptors within a turn or two of the loop, and a second's pause left every new client,
``/healthz`` included, waiting for it."""
DESCRIPTOR_SPARE = 32
"""Descriptors a turn of accepting leaves free for the rest of the turn's work (upstream
connections of requests being answered, files): the cap on waiting connections keeps
``server.reserved_descriptors`` free between floods, these are what a flood cannot take."""
FULL_RETRY_S = 0.005
"""With no descriptor to spare, accepting pauses this long: about a turn of the loop, in
which the connections closed by the cap on waiting connections give their descriptors back."""
FD_DIR = "/proc/self/fd"
"""The process's open descriptors, one entry each (Linux)."""
LOG_EVERY_S = 10.0
"""At most one line per this many seconds about being out of descriptors."""
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def free_descriptors() -> int | None:
    """How many more descriptors the process may open under its soft ``RLIMIT_NOFILE``; None
    when there is no limit or no way to count (no ``/proc/self/fd``): then nothing is held back."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        return soft - open_descriptors()
    except FileNotFoundError:
        return None
    except OSError:  # out of descriptors to list them with
        return 0


def open_descriptors() -> int:
    """The descriptors the process holds. Linux 6.2 and later give the count as the size of
    ``/proc/self/fd`` (5 us); listing it, as older kernels need, took 0.2-15 ms at a thousand
    descriptors, and under a reconnect flood, where accepting counts at every turn, a quarter
    of the proxy's CPU went to the listing."""
    size = os.stat(FD_DIR).st_size
    if size > 0:
        return size
    return len(os.listdir(FD_DIR)) - 1  # less the listing's own descriptor


def listening_sockets(host: str | None, port: int, reuse_port: bool = False) -> list[socket.socket]:
    """Non-blocking sockets listening on every address of ``host`` (all interfaces when None
    or empty), with SO_REUSEADDR, and SO_REUSEPORT when asked, as ``loop.create_server`` binds."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:  # a family this kernel lacks (IPv6 off): its addresses are skipped
                continue
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:  # one socket per family, as asyncio binds "::" and "0.0.0.0"
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise OSError(f"no address of {host!r} can be listened on")
    return sockets


class AcceptingServer(asyncio.AbstractServer):
    """Listening sockets whose connections go to ``protocol_factory`` (aiohttp's server),
    each accepted as soon as the loop learns of it, all waiting ones at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol_factory: Any, sockets: list[socket.socket]) -> None:
        self._loop = loop
        self._protocol_factory = protocol_factory
        self._sockets = sockets
        self._serving = False
        self._opening: set[asyncio.Task[Any]] = set()
        self._logged_at = -LOG_EVERY_S

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return tuple(self._sockets)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._serving

    async def start_serving(self) -> None:
        if not self._serving:
            self._serving = True
            for sock in self._sockets:
                self._loop.add_reader(sock.fileno(), self._accept, sock)

    async def serve_forever(self) -> None:
        await self.start_serving()
        await asyncio.Event().wait()

    def close(self) -> None:
        """Stop accepting and close the sockets; connections already open stay with aiohttp
        (its runner closes them at cleanup)."""
        if self._serving:
            for sock in self._sockets:
                self._loop.remove_reader(sock.fileno())
        self._serving = False
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    async def wait_closed(self) -> None:
        if self._opening:
            await asyncio.gather(*self._opening, return_exceptions=True)

    def _accept(self, listening: socket.socket) -> None:
        free = free_descriptors()
        room = BACKLOG if free is None else min(BACKLOG, free - DESCRIPTOR_SPARE)
        if room <= 0:  # the descriptors closed by the cap come back in a turn or two
            self._pause(listening, FULL_RETRY_S)
            return
        for _ in range(room):
            try:
                connection, _ = listening.accept()
            except (BlockingIOError, InterruptedError):
                return  # the queue is empty
            except ConnectionAbortedError:
                continue  # the client gave up while it waited
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                now = self._loop.time()
                if now - self._logged_at >= LOG_EVERY_S:
                    self._logged_at = now
                    log.error("cannot accept connections (%s); trying again every %.2f s", exc, RETRY_AFTER_S)
                self._pause(listening, RETRY_AFTER_S)
                return
            connection.setblocking(False)
            opening = self._loop.create_task(self._open(connection))
            self._opening.add(opening)
            opening.add_done_callback(self._opening.discard)
        if room < BACKLOG:  # stopped at the descriptors free, not at the queue's end
            self._pause(listening, FULL_RETRY_S)

    def _pause(self, listening: socket.socket, delay_s: float) -> None:
        """Stop watching ``listening`` for ``delay_s``."""
        self._loop.remove_reader(listening.fileno())
        self._loop.call_later(delay_s, self._resume, listening)

    def _resume(self, listening: socket.socket) -> None:
        if self._serving and listening in self._sockets:
            self._loop.add_reader(listening.fileno(), self._accept, listening)

    async def _open(self, connection: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._protocol_factory, connection)
        except OSError as exc:  # reset before it was set up: nothing was read from it
            log.debug("connection lost while it was set up: %s", exc)
            connection.close()


class AcceptingSite(web.BaseSite):
    """aiohttp's TCP site, listening through ``AcceptingServer``."""

    __slots__ = ("_host", "_port", "_reuse_port")

    def __init__(self, runner: web.BaseRunner, host: str | None, port: int, reuse_port: bool = False) -> None:
        super().__init__(runner, backlog=BACKLOG)
        self._host = host
        self._port = port
        self._reuse_port = reuse_port

    @property
    def name(self) -> str:
        return f"http://{self._host or '0.0.0.0'}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        accepting = AcceptingServer(asyncio.get_running_loop(), server,
                                    listening_sockets(self._host, self._port, self._reuse_port))
        self._server = accepting
        self._port = accepting.sockets[0].getsockname()[1]
        await accepting.start_serving()

    async def stop(self) -> None:
        """Stop accepting; the connections being set up reach aiohttp's server before its
        runner shuts the connections down."""
        self._runner._check_site(self)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._runner._unreg_site(self)
