"""Connections that hold the server without completing a request, and the answers to what
aiohttp's HTTP parser refuses; over aiohttp's own keep-alive timeout.

- **Header-read timeout** (``server.header_timeout_s``): a request head must be complete within
  this of its first byte (a new connection: of the connection's opening), else the connection
  is closed. aiohttp's only guard here is its keep-alive timer (an hour by default, and a
  kept-alive connection's next head got the whole ``keepalive_timeout_s``).
- **Body deadline** (``server.body_min_rate_bytes_s``, ``server.body_timeout_s``): after its
  head, a body gets ``header_timeout_s`` plus one second per ``body_min_rate_bytes_s`` bytes
  received (Apache's mod_reqtimeout ``MinRate``), never more than ``body_timeout_s`` in all.
  Past it the request is answered 408 in the API's error format and the connection closed: a
  body trickled at 1 byte/s had held its connection for as long as the client cared to.
- **Keep-alive timeout** (``server.keepalive_timeout_s``): an idle keep-alive connection (no
  byte of a next request) is closed after this (aiohttp's own timer).
- **Pending cap** (``server.max_idle_connections``): connections without a complete request
  (new ones still sending their head, idle keep-alive ones, ones whose body is still
  arriving) past the cap are closed at once, the one waiting longest first, so a flood of
  them cannot crowd out clients with requests to make. The cap
  never exceeds the process's descriptor limit (``RLIMIT_NOFILE``) less
  ``server.reserved_descriptors``: slow clients cannot take the descriptors that answers
  need (their upstream connections), whatever the limit.

- **Body buffering** (``server.body_buffer_bytes``): a request's handler starts once its body
  is complete, or once this much of it has arrived (nginx's request buffering): a client
  trickling its body holds a timer and a buffer, not a handler, its middlewares and their
  cancellation when the deadline or the cap closes it. Under a reconnect flood (slow-body
  clients reconnecting as soon as they are closed) that handler was the largest part of what
  each connection cost, and every new client, ``/healthz`` included, waited in the accept
  queue behind hundreds of them (``load_tests/bench_slow_bodies.py``). A head saying
  ``Expect: 100-continue`` starts its handler at once: the client waits for its answer
  before it sends the body.

Streams and websockets in progress are never pending: a request whose body is complete is
never closed by these rules. Closed connections are counted in
``factcheck_connections_closed_total{reason}``.

What aiohttp's parser refuses (a malformed head, a header over 8,190 bytes, a bad chunk) and
what its handler cannot answer are answered by :meth:`GuardedRequestHandler.handle_error` in
the API's error format (``middleware.server.http_errors``): a fixed message that never
quotes the input, counted in ``factcheck_request_errors_total``, logged as one INFO line per
client address per minute (aiohttp logged an ERROR traceback for each). Every response says
``Server: factcheck-middleware``, no versions.

aiohttp has no public hook for this: :class:`GuardedRunner` makes its server build
:class:`GuardedRequestHandler`, a ``RequestHandler`` that watches each connection's request
heads and bodies (aiohttp's ``_request_count`` and ``_messages``, pinned with aiohttp in
pyproject.toml).
"""

from __future__ import annotations

import asyncio
import logging
import re
import resource
from collections import OrderedDict
from typing import Any

from aiohttp import hdrs, web
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import ERROR, RequestHandler, RequestPayloadError, _ErrInfo
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from middleware.errors import RequestError
from middleware.metrics import CONNECTIONS_CLOSED, REQUEST_ERRORS
from middleware.server.http_errors import SERVER_NAME, PeerLog, http_refusal, refusal_response

log = logging.getLogger(__name__)

_TARGET = re.compile(rb"^\s*[A-Za-z]+ +([^ ?\x00]*)")
"""The path of a request line, as far as it came (to answer a malformed request in its face's format)."""
_HEAD_SNIFF_BYTES = 256
DRAIN_S = 1.0
"""How long a connection answered for a failed body reads (and drops) what its client still
sends before it closes: the answer's bytes reach the client before any reset."""


