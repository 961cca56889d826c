"""Incremental Server-Sent Events parser that keeps each event's raw bytes.

The proxy forwards upstream events byte for byte in ``off`` and ``annotate`` modes, so the
parser hands back the exact bytes of every event next to its decoded ``data`` field.
Follows the WHATWG event-stream rules for line endings (CRLF, LF, CR), comments and
multi-line ``data``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
import re
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


class EventTooLarge(ValueError):
    """An event grew past the size limit before its end arrived."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"SSE event larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class SSEEvent:
    raw: bytes
    """The event's bytes as received, including its terminating blank line."""
    data: str | None
    """Joined ``data:`` lines, or None for an event without data (comment, keep-alive)."""
    event: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data is not None and self.data.strip() == DONE

    def json(self) -> Any:
        """The data decoded as JSON; raises ``ValueError`` if it is not JSON."""
        if self.data is None:
            raise ValueError("event has no data")
        return json.loads(self.data)


class SSEParser:
    """Feed bytes as they arrive; get back the events they complete."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._scan_from = 0
        self._max = max_event_bytes
        self._too_large = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events ``chunk`` completes. Raises ``EventTooLarge`` once an unfinished event
        is past the limit (after the events completed before it have been returned)."""
        if self._too_large:
            raise EventTooLarge(self._max)
        self._buf += chunk
        events: list[SSEEvent] = []
        while True:
            end = self._find_event_end()
            if end < 0:
                break
            if end > self._max:  # a whole event, but too large: refused like an unfinished one
                self._too_large = True
                break
            raw = bytes(self._buf[:end])
            del self._buf[:end]
            self._scan_from = 0
            events.append(_parse_event(raw))
        self._too_large = self._too_large or len(self._buf) > self._max
        if self._too_large and not events:
            raise EventTooLarge(self._max)
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: an unterminated trailing event is still returned (lenient)."""
        if not self._buf.strip():
            self._buf.clear()
            return []
        raw = bytes(self._buf)
        self._buf.clear()
        return [_parse_event(raw)]

    def _find_event_end(self) -> int:
        """Index just past the blank line that ends the first event, or -1."""
        start = max(self._scan_from - 4, 0)
        if b"\r" not in self._buf:  # the common case (LF only): a plain search, no regex
            at = self._buf.find(b"\n\n", start)
            self._scan_from = len(self._buf) if at < 0 else self._scan_from
            return -1 if at < 0 else at + 2
        match = _BLANK_LINE.search(self._buf, start)
        if match is None:
            self._scan_from = len(self._buf)
            return -1
        return match.end() if _is_final(match, len(self._buf)) else -1


def split_events(data: bytes) -> list[SSEEvent]:
    """The events of ``data``, a read cut after its last whole event (``EventCutter``), or
    the end of a stream (whose last event may be unterminated). Its size was checked when
    it was cut."""
    if b"\r" not in data:
        # The common case (LF only): each event ends at the first blank line after the one
        # before it, which is what ``bytes.split`` finds, without a parser's buffer. Annotate
        # mode splits every read it relays for checks.
        *whole, rest = data.split(b"\n\n")
        events = [_parse_event(raw + b"\n\n") for raw in whole]
        if rest.strip():
            events.append(_parse_event(rest))
        return events
    parser = SSEParser(max_event_bytes=len(data) + 1)
    return parser.feed(data) + parser.flush()


class EventCutter:
    """Off mode's byte pipe: bytes pass through as they arrive, each read in one piece,
    except that a trailing incomplete event is held back until its end arrives. The client
    then only ever holds whole events, so an error event after a failed read stays parseable.
    Nothing is decoded; an event growing past ``max_event_bytes`` raises ``EventTooLarge``
    (what is held is not sent: the stream can still end with a whole error event)."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._held = b""
        self._max = max_event_bytes
        self._too_large = False

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send now: everything up to the last complete event's end. An
        unfinished event past the limit raises, once the whole events before it (in the
        same read) have been returned: at the next call, or at ``flush``."""
        if self._too_large:
            raise EventTooLarge(self._max)
        data = self._held + chunk if self._held else chunk
        end = max(_last_event_end(data), 0)
        if end > self._max and _largest_event(data[:end]) > self._max:
            raise EventTooLarge(self._max)
        self._held = data[end:]
        if len(self._held) > self._max:
            self._too_large = True
            if not end:
                raise EventTooLarge(self._max)
        return data[:end]  # the whole chunk (the common case) is not copied

    def flush(self) -> bytes:
        """End of stream: what is held (an unterminated last event) goes out as it came."""
        if self._too_large:
            raise EventTooLarge(self._max)
        held, self._held = self._held, b""
        return held


def _largest_event(data: bytes) -> int:
    """Size of the largest event in ``data`` (whole events only). Only called when a read
    holds more than the size limit, so its scan costs nothing in the common case."""
    largest, start = 0, 0
    for match in _BLANK_LINE.finditer(data):
        largest = max(largest, match.end() - start)
        start = match.end()
    return largest


def _last_event_end(data: bytes) -> int:
    """Index just past the last blank line in ``data``, or -1."""
    if b"\r" not in data:
        at = data.rfind(b"\n\n")
        return -1 if at < 0 else at + 2
    end = -1
    for match in _BLANK_LINE.finditer(data):
        if not _is_final(match, len(data)):
            break
        end = match.end()
    return end


def _is_final(blank_line: re.Match[bytes], size: int) -> bool:
    """Whether a blank line certainly ends an event: not when it ends in a CR at the end of
    the data, since the LF that may follow belongs to that line ending."""
    return not (blank_line.end() == size and blank_line.group().endswith(b"\r"))


# Two consecutive line endings; atomic groups keep CRLF from counting as two endings.
_BLANK_LINE = re.compile(rb"(?>\r\n|\r|\n)(?>\r\n|\r|\n)")


def _split_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _parse_event(raw: bytes) -> SSEEvent:
    if raw.startswith(b"data: ") and raw.find(b"\n") == len(raw) - 2 and b"\r" not in raw:
        # The common event, one ``data: `` line and its blank line, read without splitting
        # (an upstream's every token is one): the same data as the general reading below.
        return SSEEvent(raw=raw, data=raw[6:-2].decode("utf-8", errors="replace"))
    text = raw.decode("utf-8", errors="replace")
    data_lines: list[str] = []
    event_name: str | None = None
    for line in _split_lines(text):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data_lines.append(value)
        elif field == "event":
            event_name = value
    data = "\n".join(data_lines) if data_lines else None
    return SSEEvent(raw=raw, data=data, event=event_name)


def encode_event(payload: Any) -> bytes:
    """One ``data:`` event carrying ``payload`` as compact JSON (or a literal string)."""
    data = payload if isinstance(payload, str) else dumps(payload)
    return f"data: {data}\n\n".encode()


def dumps(payload: Any) -> str:
    """Compact JSON that always encodes as UTF-8: non-ASCII as is, except when the payload
    holds a lone surrogate (taken from an upstream's ``"\\ud800"``), then everything escaped."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":"))
    return text


def json_payloads(events: Iterable[SSEEvent]) -> list[Any]:
    """The JSON payloads of ``events`` (a client's view): ``[DONE]``, comments and data that
    is not JSON are skipped."""
    out = []
    for event in events:
        if event.data is None or event.is_done:
            continue
        try:
            out.append(event.json())
        except ValueError:
            continue
    return out


def delta_content(events: Iterable[SSEEvent]) -> str:
    """The text a chat client shows: every chunk's ``choices[].delta.content``, in order."""
    return "".join(
        (choice.get("delta") or {}).get("content") or ""
        for chunk in json_payloads(events)
        if isinstance(chunk, dict)
        for choice in chunk.get("choices") or []
    )
