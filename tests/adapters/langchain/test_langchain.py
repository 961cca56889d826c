"""The LangChain adapter with langchain-core's fake streaming chat models and the scripted checker."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    FakeListChatModelError,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.prompts import ChatPromptTemplate

from adapters.langchain import FactCheckCallbackHandler, FactCheckedChatModel, ReportEvent, SummaryEvent
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


# ------------------------------------------------------------------ callback handler
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


# ------------------------------------------------------------------ runnable wrapper
async def test_runnable_annotates_like_the_proxy():
    slow_model = FakeListChatModel(responses=[ANSWER], sleep=0.002)  # one character per chunk
    checked = FactCheckedChatModel(slow_model, ScriptedChecker(FIXES))
    items = [item async for item in checked.astream(QUESTION)]
    chunks = [i for i in items if isinstance(i, AIMessageChunk)]
    events = [i for i in items if not isinstance(i, AIMessageChunk)]
    assert "".join(c.text for c in chunks) == ANSWER
    assert isinstance(items[-1], SummaryEvent) and sum(isinstance(e, SummaryEvent) for e in events) == 1
    reports = [e for e in events if isinstance(e, ReportEvent)]
    assert len(reports) == 3
    factcheck = next(e.model_dump(mode="json") for e in reports if e.report.verdict.label == "contradictory")
    assert factcheck["type"] == "sentence" and factcheck["report"]["edits"][0]["replacement"] == "1903"
    assert items[-1].model_dump(mode="json")["summary"]["verdicts"] == {"attributable": 2, "contradictory": 1}
    # Reports come beside the stream: the first arrives before the last chunk.
    first_report = items.index(reports[0])
    assert first_report < max(i for i, item in enumerate(items) if isinstance(item, AIMessageChunk))


async def test_runnable_passes_chunks_through_unchanged():
    reference = [c async for c in fake().astream(QUESTION)]
    checked = FactCheckedChatModel(fake(), ScriptedChecker())
    chunks = [i async for i in checked.astream(QUESTION) if isinstance(i, AIMessageChunk)]
    strip = lambda c: (c.content, c.chunk_position, c.tool_call_chunks)  # noqa: E731 (ids differ per run)
    assert [strip(c) for c in chunks] == [strip(c) for c in reference]


async def test_runnable_correct_mode_holds_and_corrects_sentences():
    checked = FactCheckedChatModel(fake(), ScriptedChecker(FIXES), mode="correct")
    items = [item async for item in checked.astream(QUESTION)]
    text = "".join(i.text for i in items if isinstance(i, AIMessageChunk))
    assert text == ANSWER.replace("1905", "1903")
    # Each sentence chunk is followed by its own report.
    for position, item in enumerate(items):
        if isinstance(item, ReportEvent):
            before = items[position - 1]
            assert isinstance(before, AIMessageChunk)
            assert before.text == (item.report.corrected_text or item.report.text)
    assert items[-1].summary.edits[0].original == "1905"


async def test_runnable_off_mode_per_call_and_ainvoke_shape():
    checked = FactCheckedChatModel(GenericFakeChatModel(messages=iter([ANSWER, ANSWER])), ScriptedChecker(FIXES))
    off = [i async for i in checked.astream(QUESTION, config={"configurable": {"factcheck_mode": "off"}})]
    assert all(isinstance(i, AIMessageChunk) for i in off)
    message = await checked.ainvoke(QUESTION)
    assert isinstance(message, AIMessage) and message.content == ANSWER
    factcheck = message.response_metadata["factcheck"]
    assert [r["index"] for r in factcheck["reports"]] == [0, 1, 2]
    assert factcheck["summary"]["sentences"] == 3


def test_runnable_sync_invoke_in_a_chain():
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])
    checker = ScriptedChecker(FIXES)
    chain = prompt | FactCheckedChatModel(fake(), checker, mode="correct")
    message = chain.invoke({"question": QUESTION})
    assert message.content == ANSWER.replace("1905", "1903")
    assert checker.seen[0][1].user_message == QUESTION


async def test_runnable_reports_its_run_to_callbacks_and_raises_model_errors():
    class Runs(AsyncCallbackHandler):
        def __init__(self) -> None:
            self.chains: list[str] = []
            self.models = 0

        async def on_chain_start(self, serialized, inputs, *, name=None, **kwargs):
            self.chains.append(kwargs.get("name") or name or "")

        async def on_chat_model_start(self, serialized, messages, **kwargs):
            self.models += 1

    runs = Runs()
    await FactCheckedChatModel(fake(), ScriptedChecker()).ainvoke(QUESTION, config={"callbacks": [runs]})
    assert runs.models == 1 and any("FactChecked" in name for name in runs.chains)

    checker = ScriptedChecker(delay=5)
    failing = FactCheckedChatModel(FakeListChatModel(responses=[ANSWER], error_on_chunk_number=60), checker)
    with pytest.raises(FakeListChatModelError):
        async for _ in failing.astream(QUESTION):
            pass
    assert checker.running == 0 and checker.cancelled == 1
