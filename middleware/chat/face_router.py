"""The HTTP side of a front door speaking typed events (the Responses and Messages APIs):
read the request, hand it to its ``ApiFaceService``, write the answer as JSON or as SSE.

``TypedEncoder`` writes the checked stream's events: upstream events byte for byte (correct
mode: rewritten where they repeat the whole text), the proxy's own in the API's style
(correct mode's text deltas, the ``factcheck`` extension events, the error event, block
mode's end)."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from middleware.chat.api_router import failure_body, relay, upstream_headers
from middleware.chat.checked_stream import End, Failed, Forward, StreamEvent, Text
from middleware.chat.face_service import ApiFaceService
from middleware.chat.protocol import BlockedEvent
from middleware.chat.typed_events import EventItem, TypedEvents, encode_typed
from middleware.chat.wire import WireReports
from middleware.sse import dumps



async def serve_face(request: web.Request, service: ApiFaceService[Any]) -> web.StreamResponse:
    started = time.perf_counter()
    face = service.read_request(await request.read(), request.headers.get("X-Factcheck-Mode"))
    headers = upstream_headers(request)
    if not face.stream:
        body = await service.complete(face, headers)
        if isinstance(body, bytes):
            return web.Response(body=body, content_type="application/json")
        return web.json_response(body, dumps=dumps)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Factcheck-Mode": face.mode.value}
    )
    async with service.open_stream(face, headers, started) as (checked, source):
        await relay(request, response, checked, TypedEncoder(source).encode)
    return response


class TypedEncoder:
    """The checked stream's events as the bytes of one typed-event SSE response."""

    def __init__(self, source: TypedEvents) -> None:
        self._source = source
        self._wire = WireReports()

    def encode(self, event: StreamEvent[EventItem]) -> bytes:
        source = self._source
        if isinstance(event, Forward):
            return source.leaving(event.item).sse()
        if isinstance(event, End):
            return source.leaving(event.item).sse() if event.item is not None else b""
        if isinstance(event, Text):
            return encode_typed(source.text_event(event.text))
        if isinstance(event, Failed):
            return encode_typed(source.error_event(failure_body(event.error)))
        if isinstance(event, BlockedEvent):
            return b"".join(encode_typed(data) for data in source.blocked_events(self._wire.event(event)))
        return encode_typed(source.factcheck_event(self._wire.event(event)))