def descriptor_budget(reserved: int) -> int:
    """How many descriptors the pending connections may hold: the process's soft
    ``RLIMIT_NOFILE`` less ``reserved`` (at least 1; unlimited: no bound from here)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(1, soft - reserved)


class ConnectionLimits:
    """The limits of :mod:`middleware.server.connections` (the ``server`` settings)."""

    def __init__(self, header_timeout_s: float, max_pending: int, body_timeout_s: float, body_min_rate: int,
                 body_buffer_bytes: int = 0) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_pending = max_pending
        self.body_timeout_s = body_timeout_s
        self.body_min_rate = body_min_rate
        self.body_buffer_bytes = body_buffer_bytes

    def body_due(self, started: float, received: int) -> float:
        """When a body whose head arrived at ``started``, with ``received`` bytes so far, is late."""
        allowance = self.header_timeout_s + (received / self.body_min_rate if self.body_min_rate else float("inf"))
        return started + min(allowance, self.body_timeout_s)


class PendingConnections:
    """The server's connections without a complete request, the longest waiting first, and
    the cap that closes them."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._pending: OrderedDict[GuardedRequestHandler, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def waiting(self, handler: GuardedRequestHandler) -> None:
        """``handler``'s connection waits for (the rest of) a request; past the cap the one
        waiting longest goes."""
        if handler not in self._pending:
            self._pending[handler] = None
        while len(self._pending) > self.limits.max_pending:
            oldest, _ = self._pending.popitem(last=False)
            CONNECTIONS_CLOSED.labels(reason="idle_cap").inc()
            oldest.evict()

    def served(self, handler: GuardedRequestHandler) -> None:
        """``handler``'s request is complete (or its connection closed)."""
        self._pending.pop(handler, None)


