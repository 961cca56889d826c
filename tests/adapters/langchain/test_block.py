"""Block mode on the LangChain side: the Runnable stops the model's answer at the contradicted
sentence and raises ``FactCheckBlocked`` or ends with the truncated answer (``on_block``); the
callback handler hands the blocking report and its reason to ``on_block``."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk

from adapters.langchain import BlockedEvent, FactCheckBlocked, FactCheckCallbackHandler, FactCheckedChatModel
from middleware.types import SentenceReport
from tests.adapters.langchain.test_callback import ANSWER, FIXES, QUESTION, fake
from tests.support.checkers import ScriptedChecker

BLOCKED = "She won the Nobel Prize in Physics in 1905."
BEFORE = ANSWER[: ANSWER.index(BLOCKED)]


async def test_runnable_raises_with_the_text_before_the_sentence():
    checked = FactCheckedChatModel(fake(), ScriptedChecker(FIXES), mode="block")
    received: list[str] = []
    with pytest.raises(FactCheckBlocked) as blocked:
        async for item in checked.astream(QUESTION):
            if isinstance(item, AIMessageChunk):
                received.append(item.text)
    assert "".join(received) == BEFORE == blocked.value.text
    assert blocked.value.reason == "contradictory" and blocked.value.report.text == BLOCKED
    assert blocked.value.summary is not None and blocked.value.summary.sentences == 2
    with pytest.raises(FactCheckBlocked):
        await FactCheckedChatModel(fake(), ScriptedChecker(FIXES), mode="block").ainvoke(QUESTION)


async def test_runnable_truncates_by_option():
    checked = FactCheckedChatModel(fake(), ScriptedChecker(FIXES), mode="block", on_block="truncate")
    items = [item async for item in checked.astream(QUESTION)]
    assert isinstance(items[-1], BlockedEvent) and items[-1].report.text == BLOCKED
    assert "".join(i.text for i in items if isinstance(i, AIMessageChunk)) == BEFORE
    message = await FactCheckedChatModel(fake(), ScriptedChecker(FIXES), mode="block",
                                         on_block="truncate").ainvoke(QUESTION)
    assert isinstance(message, AIMessage) and message.content == BEFORE
    assert message.response_metadata["finish_reason"] == "content_filter"
    factcheck = message.response_metadata["factcheck"]
    assert factcheck["blocked"] == {"index": 1, "reason": "contradictory"}
    assert [r["index"] for r in factcheck["reports"]] == [0, 1]


async def test_runnable_block_mode_per_call_and_a_clean_answer_whole():
    checked = FactCheckedChatModel(fake(), ScriptedChecker(FIXES), on_block="truncate")  # annotate by default
    message = await checked.ainvoke(QUESTION, config={"configurable": {"factcheck_mode": "block"}})
    assert message.content == BEFORE
    clean = await FactCheckedChatModel(fake(), ScriptedChecker(), mode="block").ainvoke(QUESTION)
    assert clean.content == ANSWER and "blocked" not in clean.response_metadata["factcheck"]


async def test_runnable_stops_reading_the_model_at_the_block():
    tail = " She is remembered in many countries." * 60
    model = FakeListChatModel(responses=[ANSWER + tail], sleep=0.002)  # one character per chunk
    chunks_read = 0
    original = model._astream

    async def counting(*args, **kwargs):
        nonlocal chunks_read
        async for chunk in original(*args, **kwargs):
            chunks_read += 1
            yield chunk

    object.__setattr__(model, "_astream", counting)
    with pytest.raises(FactCheckBlocked):
        async for _ in FactCheckedChatModel(model, ScriptedChecker(FIXES), mode="block").astream(QUESTION):
            pass
    assert len(BEFORE) < chunks_read < len(ANSWER + tail) / 2


def test_runnable_refuses_an_unknown_on_block():
    with pytest.raises(ValueError, match="on_block"):
        FactCheckedChatModel(fake(), ScriptedChecker(), mode="block", on_block="ignore")  # type: ignore[arg-type]


async def test_callback_receives_the_report_and_the_reason():
    seen: list[tuple[SentenceReport, str]] = []
    handler = FactCheckCallbackHandler(ScriptedChecker(FIXES), mode="block", wait_on_end=True,
                                       on_block=lambda report, reason: seen.append((report, reason)))
    await fake().ainvoke(QUESTION, config={"callbacks": [handler]})
    [(report, reason)] = seen
    assert report.text == BLOCKED and reason == "contradictory"
    [blocked] = handler.blocked.values()
    assert blocked.text == BEFORE and blocked.report is report
    annotate = FactCheckCallbackHandler(ScriptedChecker(FIXES), wait_on_end=True,
                                        on_block=lambda report, reason: seen.append((report, reason)))
    await fake().ainvoke(QUESTION, config={"callbacks": [annotate]})
    assert len(seen) == 1 and annotate.blocked == {}  # other modes never block
