"""The Messages API's stream as an ``AnswerSource``, and the proxy's own events in it.

The answer's text is every ``content_block_delta`` holding a ``text_delta``; a block's
``content_block_stop`` (and ``message_delta``) closes what is held (correct mode), whose text
then goes out as ``text_delta``s of the block it came in; ``message_stop`` is the terminal
event, so the summary goes out before it. Tool use, thinking and other blocks pass as they
came. The block correct mode's text goes to is read from the events as they leave (``leaving``),
in order with it: the reader may be a block ahead. Block mode ends a stopped answer with the
blocks left open closed, then ``message_delta`` with ``stop_reason: "refusal"`` (the API's
reason for withheld content) and ``message_stop``."""

from __future__ import annotations

from typing import Any

from middleware.chat.typed_events import EventItem, TypedEvents
from middleware.messages.protocol import MessagesTextDelta, TextDelta, anthropic_error_body
from middleware.translation.streams import WITHHELD, to_anthropic_stop

_CLOSES_TEXT = frozenset({"content_block_stop", "message_delta"})


class MessageEvents(TypedEvents):
    END_TYPES = frozenset({"message_stop"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = 0
        """The text block last opened (or written to) in what was sent: correct mode's text goes there."""
        self.open_blocks: set[int] = set()
        """Content blocks started in what was sent and not stopped."""
        self.output_tokens = 0
        """The output tokens ``message_start`` reported (block mode's ``message_delta`` repeats them)."""

    def text(self, item: EventItem) -> str:
        delta = item.data.get("delta") if item.data is not None and item.type == "content_block_delta" else None
        if not isinstance(delta, dict) or delta.get("type") != "text_delta" or not isinstance(delta.get("text"), str):
            return ""
        return str(delta["text"])

    def leaving(self, item: EventItem) -> EventItem:
        """Noted as it leaves, in order with the proxy's own events (the reader may be ahead)."""
        data = item.data or {}
        opens_text = item.type == "content_block_start" and (data.get("content_block") or {}).get("type") == "text"
        if (opens_text or self.text(item)) and isinstance(index := data.get("index"), int):
            self.index = index
        if item.type in ("content_block_start", "content_block_stop") and isinstance(index := data.get("index"), int):
            (self.open_blocks.add if item.type == "content_block_start" else self.open_blocks.discard)(index)
        elif item.type == "message_start":
            tokens = ((data.get("message") or {}).get("usage") or {}).get("output_tokens")
            self.output_tokens = tokens if isinstance(tokens, int) else 0
        return item

    def ends_message(self, item: EventItem) -> bool:
        return item.type in _CLOSES_TEXT

    # ------------------------------------------------------------ the proxy's own events
    def text_event(self, text: str) -> dict[str, Any]:
        return MessagesTextDelta(index=self.index, delta=TextDelta(text=text)).model_dump(mode="json")

    def factcheck_event(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        """``MessagesFactcheck``; ``factcheck`` is already wire-rendered (each passage's text once)."""
        return {"type": "factcheck", "factcheck": factcheck}

    def blocked_events(self, factcheck: dict[str, Any]) -> list[dict[str, Any]]:
        stops = [{"type": "content_block_stop", "index": index} for index in sorted(self.open_blocks)]
        self.open_blocks.clear()
        return [self.factcheck_event(factcheck), *stops,
                {"type": "message_delta", "delta": {"stop_reason": to_anthropic_stop(WITHHELD), "stop_sequence": None},
                 "usage": {"output_tokens": self.output_tokens}},
                {"type": "message_stop"}]

    def error_event(self, body: dict[str, Any]) -> dict[str, Any]:
        return anthropic_error_body(body, 502)
