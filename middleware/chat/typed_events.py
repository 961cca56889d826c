"""Streams of typed events (``event: <type>`` + ``data: {"type": ...}``), as the OpenAI
Responses API and the Anthropic Messages API send them, read as an ``AnswerSource``.

``TypedEvents`` keeps each upstream event byte for byte (``EventItem.raw``) with its JSON;
each API's subclass (``middleware.responses.events``, ``middleware.messages.events``) says
which events carry the answer's text, which close it, and writes the proxy's own events.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from middleware.errors import UpstreamError
from middleware.interfaces import UpstreamStream
from middleware.metrics import UPSTREAM_ERRORS
from middleware.sse import DEFAULT_MAX_EVENT_BYTES, EventCutter, EventTooLarge, SSEEvent, dumps, split_events

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EventItem:
    """An upstream event (``raw`` bytes and its JSON object ``data``), or one the proxy made
    (``raw`` None)."""

    raw: bytes | None = None
    data: dict[str, Any] | None = None

    @property
    def type(self) -> str | None:
        kind = self.data.get("type") if self.data is not None else None
        return kind if isinstance(kind, str) else None

    def sse(self) -> bytes:
        return self.raw if self.raw is not None else encode_typed(self.data or {})


def encode_typed(data: dict[str, Any]) -> bytes:
    """One typed event: its ``type`` as the event name, the object as compact JSON."""
    return f"event: {data['type']}\ndata: {dumps(data)}\n\n".encode()


class TypedEvents(ABC):
    """An upstream stream of typed events (see ``AnswerSource``); ``END_TYPES`` end the answer."""

    END_TYPES: frozenset[str] = frozenset()

    def __init__(self, upstream: UpstreamStream, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._upstream = upstream
        self._max_event_bytes = max_event_bytes
        self._end_names = [name.encode() for name in self.END_TYPES]

    async def items(self) -> AsyncIterator[EventItem]:
        async for event in self._upstream.events():
            yield EventItem(raw=event.raw, data=_parse(event))

    async def passthrough(self) -> AsyncIterator[EventItem]:
        """Whole events, each upstream read in one item, untouched (off mode)."""
        async for raw in whole_events(self._upstream, self._max_event_bytes):
            yield EventItem(raw=raw)

    def split(self, item: EventItem) -> list[EventItem]:
        """The events of a read that went out whole, those before the end noted as they
        left (``leaving``): the end goes out after the proxy's last events."""
        if item.raw is None:
            return [item]
        events = [EventItem(raw=event.raw, data=_parse(event)) for event in split_events(item.raw)]
        for event in events:
            if self.is_end(event):
                break
            self.leaving(event)
        return events

    def may_end(self, item: EventItem) -> bool:
        return item.raw is None or any(end in item.raw for end in self._end_names)

    def is_end(self, item: EventItem) -> bool:
        return item.type in self.END_TYPES

    @abstractmethod
    def text(self, item: EventItem) -> str:
        """The answer text the event adds (its text delta), or ""."""

    @abstractmethod
    def ends_message(self, item: EventItem) -> bool:
        """The event closes a text: what is held is checked now (correct mode)."""

    def without_text(self, item: EventItem) -> EventItem | None:
        return None  # a text delta holds nothing else

    def leaving(self, item: EventItem) -> EventItem:
        """An upstream event as it leaves: noted (where the proxy's own events go) and, in
        correct mode, rewritten where it repeats the whole text."""
        return item

    # ------------------------------------------------------------ the proxy's own events
    @abstractmethod
    def text_event(self, text: str) -> dict[str, Any]:
        """Correct mode: a sentence's text as the API's text delta."""

    @abstractmethod
    def factcheck_event(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        """The extension event carrying a (wire-rendered) ``factcheck`` event."""

    @abstractmethod
    def error_event(self, body: dict[str, Any]) -> dict[str, Any]:
        """The API's error event for an OpenAI error ``body``."""

    @abstractmethod
    def blocked_events(self, factcheck: dict[str, Any]) -> list[dict[str, Any]]:
        """Block mode: the events that end the answer where it was stopped: the extension event
        carrying the (wire-rendered) ``blocked`` event, what is open in what was sent closed
        with the text released, and the API's own end for withheld content."""

    def close(self) -> None:
        self._upstream.close()


async def whole_events(upstream: UpstreamStream, max_event_bytes: int) -> AsyncIterator[bytes]:
    """Off mode's byte pipe: the upstream's bytes as they arrive, each read in one piece, only
    cut after its last whole event, so that an error event can follow whole events."""
    cutter = EventCutter(max_event_bytes)
    try:
        async for data in upstream.chunks():
            if whole := cutter.feed(data):
                yield whole
        if rest := cutter.flush():
            yield rest
    except EventTooLarge as exc:
        raise UpstreamError(f"upstream sent an event larger than {exc.limit} bytes", kind="event_too_large") from exc


def _parse(event: SSEEvent) -> dict[str, Any] | None:
    """The event's JSON object, or None (no data, or not JSON: passed through)."""
    data = event_json(event)
    return data if isinstance(data, dict) else None


def event_json(event: SSEEvent) -> Any:
    """An upstream event's JSON, or None (no data, ``[DONE]``, or not JSON: counted and logged,
    the event is passed through as it came)."""
    if event.data is None or event.is_done:
        return None
    try:
        return event.json()
    except ValueError:
        UPSTREAM_ERRORS.labels(kind="invalid_sse").inc()
        log.warning("upstream sent an event that is not JSON; passing it through")
        return None
