"""Reports as they leave the proxy, and as a client puts them back together.

A passage's ``text`` goes out the first time the passage is used in a response; later uses
carry every field but ``text``: the client takes the text of the passage with the same
``provider`` and ``id`` it received earlier (a passage whose text changed is sent again).
Without this a large context made a response tens of times its request, every sentence
repeating the same passages. Sources that are files of the server's index go out by name only."""

from __future__ import annotations

import re
from typing import Any

from middleware.chat.protocol import BlockedEvent, SentenceEvent, SummaryEvent
from middleware.types import SentenceReport, StreamSummary


class WireReports:
    """Reports and the summary as the client gets them, for one response (stream or not).
    Serialise in the order the client receives."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], str] = {}

    def event(self, event: SentenceEvent | SummaryEvent | BlockedEvent) -> dict[str, Any]:
        """A ``factcheck`` event as JSON-ready data."""
        if isinstance(event, SentenceEvent):
            return {"type": event.type, "report": self.report(event.report)}
        if isinstance(event, BlockedEvent):
            return {"type": event.type, "reason": event.reason, "report": self.report(event.report),
                    "summary": self.summary(event.summary)}
        return {"type": event.type, "summary": self.summary(event.summary)}

    def report(self, report: SentenceReport) -> dict[str, Any]:
        data = report.model_dump(mode="json")
        self._passages(data["evidence"])
        return data

    def summary(self, summary: StreamSummary) -> dict[str, Any]:
        data = summary.model_dump(mode="json")
        self._passages(data["attribution_report"])
        return data

    def _passages(self, passages: list[dict[str, Any]]) -> None:
        for passage in passages:
            passage["source"] = public_source(passage["source"])
            key = (passage["provider"], passage["id"])
            if self._sent.get(key) == passage["text"]:
                del passage["text"]
            else:
                self._sent[key] = passage["text"]


class ReceivedReports:
    """The client side of ``WireReports``: puts back the text of a passage sent earlier in the
    same response, so each report validates as a whole ``SentenceReport`` again."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str], str] = {}

    def event(self, data: dict[str, Any]) -> SentenceEvent | SummaryEvent | BlockedEvent:
        """A received ``factcheck`` event, with its passages' texts put back."""
        if data.get("type") == "summary":
            return SummaryEvent(summary=self.summary(data["summary"]))
        if data.get("type") == "blocked":
            return BlockedEvent(reason=data["reason"], report=self.report(data["report"]),
                                summary=self.summary(data["summary"]))
        return SentenceEvent(report=self.report(data["report"]))

    def report(self, data: dict[str, Any]) -> SentenceReport:
        self._passages(data.get("evidence") or [])
        return SentenceReport.model_validate(data)

    def summary(self, data: dict[str, Any]) -> StreamSummary:
        self._passages(data.get("attribution_report") or [])
        return StreamSummary.model_validate(data)

    def _passages(self, passages: list[dict[str, Any]]) -> None:
        for passage in passages:
            key = (passage.get("provider", ""), passage.get("id", ""))
            if "text" in passage:
                self._texts[key] = passage["text"]
            elif key in self._texts:
                passage["text"] = self._texts[key]


_URL_OR_LOCATION = re.compile(r"^[a-z][a-z0-9+.-]*://|^messages\[|^factcheck\.", re.IGNORECASE)


def public_source(source: str) -> str:
    """A passage's source as clients see it: URLs and request locations as they are, a file
    of the local index by its name (and line) only: where the server keeps its corpus is not
    the client's business."""
    if not source or _URL_OR_LOCATION.match(source):
        return source
    path, hash_, line = source.partition("#")
    if not (path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path)):
        return source
    return re.split(r"[\\/]", path)[-1] + hash_ + line
