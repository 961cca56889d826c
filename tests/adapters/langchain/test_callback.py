"""The LangChain callback handler (``FactCheckCallbackHandler``) with langchain-core's fake streaming
chat models and the scripted checker."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    FakeListChatModelError,
    GenericFakeChatModel,
)

from adapters.langchain import FactCheckCallbackHandler
from middleware.checking import CheckRunner
from middleware.settings import CheckSettings
from middleware.types import SentenceReport
from tests.support.checkers import ScriptedChecker

ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905. She died in 1934."
FIXES = {"1905": "1903"}
QUESTION = "Who was Marie Curie?"


def fake(text: str = ANSWER) -> GenericFakeChatModel:
    """Streams ``text`` word by word (whitespace kept)."""
    return GenericFakeChatModel(messages=iter([text]))


class CountingChecker(ScriptedChecker):
    """Also records the most checks it ever ran at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.peak = 0

    async def check(self, sentence, context):
        self.peak = max(self.peak, self.running + 1)
        return await super().check(sentence, context)


async def test_handler_reports_through_callback_and_iterator():
    seen_sync: list[SentenceReport] = []
    seen_async: list[SentenceReport] = []

    async def on_report(report: SentenceReport) -> None:
        await asyncio.sleep(0)
        seen_async.append(report)

    checker = ScriptedChecker(FIXES, delay=0.01)
    handler = FactCheckCallbackHandler(checker, on_report=seen_sync.append)
    other = FactCheckCallbackHandler(ScriptedChecker(FIXES), on_report=on_report)
    consumed = asyncio.create_task(_collect(handler))
    chunks = [c async for c in fake().astream(QUESTION, config={"callbacks": [handler, other]})]
    reports = await asyncio.wait_for(consumed, 5)
    await other.wait()

    assert "".join(c.text for c in chunks) == ANSWER
    assert sorted(r.index for r in reports) == [0, 1, 2]
    assert [r.index for r in seen_sync] == [r.index for r in reports]
    assert sorted(r.index for r in seen_async) == [0, 1, 2]
    bad = next(r for r in reports if r.verdict.label == "contradictory")
    assert "1905" in bad.text and bad.edits[0].replacement == "1903"
    for r in reports:
        assert ANSWER[r.start : r.end] == r.text
    # The checker saw the user's question and the earlier sentences.
    sentence, context = next((s, c) for s, c in checker.seen if s.index == 2)
    assert context.user_message == QUESTION
    assert [t.strip() for t in context.previous] == [r.text.strip() for r in sorted(reports, key=lambda r: r.index)[:2]]
    [summary] = handler.summaries.values()
    assert summary.sentences == 3 and summary.verdicts == {"attributable": 2, "contradictory": 1}


async def _collect(handler: FactCheckCallbackHandler) -> list[SentenceReport]:
    return [report async for report in handler]


async def test_handler_checks_a_call_that_did_not_stream():
    handler = FactCheckCallbackHandler(ScriptedChecker(FIXES), wait_on_end=True)
    message = await FakeListChatModel(responses=[ANSWER]).ainvoke(QUESTION, config={"callbacks": [handler]})
    assert message.content == ANSWER
    assert sorted(r.index for r in handler.reports) == [0, 1, 2]
    assert len(handler.summaries) == 1  # wait_on_end: ready when the call returns


async def test_handler_applies_budget_and_per_stream_concurrency():
    slow = CountingChecker(delay=0.2)
    settings = CheckSettings(sentence_budget_s=0.05, max_checks_per_stream=1)
    handler = FactCheckCallbackHandler(slow, settings, wait_on_end=True)
    await FakeListChatModel(responses=[ANSWER]).ainvoke(QUESTION, config={"callbacks": [handler]})
    assert {r.verdict.label for r in handler.reports} == {"unverified"}
    # the first check started and ran past its budget; those queued behind it could not start in time
    reasons = [r.verdict.reason for r in sorted(handler.reports, key=lambda r: r.index)]
    assert reasons[0] == "timeout" and set(reasons[1:]) == {"overload"}
    assert slow.peak == 1 and slow.running == 0


async def test_handler_shares_one_runner_and_ends_on_model_error():
    runner = CheckRunner(ScriptedChecker(delay=5), CheckSettings())
    handler = FactCheckCallbackHandler(runner)
    model = FakeListChatModel(responses=[ANSWER], error_on_chunk_number=60)
    with pytest.raises(FakeListChatModelError):
        async for _ in model.astream(QUESTION, config={"callbacks": [handler]}):
            pass
    assert await asyncio.wait_for(_collect(handler), 5) == []
    assert runner.checker.running == 0 and runner.checker.cancelled == 1
