"""``POST /v1/chat/completions`` over HTTP: read the request, hand it to the ``ChatService``,
write its answer as JSON or as server-sent events. HTTP only: the logic is in ``serving``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from middleware.chat.checked_stream import CheckedStream, End, Failed, Forward, Rendered, StreamEvent, Text
from middleware.chat.chunks import DONE_EVENT, ChunkItem, UpstreamChunks
from middleware.chat.protocol import BlockedEvent, SentenceEvent, SummaryEvent
from middleware.errors import error_body
from middleware.chat.serving import ChatService
from middleware.chat.wire import WireReports
from middleware.errors import UpstreamError
from middleware.metrics import UPSTREAM_ERRORS
from middleware.redaction import redact
from middleware.sse import dumps, encode_event

log = logging.getLogger(__name__)
T = TypeVar("T")

CHAT_PATH = "/v1/chat/completions"
SERVICE_KEY = web.AppKey("chat_service", ChatService)
OUTCOME_KEY = web.RequestKey("factcheck_outcome", str)
"""How a request ended when its status does not say (a stream that broke off after its 200)."""


def add_chat_routes(app: web.Application, service: ChatService) -> None:
    app[SERVICE_KEY] = service
    app.router.add_post(CHAT_PATH, chat_completions)


def upstream_headers(request: web.Request) -> dict[str, str]:
    """Client headers for the upstream. With proxy keys configured the client's
    Authorization (or an Anthropic client's x-api-key) is the proxy key, which must never travel on."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    if request.app[SERVICE_KEY].settings.server.api_keys:
        headers.pop("authorization", None)
        headers.pop("x-api-key", None)
    return headers


async def chat_completions(request: web.Request) -> web.StreamResponse:
    service = request.app[SERVICE_KEY]
    started = time.perf_counter()
    chat, forward, mode = service.read_request(await request.read(), request.headers.get("X-Factcheck-Mode"))
    headers = upstream_headers(request)
    if not chat.stream:
        body = await service.complete(chat, forward, mode, headers)
        if isinstance(body, bytes):
            return web.Response(body=body, content_type="application/json")
        return web.json_response(body, dumps=dumps)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Factcheck-Mode": mode.value}
    )
    async with service.open_stream(chat, forward, mode, headers, started) as opened:
        await relay(request, response, opened.checked, SSEEncoder(opened.chunks).encode)
    return response


async def relay(
    request: web.Request,
    response: web.StreamResponse,
    checked: CheckedStream[T],
    encode: Callable[[StreamEvent[T]], bytes],
) -> None:
    """Send a checked stream's events as ``encode`` writes them, for every face, each batch
    (``CheckedStream.batches``, its reports rendered by ``encode`` as low-priority work) in
    one write; a failure event sets the request's outcome. A client that closes the
    connection is counted as ``client_gone``, never an error: a failed write returns quietly
    (re-raised, aiohttp would log a traceback), a cancellation goes on up."""
    try:
        await response.prepare(request)
        async with contextlib.aclosing(checked.batches(render=encode)) as batches:  # a client gone: it stops now
            async for batch in batches:
                for event in batch:
                    if isinstance(event, Failed):
                        request[OUTCOME_KEY] = failure_outcome(event.error)
                if data := b"".join([event.data if isinstance(event, Rendered) else encode(event) for event in batch]):
                    await response.write(data)
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError) as exc:
        log.info("client went away; upstream request and checks cancelled")
        request[OUTCOME_KEY] = "client_gone"
        if isinstance(exc, asyncio.CancelledError):
            raise


class SSEEncoder:
    """The checked stream's events as the bytes of one SSE response: upstream events byte for
    byte, the proxy's chunks as ``data:`` events, errors as OpenAI error events, ``[DONE]``
    last (the upstream's own when it sent one)."""

    def __init__(self, source: UpstreamChunks) -> None:
        self._source = source
        self._wire = WireReports()

    def encode(self, event: StreamEvent[ChunkItem]) -> bytes:
        if isinstance(event, Forward):
            return event.item.sse()
        if isinstance(event, End):
            return event.item.sse() if event.item is not None else DONE_EVENT
        return encode_event(self.payload(event))

    def payload(self, event: Text | SentenceEvent | SummaryEvent | BlockedEvent | Failed) -> dict[str, Any]:
        """A proxy-made event's JSON: a content chunk, an extension chunk (block mode's last
        one finishes the choice) or an error body."""
        if isinstance(event, Text):
            return self._source.content_chunk(event.text)
        if isinstance(event, Failed):
            return failure_body(event.error)
        if isinstance(event, BlockedEvent):
            return self._source.blocked_chunk(self.factcheck(event))
        return self._source.factcheck_chunk(self.factcheck(event))

    def factcheck(self, event: SentenceEvent | SummaryEvent | BlockedEvent) -> dict[str, Any]:
        """A ``factcheck`` event as this response renders it (each passage's text once)."""
        return self._wire.event(event)


def failure_outcome(error: BaseException) -> str:
    """The ``outcome`` label of a request whose answer broke off with ``error``."""
    return "upstream_error" if isinstance(error, UpstreamError) else "internal"


def failure_body(error: BaseException) -> dict[str, Any]:
    """The error body for a stream that broke off: the upstream's failure, or ours."""
    if isinstance(error, UpstreamError):
        UPSTREAM_ERRORS.labels(kind=error.kind).inc()
        return error_body(redact(str(error)), "upstream_error", None, error.kind)
    log.error("stream failed", exc_info=error)
    return error_body("the proxy failed while relaying the answer", "server_error", None, "internal_error")
