"""The Responses API's stream as an ``AnswerSource``, and the proxy's own events in it.

The answer's text is every ``response.output_text.delta``; an output text's ``done`` events
close what is held (correct mode); ``response.completed`` (or ``incomplete``, ``failed``) is the
terminal event, so the summary goes out before it. Correct mode's events that repeat the whole
text (``output_text.done``, ``content_part.done``, ``output_item.done``, ``response.completed``)
carry the text as released (``ReleasedText``). Where the proxy's own events go (the output
text, the sequence number) is read from the upstream events as they leave, in order with them
(``leaving``): in correct mode the reader is ahead of what is sent. Block mode ends a stopped
answer as the API ends one cut short: the output text and items left open are closed with the
text released, then ``response.incomplete`` with ``incomplete_details.reason: "content_filter"``."""

from __future__ import annotations

import copy
import time
from typing import Any

from middleware.errors import ErrorBody
from middleware.chat.typed_events import EventItem, TypedEvents
from middleware.responses.protocol import ResponseErrorEvent, ResponseTextDelta
from middleware.translation.streams import WITHHELD

TEXT_DELTA = "response.output_text.delta"
_CLOSES_TEXT = frozenset({"response.output_text.done", "response.content_part.done", "response.output_item.done"})


class ResponseEvents(TypedEvents):
    END_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sequence = 0
        """The ``sequence_number`` of the last upstream event sent: the proxy's own repeat it."""
        self.at: dict[str, Any] = {"item_id": "msg_factcheck", "output_index": 0, "content_index": 0}
        """The output text last opened (or written to) in what was sent: correct mode's text goes there."""
        self.released = ReleasedText()
        self.response: dict[str, Any] = {"id": "resp_factcheck", "object": "response", "created_at": int(time.time()),
                                         "model": "unknown", "output": []}
        """The response as the lifecycle events sent so far describe it (block mode ends it)."""
        self.outputs: dict[int, dict[str, Any]] = {}
        """The output items sent (as added, or as done), by output index."""
        self.open_items: set[int] = set()
        self.open_texts: set[tuple[int, int]] = set()
        """Output texts (output index, content index) opened in what was sent and not closed."""

    def text(self, item: EventItem) -> str:
        if item.type != TEXT_DELTA or item.data is None or not isinstance(delta := item.data.get("delta"), str):
            return ""
        return delta

    def leaving(self, item: EventItem) -> EventItem:
        """Noted as it leaves, in order with the proxy's own events (the reader may be ahead)."""
        data = item.data
        if data is None:
            return item
        if isinstance(number := data.get("sequence_number"), int):
            self.sequence = number
        opens_text = item.type == "response.content_part.added" and (data.get("part") or {}).get("type") == "output_text"
        if opens_text or item.type == TEXT_DELTA:
            self.at = {key: data.get(key, self.at[key]) for key in self.at}
        self._note_open(item, data)
        return self.released.rewrite(item)

    def _note_open(self, item: EventItem, data: dict[str, Any]) -> None:
        """What the sent events opened and closed: the response, its output items and texts."""
        kind, index = item.type, data.get("output_index")
        if isinstance(data.get("response"), dict):
            self.response = data["response"]
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(index, int):
            self.outputs[index] = data.get("item") or {}
            (self.open_items.add if kind.endswith("added") else self.open_items.discard)(index)
        elif kind in ("response.content_part.added", "response.content_part.done") and isinstance(index, int):
            text = (index, data.get("content_index", 0))
            if kind.endswith("done"):
                self.open_texts.discard(text)
            elif (data.get("part") or {}).get("type") == "output_text":
                self.open_texts.add(text)

    def ends_message(self, item: EventItem) -> bool:
        return item.type in _CLOSES_TEXT

    # ------------------------------------------------------------ the proxy's own events
    def text_event(self, text: str) -> dict[str, Any]:
        self.released.add(self.at, text)
        return ResponseTextDelta(sequence_number=self.sequence, delta=text, **self.at).model_dump(mode="json")

    def factcheck_event(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        """``ResponseFactcheck``; ``factcheck`` is already wire-rendered (each passage's text once)."""
        return {"type": "response.factcheck", "sequence_number": self.sequence, "factcheck": factcheck}

    def blocked_events(self, factcheck: dict[str, Any]) -> list[dict[str, Any]]:
        events = [self.factcheck_event(factcheck)]
        for index, content in sorted(self.open_texts):
            text = self.released.text(index, content)
            at = {"item_id": self.outputs.get(index, {}).get("id", self.at["item_id"]), "output_index": index,
                  "content_index": content}
            events.append({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **at, "part": _output_text(text)})
        for index in sorted(self.open_items):
            item = {**self.outputs[index], "status": "incomplete"}
            if item.get("type") == "message":
                item["content"] = [_output_text(self.released.text(index, content))
                                   for content in range(len(item.get("content") or []) or 1)]
            self.outputs[index] = item
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        self.open_texts.clear()
        self.open_items.clear()
        response = {**self.response, "status": "incomplete", "incomplete_details": {"reason": WITHHELD},
                    "output": [self.outputs[index] for index in sorted(self.outputs)]}
        events.append({"type": "response.incomplete", "response": response})
        for event in events[1:]:  # the API's own events: each numbered after the last one sent
            self.sequence += 1
            event["sequence_number"] = self.sequence
        return events

    def error_event(self, body: dict[str, Any]) -> dict[str, Any]:
        error = ErrorBody.model_validate(body).error
        return ResponseErrorEvent(sequence_number=self.sequence, code=error.code, message=error.message,
                                  param=error.param).model_dump(mode="json")


class ReleasedText:
    """Correct mode: the text released per output text (``output_index``, ``content_index``),
    and the events repeating a whole text, rewritten to carry it."""

    def __init__(self) -> None:
        self._texts: dict[tuple[int, int], str] = {}

    def text(self, output_index: int, content_index: int) -> str:
        """The text released to an output text so far."""
        return self._texts.get((output_index, content_index), "")

    def add(self, at: dict[str, Any], text: str) -> None:
        key = (at["output_index"], at["content_index"])
        self._texts[key] = self._texts.get(key, "") + text

    def rewrite(self, item: EventItem) -> EventItem:
        """``item`` with the released text where it repeats a whole text; as it came otherwise."""
        if item.data is None or not self._texts or item.type not in _CLOSES_TEXT | ResponseEvents.END_TYPES:
            return item
        data = copy.deepcopy(item.data)
        kind, index = data["type"], data.get("output_index", 0)
        if kind == "response.output_text.done":
            data["text"] = self._texts.get((index, data.get("content_index", 0)), data.get("text"))
        elif kind == "response.content_part.done":
            self._part(data.get("part"), index, data.get("content_index", 0))
        elif kind == "response.output_item.done":
            self._item(data.get("item"), index)
        else:
            for position, output in enumerate((data.get("response") or {}).get("output") or []):
                self._item(output, position)
        return EventItem(data=data)

    def _item(self, item: Any, index: int) -> None:
        if isinstance(item, dict) and item.get("type") == "message":
            for position, part in enumerate(item.get("content") or []):
                self._part(part, index, position)

    def _part(self, part: Any, index: int, position: int) -> None:
        if isinstance(part, dict) and part.get("type") == "output_text" and (index, position) in self._texts:
            part["text"] = self._texts[(index, position)]


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}
