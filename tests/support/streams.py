"""A client that measures a proxied chat stream: what tests of response size share."""

from __future__ import annotations

import aiohttp

from middleware.sse import SSEEvent, SSEParser


async def sized_stream(url: str, raw: bytes) -> tuple[int, list[SSEEvent]]:
    """The bytes of the response body to ``raw`` posted to ``{url}/chat/completions``, and its SSE events."""
    parser, size, events = SSEParser(), 0, []
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/chat/completions", data=raw, headers={"Content-Type": "application/json"}) as r:
            async for chunk in r.content.iter_any():
                size += len(chunk)
                events += parser.feed(chunk)
    return size, events
