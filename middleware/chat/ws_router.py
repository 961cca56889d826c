"""``GET /v1/ws``: the proxy's stream over a websocket, for browsers (the UI at ``/``).

Client → server, one JSON object per message (``protocol.WsChat``, ``protocol.WsCancel``):
- ``{"type": "chat", "request": <chat completions body, optional "factcheck">}`` starts an answer
  (optional ``"upstream_api"``: ``chat``, ``responses`` or ``messages``, the API the proxy speaks
  to the upstream for it, where the upstream speaks several, as the demo LLM does);
- ``{"type": "cancel"}`` stops the answer in progress.

Server → client, one JSON object per message, the same events the SSE stream carries:
- ``{"type": "start", "mode": "annotate"}`` (``protocol.WsStart``: what the ``X-Factcheck-Mode`` header says over HTTP);
- every ``chat.completion.chunk`` as its JSON, including the extension chunks with a
  top-level ``factcheck`` object (sentence reports and the summary);
- errors as OpenAI error objects ``{"error": {...}}`` (request errors, upstream errors before
  or during the stream);
- block mode, when a sentence stopped the answer: ``{"type": "blocked", "reason": ..., "report":
  ..., "summary": ...}`` (``protocol.BlockedEvent``) after the text before it, nothing else after;
- ``{"type": "done"}`` (``protocol.WsDone``) after every chat request, whatever happened.
One answer at a time per socket; closing the socket cancels the upstream request and checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from aiohttp import WSMsgType, web

from middleware.chat.api_router import SERVICE_KEY, SSEEncoder, failure_outcome, upstream_headers
from middleware.chat.checked_stream import End, Failed, Forward, StreamEvent
from middleware.chat.chunks import ChunkItem
from middleware.chat.parsing import load_json
from middleware.chat.protocol import UPSTREAM_APIS, BlockedEvent, WsDone, WsStart
from middleware.errors import error_body
from middleware.errors import RequestError, UpstreamError
from middleware.metrics import HTTP_REQUESTS, REQUEST_ERRORS, UPSTREAM_ERRORS
from middleware.chat.hosts import ALLOWED_HOSTS_KEY
from middleware.chat.limits import LIMITER_KEY, client_id
from middleware.sse import SSEParser, dumps

log = logging.getLogger(__name__)

WS_PATH = "/v1/ws"


def add_ws_routes(app: web.Application) -> None:
    """The websocket over the app's ``ChatService`` (``api_router.add_chat_routes`` sets it)."""
    app.router.add_get(WS_PATH, chat_socket)


