"""What the LangChain callback and the Runnable share: the check context of a model call and
the check runner. The checking itself is the proxy's checked stream
(``middleware.chat.checked_stream``); the events are the protocol's ``SentenceEvent`` and
``SummaryEvent`` (exported here under their LangChain-facing names)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from middleware.chat.protocol import BlockedEvent, BlockReason, SentenceEvent, SummaryEvent
from middleware.checking import CheckRunner
from middleware.evidence.request_passages import context_passages, message_texts
from middleware.interfaces import Checker
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, SentenceReport, StreamSummary

ReportEvent = SentenceEvent
"""A sentence's report; ``factcheck`` is the object the proxy puts on its extension chunk."""
FactCheckEvent = SentenceEvent | SummaryEvent | BlockedEvent


class FactCheckBlocked(Exception):
    """Block mode stopped a model's answer at a sentence judged contradictory (or
    extrapolatory, with ``check.block_extrapolatory``). ``text``: the answer up to the
    sentence before (what the caller may show); ``report``: the sentence's report;
    ``reason``: its verdict; ``summary``: the sentences checked up to it (None where the
    summary is not made, in the callback handler)."""

    def __init__(self, text: str, report: SentenceReport, reason: BlockReason,
                 summary: StreamSummary | None = None) -> None:
        super().__init__(f"answer blocked at sentence {report.index} ({reason}): {report.text!r}")
        self.text = text
        self.report = report
        self.reason = reason
        self.summary = summary


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


def call_context(messages: Sequence[BaseMessage], mode: Mode) -> CheckContext:
    """The checks' context for a model call: the last human message, and the call's own
    system, human and tool/function messages as ``context`` evidence, named by position
    (``messages[2] (tool)``) as the proxy names a request's messages."""
    pairs = [(_ROLES.get(m.type, m.type), m.text) for m in messages]
    return CheckContext(user_message=last_user_text(messages), mode=mode,
                        request_passages=context_passages(message_texts(pairs)))
