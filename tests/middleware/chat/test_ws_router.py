"""The websocket endpoint ``/v1/ws``: the proxy's stream events as JSON messages."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from middleware.chat.api_router import SSEEncoder
from middleware.chat.checked_stream import End, Failed, Forward
from middleware.chat.chunks import ChunkItem, UpstreamChunks
from middleware.chat.ws_router import messages_of
from middleware.errors import UpstreamError
from tests.support.checkers import ScriptedChecker, ws_answer

ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905. She died in 1934."
FIXES = {"1905": "1903"}


def chat(mode: str | None = "annotate", text: str = ANSWER, **mock: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Who was Marie Curie?"}],
                               "mock": {"text": text, **mock}}
    if mode is not None:
        request["factcheck"] = {"mode": mode}
    return {"type": "chat", "request": request}


def content_of(messages: list[dict[str, Any]]) -> str:
    return "".join(
        (choice.get("delta") or {}).get("content") or ""
        for m in messages if m.get("object") == "chat.completion.chunk" for choice in m["choices"]
    )


def factchecks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["factcheck"] for m in messages if "factcheck" in m]


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


async def test_annotate_streams_chunks_reports_summary_done(make_proxy, session):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        messages = await ws_answer(ws, chat("annotate"))
    assert messages[0] == {"type": "start", "mode": "annotate"}
    assert messages[-1] == {"type": "done"}
    assert content_of(messages) == ANSWER
    assert all(m["object"] == "chat.completion.chunk" for m in messages[1:-1])
    checks = factchecks(messages)
    assert checks[-1]["type"] == "summary" and checks[-1]["summary"]["sentences"] == 3
    bad = next(f["report"] for f in checks if f["type"] == "sentence" and "1905" in f["report"]["text"])
    assert bad["verdict"]["label"] == "contradictory"
    assert bad["tags"][0]["replacement"] == "1903"
    # The upstream got the request without the factcheck field, streaming.
    forwarded = proxy.upstream.requests[-1]
    assert "factcheck" not in forwarded and forwarded["stream"] is True


async def test_correct_mode_and_several_answers_on_one_socket(make_proxy, session):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        corrected = await ws_answer(ws, chat("correct"))
        plain = await ws_answer(ws, chat("off"))
    assert content_of(corrected) == ANSWER.replace("1905", "1903")
    assert factchecks(corrected)[-1]["summary"]["edits"][0]["original"] == "1905"
    assert content_of(plain) == ANSWER and factchecks(plain) == []


async def test_mode_header_and_server_default(make_proxy, session):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"check.default_mode": "off"})
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        assert (await ws_answer(ws, chat(None)))[0]["mode"] == "off"
    async with session.ws_connect(f"{proxy.url}/ws", headers={"X-Factcheck-Mode": "correct"}) as ws:
        assert (await ws_answer(ws, chat(None)))[0]["mode"] == "correct"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (chat("sideways"), "invalid_value"),
        ({"type": "chat", "request": {"messages": []}}, "invalid_value"),
        ({"type": "chat", "request": "hello"}, None),
        ({"type": "shout"}, "invalid_value"),
    ],
)
async def test_bad_requests_get_openai_errors(make_proxy, session, message, code):
    proxy = await make_proxy(ScriptedChecker())
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_json(message)
        error = await asyncio.wait_for(ws.receive_json(), 10)
        assert set(error["error"]) == {"message", "type", "param", "code"}
        assert error["error"]["type"] == "invalid_request_error"
        if code:
            assert error["error"]["code"] == code
        if message.get("type") == "chat":
            assert (await asyncio.wait_for(ws.receive_json(), 10)) == {"type": "done"}
    assert proxy.upstream.requests == []


async def test_invalid_json_message(make_proxy, session):
    proxy = await make_proxy(ScriptedChecker())
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_str("{not json")
        assert (await asyncio.wait_for(ws.receive_json(), 10))["error"]["code"] == "invalid_json"


async def test_upstream_errors_before_and_during_the_stream(make_proxy, session):
    proxy = await make_proxy(ScriptedChecker())
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        refused = await ws_answer(ws, chat("annotate", error_status=503))
        broken = await ws_answer(ws, chat("annotate", fail_after=5))
    assert refused[0]["error"]["message"] == "scripted failure 503"
    assert refused[-1] == {"type": "done"}
    assert broken[0]["type"] == "start"
    assert broken[-2]["error"]["type"] == "upstream_error"
    assert ANSWER.startswith(content_of(broken)) and content_of(broken)


async def test_cancel_stops_the_answer_and_its_checks(make_proxy, session):
    checker = ScriptedChecker(delay=30)
    proxy = await make_proxy(checker)
    async with session.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_json(chat("annotate", hang_after=20))
        busy = None
        while checker.running == 0:  # wait until a check is in flight
            await asyncio.sleep(0.01)
        await ws.send_json(chat("annotate"))
        while busy is None:
            message = await asyncio.wait_for(ws.receive_json(), 10)
            busy = message if "error" in message else None
        assert busy["error"]["code"] == "busy"
        await ws.send_json({"type": "cancel"})
        while (await asyncio.wait_for(ws.receive_json(), 10)).get("type") != "done":
            pass
        assert checker.running == 0 and checker.cancelled >= 1
        checker.delay = 0
        again = await ws_answer(ws, chat("off"))
    assert content_of(again) == ANSWER


async def test_closing_the_socket_cancels_upstream_and_checks(make_proxy, session):
    checker = ScriptedChecker(delay=30)
    proxy = await make_proxy(checker)
    ws = await session.ws_connect(f"{proxy.url}/ws")
    await ws.send_json(chat("annotate", hang_after=20))
    while checker.running == 0:
        await asyncio.sleep(0.01)
    await ws.close()
    for _ in range(500):
        if checker.running == 0:
            break
        await asyncio.sleep(0.01)
    assert checker.running == 0 and checker.cancelled >= 1
    leftover = [t for t in asyncio.all_tasks() if t.get_name() in {"ws-answer"} or t.get_name().startswith("check-")]
    assert [t for t in leftover if not t.done()] == []


def test_messages_of_parses_raw_sse_and_drops_done():
    chunk = {"id": "c", "choices": []}
    encoder = SSEEncoder(UpstreamChunks(None))  # type: ignore[arg-type]

    def messages(event):
        return messages_of(event, encoder)

    assert messages(Forward(ChunkItem(raw=f"data: {json.dumps(chunk)}\n\n".encode()))) == [chunk]
    assert messages(Forward(ChunkItem(raw=b"data: [DONE]\n\n"))) == []
    assert messages(Forward(ChunkItem(raw=b"data: {not json\n\n"))) == []
    assert messages(Forward(ChunkItem(raw=b": keep-alive\n\n"))) == []
    assert messages(End(ChunkItem(raw=b"data: [DONE]\n\n", done=True))) == []
    [error] = messages(Failed(UpstreamError("gone", kind="disconnect")))
    assert error["error"]["type"] == "upstream_error" and error["error"]["code"] == "disconnect"