class GuardedRequestHandler(RequestHandler):
    """aiohttp's connection handler with the head and body deadlines, the pending
    bookkeeping, and errors answered in the API's format."""

    def __init__(self, manager: Server, *, pending: PendingConnections, peer_log: PeerLog, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._pending = pending
        self._limits = pending.limits
        self._peer_log = peer_log
        self._deadline: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None
        """The payload of the request whose body is still arriving."""
        self._body_started = 0.0
        self._body_received = 0
        self._head_start = b""
        """The first bytes of the head being received (its path names the face of an error)."""

    # ------------------------------------------------------------------ the connection's life
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._start_deadline(self._limits.header_timeout_s)
        self._pending.waiting(self)

    def data_received(self, data: bytes) -> None:
        if self._force_close or self._close or self._upgraded:
            super().data_received(data)
            return
        body = self._body
        if body is not None:
            self._body_received += len(data)
        elif data:
            if self._deadline is None:  # the first byte of a kept-alive connection's next head
                self._start_deadline(self._limits.header_timeout_s)
                self._pending.waiting(self)
            if len(self._head_start) < _HEAD_SNIFF_BYTES:
                self._head_start += data[:_HEAD_SNIFF_BYTES - len(self._head_start)]
        before = self._request_count
        waiter, self._waiter = self._waiter, None  # a request reaches its handler once its body is buffered
        try:
            super().data_received(data)
        finally:
            self._waiter = waiter
        if self._request_count != before:
            self._head_arrived(body)
        elif body is not None and body.is_eof():
            self._request_complete()
        self._hand_over()

    def _hand_over(self) -> None:
        """Wake aiohttp's request loop (waiting for a request) when the request that arrived
        may go to its handler."""
        waiter = self._waiter
        if waiter is not None and not waiter.done() and self._messages and self._request_ready():
            waiter.set_result(None)

    def _request_ready(self) -> bool:
        """The request that arrived last may go to its handler: its body is complete, failed,
        or buffered as far as ``body_buffer_bytes``, or its client waits for ``100 Continue``."""
        body = self._body
        if body is None or body.exception() is not None or body.total_bytes >= self._limits.body_buffer_bytes:
            return True  # (a body the parser failed, e.g. gzip that is not, is answered by its handler)
        message, _ = self._messages[-1]
        return not isinstance(message, _ErrInfo) and message.headers.get(hdrs.EXPECT, "").lower() == "100-continue"

    async def start(self) -> None:
        """aiohttp's request loop, once the connection's first request is ready: on uvloop
        its first read can arrive before this task first runs (a connection that waited in
        the accept queue has its head there already), and aiohttp's loop would take the
        request without waiting for its body."""
        if self._messages and not self._request_ready():
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        await super().start()

    def _head_arrived(self, previous_body: StreamReader | None) -> None:
        """A whole head (or a parse error) arrived: the body's deadline starts, or the
        request is complete. A parse error in the middle of a body fails that body."""
        message, payload = self._messages[-1] if self._messages else (ERROR, None)
        if isinstance(message, _ErrInfo) and previous_body is not None and not previous_body.is_eof() \
                and previous_body.exception() is None:
            failure = RequestPayloadError("malformed request body")
            failure.__cause__ = message.exc
            previous_body.set_exception(failure)
        if not isinstance(message, _ErrInfo):  # (an error's is read by handle_error)
            self._head_start = b""
        self._cancel_deadline()
        if payload is None or payload.is_eof() or isinstance(message, _ErrInfo):
            self._request_complete()
            return
        self._body = payload
        self._body_started = self._loop.time()
        self._body_received = 0
        self._deadline = self._loop.call_at(self._limits.body_due(self._body_started, 0), self._deadline_passed)

    def _request_complete(self) -> None:
        self._body = None
        self._cancel_deadline()
        self._pending.served(self)

    async def finish_response(self, request: Any, resp: Any, start_time: float | None) -> Any:
        """Send the response; a request whose body failed (too slow, undecodable) then has
        its connection closed (the rest of its body is not read: aiohttp would linger)."""
        content = getattr(request, "content", None)
        body_failed = isinstance(content, StreamReader) and content.exception() is not None
        if body_failed:
            resp.force_close()
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            if body_failed:
                self._close_after_answer()
            elif self.transport is not None and not self._messages and self._body is None:
                self._pending.waiting(self)  # answered: waiting for the next request

    def _close_after_answer(self) -> None:
        """Close a connection whose body failed without losing its answer: a FIN follows the
        answer (half-close), what the client still sends is read and dropped for ``DRAIN_S``,
        then the connection closes. Closed at once, a client still sending its body gets a
        reset, which can overtake the answer and discard it."""
        transport = self.transport
        self._force_close = True  # aiohttp reads no more of the body and no next request
        if self._waiter:
            self._waiter.cancel()
        if transport is None:
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._loop.call_later(DRAIN_S, transport.close)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_deadline()
        self._body = None
        self._pending.served(self)
        super().connection_lost(exc)
        # A request held for its body never left the queue, and its body refers back to this
        # handler (a reference cycle per connection: under a reconnect flood, 150,000 objects
        # that only the cyclic collector freed, in 400 ms pauses).
        self._messages.clear()

    def evict(self) -> None:
        """Closed by the pending cap, at once: its descriptor is what the cap is for (a body
        in progress is not answered; its handler sees the client gone).

        As ``force_close`` but ``self.transport`` stays set until the close completes
        (``connection_lost``, which cancels the handler): ``force_close`` cleared it at once,
        and a handler that read its body in between (one whose head had just arrived) got
        aiohttp's ``RuntimeError('Connection closed.')``, logged with a traceback, dozens a
        second under a reconnect flood."""
        self._cancel_deadline()
        self._body = None
        self._force_close = True
        if self._waiter:
            self._waiter.cancel()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ deadlines
    def _start_deadline(self, after_s: float) -> None:
        self._cancel_deadline()
        self._deadline = self._loop.call_later(after_s, self._deadline_passed)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self.transport is None:
            return
        if self._body is None:  # still no whole head
            CONNECTIONS_CLOSED.labels(reason="header_timeout").inc()
            self._pending.served(self)
            self.force_close()
            return
        due = self._limits.body_due(self._body_started, self._body_received)
        if self._loop.time() < due:  # bytes arrived since: the deadline moved on
            self._deadline = self._loop.call_at(due, self._deadline_passed)
            return
        CONNECTIONS_CLOSED.labels(reason="body_timeout").inc()
        self._fail_body("the request body arrived too slowly (server.body_min_rate_bytes_s, server.body_timeout_s)")

    def _fail_body(self, message: str) -> None:
        """Fail the body in progress with a 408: its handler's read raises it and it is
        answered in the API's format; the connection then closes (``finish_response``)."""
        body, self._body = self._body, None
        self._pending.served(self)
        if body is not None and not body.is_eof() and body.exception() is None:
            body.set_exception(RequestError(message, status=408, code="request_timeout"))
        self._hand_over()  # a handler held for its body reads the failure and answers it

    # ------------------------------------------------------------------ errors
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's answer to a request it could not parse, or whose handler failed: in
        the API's error format, never quoting the input. A client's error is counted and
        logged in one line per address per minute; a failure of ours keeps its traceback."""
        if request.writer.output_size > 0:  # as aiohttp: the answer is under way, the connection is broken
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        refusal = http_refusal(exc)
        if refusal is None:
            self.logger.error("Error handling request from %s", request.remote, exc_info=exc)
            error = RequestError("the proxy failed while handling the request", status=status,
                                 type_="server_error", code="internal_error")
        else:
            error = refusal
            REQUEST_ERRORS.labels(status=str(error.status)).inc()
            self._peer_log.info(str(request.remote), "refused a request from %s: %s (%d %s)",
                                request.remote, error, error.status, error.code)
        return refusal_response(self._face_path(request), error)

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """aiohttp's own error lines: a client's failure (a body that failed while aiohttp
        read its rest) is one line per address per minute, not a traceback."""
        exc = kw.get("exc_info")
        if isinstance(exc, BaseException) and (http_refusal(exc) is not None or isinstance(exc, RequestError)):
            peer = self.peername[0] if isinstance(self.peername, tuple) else str(self.peername)
            self._peer_log.info(str(peer), "connection from %s closed: %s", peer, exc)
            return
        super().log_exception(*args, **kw)

    def _face_path(self, request: BaseRequest) -> str | None:
        """The path of the failed request: its own once parsed, else what its request line said."""
        if request._message is not ERROR:  # aiohttp's placeholder for a request it could not parse
            return request.path
        matched = _TARGET.match(self._head_start)
        return matched.group(1).decode("latin-1") if matched else None


class GuardedServer(Server):
    """aiohttp's ``Server`` building :class:`GuardedRequestHandler` for each connection."""

    pending: PendingConnections
    peer_log: PeerLog

    def __call__(self) -> RequestHandler:
        return GuardedRequestHandler(self, loop=self._loop, pending=self.pending, peer_log=self.peer_log,
                                     **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` whose connections are guarded as the module says."""

    def __init__(self, app: web.Application, *, header_timeout_s: float, keepalive_timeout_s: float,
                 max_idle_connections: int, body_timeout_s: float, body_min_rate_bytes_s: int,
                 reserved_descriptors: int, body_buffer_bytes: int = 0, **kwargs: Any) -> None:
        super().__init__(app, keepalive_timeout=keepalive_timeout_s, **kwargs)
        cap = min(max_idle_connections, descriptor_budget(reserved_descriptors))
        self._pending = PendingConnections(
            ConnectionLimits(header_timeout_s, cap, body_timeout_s, body_min_rate_bytes_s, body_buffer_bytes))
        self._peer_log = PeerLog(log)
        app.on_response_prepare.append(_name_the_server)

    @property
    def pending_connections(self) -> PendingConnections:
        return self._pending

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = GuardedServer  # the same object, building guarded handlers
        assert isinstance(server, GuardedServer)
        server.pending = self._pending
        server.peer_log = self._peer_log
        return server


async def _name_the_server(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER_NAME
