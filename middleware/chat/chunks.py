"""The OpenAI ``chat.completion.chunk`` as the proxy reads it from the upstream and writes its own.

``UpstreamChunks`` is the ``AnswerSource`` of an upstream SSE stream: its items are
``ChunkItem``s, an upstream event kept byte for byte (``raw``) with its JSON when it has one
(``chunk``), or a chunk the proxy made (correct mode's chunk without its text). The first
upstream chunk gives the template (id, created, model, ...) of the chunks the proxy writes.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from middleware.chat.protocol import ChatChunk, ChunkChoice
from middleware.chat.typed_events import event_json, whole_events
from middleware.interfaces import UpstreamStream
from middleware.sse import DEFAULT_MAX_EVENT_BYTES, DONE, SSEEvent, encode_event, split_events
from middleware.translation.streams import WITHHELD

DONE_EVENT = b"data: [DONE]\n\n"
_DONE = DONE.encode()
_TEMPLATE_KEYS = ("id", "created", "model", "system_fingerprint")


@dataclass(frozen=True, slots=True)
class ChunkItem:
    """An upstream event (``raw`` bytes, with its JSON object as ``chunk`` when it is one), or
    a chunk the proxy made (``raw`` None)."""

    raw: bytes | None = None
    chunk: dict[str, Any] | None = None
    done: bool = False

    def sse(self) -> bytes:
        return self.raw if self.raw is not None else encode_event(self.chunk)


class UpstreamChunks:
    """An upstream SSE stream read as ``ChunkItem``s (see ``AnswerSource``)."""

    def __init__(self, upstream: UpstreamStream, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._upstream = upstream
        self._max_event_bytes = max_event_bytes
        self.template: dict[str, Any] = {}
        self._extension: dict[str, Any] | None = None

    async def items(self) -> AsyncIterator[ChunkItem]:
        async for event in self._upstream.events():
            yield ChunkItem(raw=event.raw, chunk=self._parse(event), done=event.is_done)

    async def passthrough(self) -> AsyncIterator[ChunkItem]:
        """Whole events, each upstream read in one item, untouched (``typed_events.whole_events``)."""
        async for raw in whole_events(self._upstream, self._max_event_bytes):
            yield ChunkItem(raw=raw)

    def split(self, item: ChunkItem) -> list[ChunkItem]:
        if item.raw is None:
            return [item]
        return [ChunkItem(raw=event.raw, chunk=self._parse(event), done=event.is_done) for event in split_events(item.raw)]

    def may_end(self, item: ChunkItem) -> bool:
        return item.raw is None or _DONE in item.raw

    def text(self, item: ChunkItem) -> str:
        return content0(item.chunk)

    def ends_message(self, item: ChunkItem) -> bool:
        choice = choice0(item.chunk) if item.chunk is not None else None
        return bool(choice and choice.get("finish_reason"))

    def is_end(self, item: ChunkItem) -> bool:
        return item.done

    def without_text(self, item: ChunkItem) -> ChunkItem | None:
        stripped = without_content0(item.chunk) if item.chunk is not None else None
        return ChunkItem(chunk=stripped) if stripped is not None else None

    def close(self) -> None:
        self._upstream.close()

    # ------------------------------------------------------------ the proxy's own chunks
    def content_chunk(self, text: str) -> dict[str, Any]:
        """Correct mode: a sentence's text as an ordinary content chunk."""
        return self._chunk(ChunkChoice(delta={"content": text}))

    def factcheck_chunk(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        """An extension chunk: empty delta, the ``factcheck`` event (already wire-rendered).
        Its envelope is made once per stream, once the upstream's first chunk gave its template
        (every sentence's report is one of these: the relay writes hundreds a second under load)."""
        if self._extension is not None:
            return {**self._extension, "factcheck": factcheck}
        data = self._chunk(ChunkChoice())
        if "created" in self.template:  # else each chunk is stamped with the time it is made
            self._extension = data
        return {**data, "factcheck": factcheck}

    def blocked_chunk(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        """Block mode's last chunk: choice 0 finished with ``content_filter`` (the OpenAI
        API's reason for withheld content), the ``blocked`` event (already wire-rendered)."""
        return {**self._chunk(ChunkChoice(finish_reason=WITHHELD)), "factcheck": factcheck}

    def _chunk(self, choice: ChunkChoice) -> dict[str, Any]:
        base = {key: self.template[key] for key in _TEMPLATE_KEYS if key in self.template}
        base.setdefault("id", "chatcmpl-factcheck")
        base.setdefault("created", int(time.time()))
        base.setdefault("model", "unknown")
        return ChatChunk(**base, choices=[choice]).model_dump(mode="json")

    def _parse(self, event: SSEEvent) -> dict[str, Any] | None:
        """The event's JSON object, or None (no data, [DONE], or not JSON: passed through)."""
        chunk = event_json(event)
        if not isinstance(chunk, dict):
            return None
        if not self.template:
            self.template = {key: chunk[key] for key in _TEMPLATE_KEYS if key in chunk}
        return chunk


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """``text`` with lone surrogates (JSON ``"\\ud800"`` from the upstream) as U+FFFD: the
    checker and the client get text that encodes."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def choice0(chunk: dict[str, Any]) -> dict[str, Any] | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def content0(chunk: dict[str, Any] | None) -> str:
    """Choice 0's delta content (cleaned), or ""."""
    choice = choice0(chunk) if chunk is not None else None
    delta = choice.get("delta") if choice else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return _clean(content) if isinstance(content, str) else ""


def without_content0(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """The chunk minus choice 0's content, or None if nothing else is in it."""
    stripped = copy.deepcopy(chunk)
    choice = choice0(stripped)
    assert choice is not None
    del choice["delta"]["content"]
    keep = bool(choice["delta"]) or choice.get("finish_reason") is not None
    keep = keep or len(stripped["choices"]) > 1 or stripped.get("usage") is not None
    return stripped if keep else None


def message_content(completion: dict[str, Any]) -> str | None:
    """Choice 0's text in a non-stream ``chat.completion``, or None when it has none."""
    try:
        content = completion["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None
