"""One checked stream, many faces: the same scripted answer through the SSE endpoint, the
non-stream endpoint, the websocket, the Responses and Messages front doors (stream and not),
the LangChain Runnable and callback, and ``factcheck check`` gives the same text and the same
reports and summary in every mode."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessageChunk

from adapters.langchain import FactCheckCallbackHandler, FactCheckedChatModel
from middleware.commands.check import answer_json
from middleware.chat.checked_stream import check_answer
from adapters.demo_upstream import DemoAnswers
from middleware.chat.protocol import (
    BlockedEvent,
    ChatChunk,
    ChatCompletion,
    SentenceEvent,
    SummaryEvent,
    WsDone,
    WsStart,
)
from middleware.messages.protocol import MessageObject, MessagesFactcheck
from middleware.responses.protocol import ResponseFactcheck, ResponseObject
from middleware.chat.wire import ReceivedReports
from middleware.checking import CheckRunner
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, SentenceReport, StreamSummary
from tests.support.checkers import ScriptedChecker, ws_answer

QUESTION = "Who was Marie Curie?"
ANSWER = ("## Marie Curie\n\nMarie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905.\n\n"
          "- She died in 1934.\n- Her daughter was Irène.\n\nRun `python -V` to check. She was Polish.")
FIXES = {"1905": "1903", "Polish": "Polish and French"}
CORRECTED = ANSWER.replace("1905", "1903").replace("was Polish.", "was Polish and French.")


def comparable(reports: list[SentenceReport], summary: StreamSummary | None) -> dict[str, Any]:
    """Reports and summary without the timings (which differ from run to run)."""
    return {
        "reports": [r.model_dump(mode="json", exclude={"timings_ms"}) for r in sorted(reports, key=lambda r: r.index)],
        "summary": summary.model_dump(mode="json", exclude={"added_latency_ms"}) if summary is not None else None,
    }


def chat_body(mode: Mode, stream: bool) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": QUESTION}],
            "factcheck": {"mode": mode.value}, "mock": {"text": ANSWER, "token_rate": 0}}


def read_chunks(chunks: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A client's reading of streamed chunks: content, and the factcheck events (each proxy chunk
    validated against the protocol's model; the websocket's ``blocked`` message is one itself)."""
    received, reports, summary, text = ReceivedReports(), [], None, []
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
        if "factcheck" in chunk or chunk.get("type") == "blocked":
            if "factcheck" in chunk:
                ChatChunk.model_validate(chunk)
            event = received.event(chunk.get("factcheck") or chunk)
            if isinstance(event, SentenceEvent | BlockedEvent):
                reports.append(event.report)
            if isinstance(event, SummaryEvent | BlockedEvent):
                summary = event.summary
    return "".join(text), comparable(reports, summary)


async def through_sse(proxy, mode: Mode) -> tuple[str, dict[str, Any]]:
    chunks = []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.url}/chat/completions", json=chat_body(mode, True)) as response:
            assert response.status == 200 and response.headers["X-Factcheck-Mode"] == mode.value
            async for line in response.content:
                data = line.decode().strip()
                if data.startswith("data:") and data != "data: [DONE]":
                    chunks.append(json.loads(data[5:]))
    return read_chunks(chunks)


async def through_non_stream(proxy, mode: Mode) -> tuple[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.url}/chat/completions", json=chat_body(mode, False)) as response:
            completion = ChatCompletion.model_validate(await response.json())
    text = completion.model_extra["choices"][0]["message"]["content"]
    factcheck = completion.factcheck
    if factcheck is None:
        return text, comparable([], None)
    return text, comparable(factcheck.reports, factcheck.summary)


def face_body(api: str, mode: Mode, stream: bool) -> dict[str, Any]:
    """A Responses or Messages request for the answer (the demo LLM answers QUESTION with it: the
    chat upstream gets the request translated, without the test's ``mock`` field)."""
    if api == "responses":
        return {"model": "m", "stream": stream, "input": QUESTION, "factcheck": {"mode": mode.value}}
    return {"model": "m", "max_tokens": 500, "stream": stream, "messages": [{"role": "user", "content": QUESTION}],
            "factcheck": {"mode": mode.value}}


TEXT_OF = {"responses": lambda e: e.get("delta") if e["type"] == "response.output_text.delta" else None,
           "messages": lambda e: e["delta"].get("text") if e["type"] == "content_block_delta" else None}
EXTENSION = {"responses": ResponseFactcheck, "messages": MessagesFactcheck}


async def through_typed_events(proxy, mode: Mode, api: str) -> tuple[str, dict[str, Any]]:
    received, reports, summary, text = ReceivedReports(), [], None, []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.url}/{api}", json=face_body(api, mode, True)) as response:
            assert response.status == 200 and response.headers["X-Factcheck-Mode"] == mode.value
            async for line in response.content:
                if not line.startswith(b"data:"):
                    continue
                event = json.loads(line[5:])
                if (piece := TEXT_OF[api](event)) is not None:
                    text.append(piece)
                if "factcheck" in event:
                    EXTENSION[api].model_validate(event)
                    checked = received.event(event["factcheck"])
                    if isinstance(checked, SentenceEvent | BlockedEvent):
                        reports.append(checked.report)
                    if isinstance(checked, SummaryEvent | BlockedEvent):
                        summary = checked.summary
    return "".join(text), comparable(reports, summary)


