"""Connections that hold the server without asking it anything: a header-read timeout and a
cap on idle connections, over aiohttp's own keep-alive timeout.

- **Header-read timeout** (``server.header_timeout_s``): a new connection must send a complete
  request head within this, else it is closed. aiohttp's only guard here is its keep-alive
  timer, an hour by default: 300 slow-header connections (a byte every few seconds) were held
  for as long as the probe cared to wait.
- **Keep-alive timeout** (``server.keepalive_timeout_s``): an idle keep-alive connection (or one
  whose next request head is not complete) is closed after this (aiohttp's own timer).
- **Idle cap** (``server.max_idle_connections``): connections with no request in progress (new
  ones still sending their head, idle keep-alive ones) past the cap are closed, the longest
  idle first, so a flood of them cannot crowd out clients with requests to make.

Streams and websockets in progress are never idle: a request being answered is never closed
by either rule. Closed connections are counted in ``factcheck_connections_closed_total{reason}``.

aiohttp has no public hook for this: :class:`GuardedRunner` makes its server build
:class:`GuardedRequestHandler`, a ``RequestHandler`` that tracks when each connection last
parsed a request head (aiohttp's ``_request_count``, pinned with aiohttp in pyproject.toml).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from middleware.metrics import CONNECTIONS_CLOSED


class IdleConnections:
    """The server's idle connections, oldest first, and the limits that close them."""

    def __init__(self, header_timeout_s: float, max_idle: int) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_idle = max_idle
        self._idle: OrderedDict[GuardedRequestHandler, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._idle)

    def idle(self, handler: GuardedRequestHandler) -> None:
        self._idle[handler] = None
        self._idle.move_to_end(handler)
        while len(self._idle) > self.max_idle:
            oldest, _ = self._idle.popitem(last=False)
            CONNECTIONS_CLOSED.labels(reason="idle_cap").inc()
            oldest.force_close()

    def busy(self, handler: GuardedRequestHandler) -> None:
        self._idle.pop(handler, None)


class GuardedRequestHandler(RequestHandler):
    """aiohttp's connection handler with a header-read deadline and the idle bookkeeping."""

    def __init__(self, manager: Server, *, idle: IdleConnections, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._idle = idle
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._head_deadline = self._loop.call_later(self._idle.header_timeout_s, self._head_late)
        self._idle.idle(self)

    def data_received(self, data: bytes) -> None:
        before = self._request_count
        super().data_received(data)
        if self._request_count != before:  # a whole request head arrived: no longer idle
            if self._head_deadline is not None:
                self._head_deadline.cancel()
                self._head_deadline = None
            self._idle.busy(self)

    async def finish_response(self, request: Any, resp: Any, start_time: float | None) -> Any:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            if self.transport is not None and not self._messages:  # answered, waiting for the next request
                self._idle.idle(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None
        self._idle.busy(self)
        super().connection_lost(exc)

    def _head_late(self) -> None:
        self._head_deadline = None
        if self._request_count == 0 and self.transport is not None:
            CONNECTIONS_CLOSED.labels(reason="header_timeout").inc()
            self._idle.busy(self)
            self.force_close()


class GuardedServer(Server):
    """aiohttp's ``Server`` building :class:`GuardedRequestHandler` for each connection."""

    idle: IdleConnections

    def __call__(self) -> RequestHandler:
        return GuardedRequestHandler(self, loop=self._loop, idle=self.idle, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` whose connections are guarded as the module says."""

    def __init__(self, app: web.Application, *, header_timeout_s: float, keepalive_timeout_s: float,
                 max_idle_connections: int, **kwargs: Any) -> None:
        super().__init__(app, keepalive_timeout=keepalive_timeout_s, **kwargs)
        self._idle = IdleConnections(header_timeout_s, max_idle_connections)

    @property
    def idle_connections(self) -> IdleConnections:
        return self._idle

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = GuardedServer  # the same object, building guarded handlers
        assert isinstance(server, GuardedServer)
        server.idle = self._idle
        return server
