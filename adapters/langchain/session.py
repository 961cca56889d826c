"""What the LangChain callback and the Runnable wrapper share: a message being checked as it
streams (segmenter + the stream's checks), and the report/summary items they hand out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from middleware.checking import CheckRunner
from middleware.evidence.request_passages import context_passages, message_texts
from middleware.interfaces import Checker
from middleware.segmenter import StreamSegmenter
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, Segment, Sentence, SentenceReport, StreamSummary


@dataclass(frozen=True, slots=True)
class ReportEvent:
    """A sentence's report; ``factcheck`` is the object the proxy puts on its extension chunk."""

    report: SentenceReport
    type: Literal["sentence"] = "sentence"

    @property
    def factcheck(self) -> dict[str, Any]:
        return {"type": "sentence", "report": self.report.model_dump(mode="json")}


@dataclass(frozen=True, slots=True)
class SummaryEvent:
    """The message's summary, sent once after every report (the proxy sends it before [DONE])."""

    summary: StreamSummary
    type: Literal["summary"] = "summary"

    @property
    def factcheck(self) -> dict[str, Any]:
        return {"type": "summary", "summary": self.summary.model_dump(mode="json")}


FactCheckEvent = ReportEvent | SummaryEvent


@dataclass(slots=True)
class Held:
    """A segment of the message and, if it is a checkable sentence, its check."""

    segment: Segment
    task: asyncio.Task[SentenceReport] | None = None


def as_runner(checker: Checker | CheckRunner, settings: CheckSettings | None = None) -> CheckRunner:
    """A ``CheckRunner`` (budget, concurrency caps) around ``checker``; one given is kept, so
    several handlers can share one global concurrency cap."""
    if isinstance(checker, CheckRunner):
        return checker
    return CheckRunner(checker, settings or CheckSettings())


def last_user_text(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if message.type == "human":
            return message.text
    return None


_ROLES = {"human": "user", "ai": "assistant"}


def check_context(messages: Sequence[BaseMessage], mode: Mode) -> CheckContext:
    """The checks' context for a model call: the last human message, and the call's own
    system, human and tool/function messages as ``context`` evidence, named by position
    (``messages[2] (tool)``) as the proxy names a request's messages."""
    pairs = [(_ROLES.get(m.type, m.type), m.text) for m in messages]
    return CheckContext(user_message=last_user_text(messages), mode=mode,
                        request_passages=context_passages(message_texts(pairs)))


class TextChecks:
    """One message checked while it streams: ``feed`` deltas, ``flush`` at the end. Each
    checkable sentence is submitted at once; its task always resolves to a report."""

    def __init__(self, runner: CheckRunner, context: CheckContext) -> None:
        self._runner = runner
        self._context = context
        self._segmenter = StreamSegmenter()
        self._checks = runner.for_stream()
        self.sentences: list[Sentence] = []

    @property
    def mode(self) -> Mode:
        return self._context.mode

    def feed(self, delta: str) -> list[Held]:
        return [self._hold(segment) for segment in self._segmenter.feed(delta)] if delta else []

    def flush(self) -> list[Held]:
        return [self._hold(segment) for segment in self._segmenter.flush()]

    async def wait(self) -> list[SentenceReport]:
        return await self._checks.wait_all()

    async def summary(self, reports: Sequence[SentenceReport]) -> StreamSummary:
        return await self._runner.summarize(list(reports), self.mode)

    async def cancel(self) -> None:
        await self._checks.cancel_all()

    def _hold(self, segment: Segment) -> Held:
        if not segment.checkable:
            return Held(segment)
        sentence = Sentence(
            index=len(self.sentences), start=segment.start, end=segment.end, text=segment.text,
            code_spans=segment.code_spans,
        )
        self.sentences.append(sentence)
        previous = [s.text for s in self.sentences[: sentence.index]]
        return Held(segment, self._checks.submit(sentence, self._context.model_copy(update={"previous": previous})))