async def through_typed_non_stream(proxy, mode: Mode, api: str) -> tuple[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.url}/{api}", json=face_body(api, mode, False)) as response:
            data = await response.json()
    if api == "responses":
        answer = ResponseObject.model_validate(data)
        text = "".join(part["text"] for item in data["output"] for part in item["content"])
    else:
        answer = MessageObject.model_validate(data)
        text = "".join(block["text"] for block in data["content"])
    if answer.factcheck is None:
        return text, comparable([], None)
    return text, comparable(answer.factcheck.reports, answer.factcheck.summary)


async def parity_proxy(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    proxy.upstream.answers = DemoAnswers(answers=[{"keywords": ["curie"], "answer": ANSWER}])
    return proxy


async def through_websocket(proxy, mode: Mode) -> tuple[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{proxy.url}/ws") as ws:
            messages = await ws_answer(ws, {"type": "chat", "request": chat_body(mode, True)})
    assert WsStart.model_validate(messages[0]).mode is mode
    WsDone.model_validate(messages[-1])
    return read_chunks(messages[1:-1])


async def through_runnable(runner: CheckRunner, mode: Mode) -> tuple[str, dict[str, Any]]:
    model = FactCheckedChatModel(GenericFakeChatModel(messages=iter([ANSWER])), runner, mode=mode, on_block="truncate")
    text, reports, summary = [], [], None
    async for item in model.astream(QUESTION):
        if isinstance(item, AIMessageChunk):
            text.append(item.text)
        if isinstance(item, SentenceEvent | BlockedEvent):
            reports.append(item.report)
        if isinstance(item, SummaryEvent | BlockedEvent):
            summary = item.summary
    return "".join(text), comparable(reports, summary)


async def through_callback(runner: CheckRunner, mode: Mode) -> tuple[str, dict[str, Any]]:
    """The callback only watches: the text is the model's; the reports are the checks'."""
    handler = FactCheckCallbackHandler(runner, mode=mode, wait_on_end=True)
    text = "".join([c.text async for c in GenericFakeChatModel(messages=iter([ANSWER])).astream(
        QUESTION, config={"callbacks": [handler]})])
    [summary] = handler.summaries.values()
    return text, comparable(handler.reports, summary)


async def through_check_command(runner: CheckRunner, mode: Mode) -> tuple[str, dict[str, Any]]:
    data = answer_json(await check_answer(runner, ANSWER, CheckContext(user_message=QUESTION, mode=mode)))
    reports = [SentenceReport.model_validate(r) for r in data["reports"]]
    summary = StreamSummary.model_validate(data["summary"]) if data["summary"] is not None else None
    return data["text"], comparable(reports, summary)


async def through_every_face(proxy, runner: CheckRunner, mode: Mode) -> dict[str, tuple[str, dict[str, Any]]]:
    """The answer through each of the nine faces: its text and its comparable reports."""
    return {
        "sse": await through_sse(proxy, mode),
        "non-stream": await through_non_stream(proxy, mode),
        "websocket": await through_websocket(proxy, mode),
        "responses": await through_typed_events(proxy, mode, "responses"),
        "responses non-stream": await through_typed_non_stream(proxy, mode, "responses"),
        "messages": await through_typed_events(proxy, mode, "messages"),
        "messages non-stream": await through_typed_non_stream(proxy, mode, "messages"),
        "langchain runnable": await through_runnable(runner, mode),
        "check command": await through_check_command(runner, mode),
    }


@pytest.mark.parametrize("mode", [Mode.ANNOTATE, Mode.CORRECT])
async def test_every_face_gives_the_same_text_reports_and_summary(make_proxy, mode):
    proxy = await parity_proxy(make_proxy)
    runner = CheckRunner(ScriptedChecker(FIXES), CheckSettings(sentence_budget_s=10))
    faces = await through_every_face(proxy, runner, mode)
    expected_text = CORRECTED if mode is Mode.CORRECT else ANSWER
    reference = faces["sse"][1]
    assert len(reference["reports"]) == 6 and reference["summary"]["sentences"] == 6
    assert reference["summary"]["verdicts"] == {"attributable": 4, "contradictory": 2}
    for face, (text, checked) in faces.items():
        assert text == expected_text, face
        assert checked == reference, face
    # The callback watches a model it does not change: its reports are the same, its text the model's.
    text, checked = await through_callback(runner, mode)
    assert text == ANSWER and checked == reference


async def test_block_mode_stops_every_face_at_the_same_sentence(make_proxy):
    mode = Mode.BLOCK
    proxy = await parity_proxy(make_proxy)
    runner = CheckRunner(ScriptedChecker(FIXES), CheckSettings(sentence_budget_s=10))
    faces = await through_every_face(proxy, runner, mode)
    reference = faces["sse"][1]
    assert [r["verdict"]["label"] for r in reference["reports"]] == ["attributable", "contradictory"]
    assert reference["summary"]["verdicts"] == {"attributable": 1, "contradictory": 1}
    for face, (text, checked) in faces.items():
        assert text == ANSWER[: ANSWER.index("She won")], face
        assert checked == reference, face


async def test_off_mode_is_the_answer_alone_on_every_face(make_proxy):
    proxy = await parity_proxy(make_proxy)
    runner = CheckRunner(ScriptedChecker(FIXES), CheckSettings())
    empty = comparable([], None)
    for face in (await through_sse(proxy, Mode.OFF), await through_non_stream(proxy, Mode.OFF),
                 await through_websocket(proxy, Mode.OFF),
                 *[await through(proxy, Mode.OFF, api) for through in (through_typed_events, through_typed_non_stream)
                   for api in ("responses", "messages")], await through_runnable(runner, Mode.OFF),
                 await through_check_command(runner, Mode.OFF)):
        assert face == (ANSWER, empty)
