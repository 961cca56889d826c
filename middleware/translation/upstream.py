"""An upstream of one API seen as an upstream of another: the face's request body goes out in
the upstream's API, and its answer (streamed or not) comes back in the face's. With the same
API on both sides ``upstream_for`` hands back the upstream itself: its bytes pass untouched."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from middleware.interfaces import Upstream, UpstreamStream
from middleware.sse import SSEEvent
from middleware.translation.completions import translate_answer
from middleware.translation.requests import translate_request
from middleware.translation.streams import (
    DONE,
    ChatEvent,
    ChatToMessages,
    ChatToResponses,
    MessagesToChat,
    Reader,
    ResponsesToChat,
    Writer,
    encode,
)


class _ChatReader:
    """Chat chunks as they are (an upstream speaking chat completions)."""

    def feed(self, data: dict[str, Any]) -> list[ChatEvent]:
        return [data]


class _ChatWriter:
    """Chat chunks as they are, ``[DONE]`` last (a face speaking chat completions)."""

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        return [chunk]

    def finish(self) -> list[dict[str, Any]]:
        return []


def _reader(api: str) -> Reader:
    readers: dict[str, type[Reader]] = {"responses": ResponsesToChat, "messages": MessagesToChat}
    return readers.get(api, _ChatReader)()


def _writer(api: str) -> Writer:
    writers: dict[str, type[Writer]] = {"responses": ChatToResponses, "messages": ChatToMessages}
    return writers.get(api, _ChatWriter)()


class TranslatedStream:
    """An upstream stream of API ``source`` read as events of API ``target``."""

    def __init__(self, stream: UpstreamStream, source: str, target: str) -> None:
        self._stream = stream
        self._source = source
        self._target = target

    async def events(self) -> AsyncIterator[SSEEvent]:
        reader, writer = _reader(self._source), _writer(self._target)
        async for event in self._stream.events():
            if event.is_done:
                break
            try:
                data = event.json() if event.data is not None else None
            except ValueError:
                continue  # not JSON: nothing the other API could carry
            if not isinstance(data, dict):
                continue
            for chat in reader.feed(data):
                if chat == DONE:
                    continue
                for out in writer.feed(chat) if isinstance(chat, dict) else []:
                    yield self._event(out)
        for out in writer.finish():
            yield self._event(out)
        if self._target == "chat":
            yield self._event(DONE)

    async def chunks(self) -> AsyncIterator[bytes]:
        async for event in self.events():
            yield event.raw

    def close(self) -> None:
        self._stream.close()

    def _event(self, event: ChatEvent) -> SSEEvent:
        data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        name = None if isinstance(event, str) or self._target == "chat" else str(event["type"])
        return SSEEvent(raw=encode(self._target, event), data=data, event=name)


class TranslatedUpstream:
    """``upstream`` (speaking ``source``) for a face speaking ``target``."""

    def __init__(self, upstream: Upstream, source: str, target: str) -> None:
        self.upstream = upstream
        self.source = source
        self.target = target

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream:
        stream = await self.upstream.open_stream(translate_request(body, self.target, self.source), client_headers)
        return TranslatedStream(stream, self.source, self.target)

    async def complete(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> tuple[bytes, dict[str, Any]]:
        _, answer = await self.upstream.complete(translate_request(body, self.target, self.source), client_headers)
        translated = translate_answer(answer, self.source, self.target)
        return json.dumps(translated).encode(), translated

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        return await self.upstream.get(path, client_headers)

    async def close(self) -> None:
        await self.upstream.close()


def upstream_for(upstream: Upstream, source: str, target: str) -> Upstream:
    """``upstream`` (speaking ``source``) as the face speaking ``target`` needs it."""
    return upstream if source == target else TranslatedUpstream(upstream, source, target)
