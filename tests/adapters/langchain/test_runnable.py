"""The LangChain Runnable wrapper (``FactCheckedChatModel``) with langchain-core's fake streaming chat
models and the scripted checker: the model's answer annotated or corrected the way the proxy does it."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    FakeListChatModelError,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.prompts import ChatPromptTemplate

from adapters.langchain import FactCheckedChatModel, ReportEvent, SummaryEvent
from tests.support.checkers import ScriptedChecker
from tests.adapters.langchain.test_callback import ANSWER, FIXES, QUESTION, fake


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
