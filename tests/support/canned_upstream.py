"""A test double: an upstream answering every POST with the same recorded bytes (a stream of
the Responses or the Messages API), so a test can compare what the proxy relays with them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiohttp import web

from middleware.translation.streams import ChatToMessages, ChatToResponses, encode


def recorded_stream(api: str, pieces: Iterable[str], tool_call: dict[str, Any] | None = None,
                    then: Iterable[str] = ()) -> bytes:
    """A stream of ``api`` whose text deltas are ``pieces`` (then a tool call, if given, and
    the text deltas ``then``)."""
    writer = ChatToResponses() if api == "responses" else ChatToMessages()
    events: list[dict[str, Any]] = []
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "recorded"}
    for piece in pieces:
        events += writer.feed({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    if tool_call is not None:
        events += writer.feed({**base, "choices": [{"index": 0, "delta": {"tool_calls": [tool_call]}}]})
    for piece in then:
        events += writer.feed({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    finish = "tool_calls" if tool_call is not None else "stop"
    events += writer.feed({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    events += writer.feed({**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7,
                                                              "total_tokens": 10}})
    events += writer.finish()
    return b"".join(encode(api, event) for event in events)


class CannedUpstream:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/{path:.*}", self.answer)
        return app

    async def answer(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for at in range(0, len(self.body), 97):  # in pieces, as a network would deliver them
            await response.write(self.body[at:at + 97])
        await response.write_eof()
        return response