class _Socket:
    """One websocket: serialised sends and at most one answer in progress."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        self.request = request
        self.ws = ws
        self.answer: asyncio.Task[None] | None = None
        self.closing = False
        self.outcome = "ok"
        self._send_lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.ws.send_str(dumps(message))

    async def on_text(self, text: str) -> None:
        try:
            message = load_json(text, self.request.app[SERVICE_KEY].settings.server.max_json_depth, what="message")
        except RequestError as exc:
            REQUEST_ERRORS.labels(status=str(exc.status)).inc()
            await self.send(exc.body())
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "cancel":
            await self.cancel()
        elif kind == "chat":
            await self.start(message.get("request"), message.get("upstream_api"))
        else:
            await self.send(error_body("message type must be 'chat' or 'cancel'", param="type", code="invalid_value"))

    async def start(self, body: Any, upstream_api: Any = None) -> None:
        if self.answer is not None and not self.answer.done():
            await self.send(error_body("an answer is already streaming; send cancel first", code="busy"))
            return
        self.answer = asyncio.create_task(self._answer(body, upstream_api), name="ws-answer")

    async def cancel(self) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.cancel()
            await asyncio.gather(self.answer, return_exceptions=True)

    async def _answer(self, body: Any, upstream_api: Any = None) -> None:
        try:
            error = await self._stream_or_error(body, upstream_api)
        except asyncio.CancelledError:
            if self.closing or self.ws.closed:
                raise
            # Cancelled by the client's "cancel": the answer ends like any other.
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            error = None
        with contextlib.suppress(ConnectionError):
            if error is not None:
                await self.send(error)
            if not self.ws.closed:
                await self.send(WsDone().model_dump(mode="json"))

    async def _stream_or_error(self, body: Any, upstream_api: Any = None) -> dict[str, Any] | None:
        """Stream the answer; return the OpenAI error object to send if it failed. Each answer
        is counted once in ``factcheck_http_requests_total{endpoint="ws"}`` by how it ended."""
        self.outcome = "internal"
        try:
            self.outcome = await self._stream(body, upstream_api)
        except RequestError as exc:
            REQUEST_ERRORS.labels(status=str(exc.status)).inc()
            self.outcome = "refused"
            return exc.body()
        except UpstreamError as exc:
            UPSTREAM_ERRORS.labels(kind=exc.kind).inc()
            self.outcome = "upstream_error"
            return exc.client_body()
        except ConnectionError:
            log.info("websocket client went away mid-answer")
            self.outcome = "client_gone"
        except asyncio.CancelledError:  # the socket closed, or the client sent "cancel"
            self.outcome = "client_gone"
            raise
        except Exception:
            log.exception("websocket answer failed")
            return error_body("internal error", "server_error", None, "internal_error")
        finally:
            HTTP_REQUESTS.labels(endpoint="ws", outcome=self.outcome).inc()
        return None

    async def _stream(self, body: Any, upstream_api: Any = None) -> str:
        """Run one answer exactly as ``POST /v1/chat/completions`` with ``stream: true`` does;
        return its outcome (``ok``, or how it broke off). ``upstream_api``: the API to speak to
        the upstream for this answer (the UI's choice; None: ``upstream.api``)."""
        service = self.request.app[SERVICE_KEY]
        started = time.perf_counter()
        await self.request.app[LIMITER_KEY].check(client_id(self.request))  # each answer counts like an HTTP request
        if not isinstance(body, dict):
            raise RequestError("'request' must be a chat completions body (a JSON object)", param="request")
        if upstream_api not in (None, *UPSTREAM_APIS):
            raise RequestError(f"upstream_api must be one of {', '.join(UPSTREAM_APIS)}", param="upstream_api",
                               code="invalid_value")
        upstream = service.upstream_speaking(upstream_api)
        chat, forward, mode = service.read_request(json.dumps({**body, "stream": True}).encode(),
                                                   self.request.headers.get("X-Factcheck-Mode"))
        async with service.open_stream(chat, forward, mode, upstream_headers(self.request), started,
                                       upstream) as opened:
            encoder = SSEEncoder(opened.chunks)
            await self.send(WsStart(mode=mode).model_dump(mode="json"))
            outcome = "ok"
            async for event in opened.checked.run():
                if isinstance(event, Failed):
                    outcome = failure_outcome(event.error)
                for message in messages_of(event, encoder):
                    await self.send(message)
        return outcome


def messages_of(event: StreamEvent[ChunkItem], encoder: SSEEncoder) -> list[dict[str, Any]]:
    """The JSON messages for one event: an upstream chunk as its JSON (off mode: its raw SSE
    bytes parsed; an event that is not a JSON object cannot be a message and is dropped);
    nothing for the end (the socket sends ``done``); the proxy's own events as over SSE, but
    block mode's stop as the socket's own ``blocked`` message."""
    if isinstance(event, End):
        return []
    if isinstance(event, BlockedEvent):
        return [encoder.factcheck(event)]
    if not isinstance(event, Forward):
        return [encoder.payload(event)]
    if event.item.chunk is not None:
        return [event.item.chunk]
    if event.item.raw is None:
        return []
    parser = SSEParser()
    messages = []
    for sse in parser.feed(event.item.raw) + parser.flush():
        if sse.data is None or sse.is_done:
            continue
        try:
            data = sse.json()
        except ValueError:
            continue
        if isinstance(data, dict):
            messages.append(data)
    return messages


def origin_allowed(request: web.Request, allowed: list[str]) -> bool:
    """A browser's websocket is allowed from a page on an allowed host (``server.allowed_hosts``,
    on the port the client connected to: the proxy's own origin) and from the configured
    origins ('*': any); a client that sends no Origin is not a browser page and is allowed.
    The request's own Host is no proof: a DNS-rebinding page sends its own name as both."""
    origin = request.headers.get("Origin")
    if origin is None or "*" in allowed:
        return True
    if origin.rstrip("/").lower() in {o.rstrip("/").lower() for o in allowed}:
        return True
    return request.app[ALLOWED_HOSTS_KEY].allows_origin(origin, request.headers.get("Host"))


async def chat_socket(request: web.Request) -> web.WebSocketResponse:
    settings = request.app[SERVICE_KEY].settings
    if not origin_allowed(request, settings.server.ws_allowed_origins):
        raise RequestError("websocket Origin not allowed (server.ws_allowed_origins)", status=403,
                           param="Origin", code="origin_not_allowed")
    ws = web.WebSocketResponse(heartbeat=30.0, max_msg_size=settings.server.max_body_bytes)
    await ws.prepare(request)
    socket = _Socket(request, ws)
    try:
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await socket.on_text(message.data)
            elif message.type is WSMsgType.BINARY:
                await socket.send(error_body("send JSON text messages", code="invalid_message"))
    finally:
        # The client went away (or the server is shutting down): stop the upstream and the checks.
        socket.closing = True
        await socket.cancel()
        log.debug("websocket closed; answer in progress cancelled")
    return ws
