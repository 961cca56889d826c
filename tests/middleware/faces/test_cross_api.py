"""Every front door in front of an upstream of every API (``upstream.api``): the official SDK of
the front door's API gets the answer, checked, whatever API the upstream speaks. A translated
request carries only what the upstream's API has a name for (the test's ``mock`` field does not
cross), so the demo LLM answers from its script for the question."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.middleware.chat.test_face_router import (
    ANSWER,
    FIXES,
    anthropic_client,
    expected,
    extra,
    openai_client,
)
from adapters.demo_upstream import DemoAnswers
from middleware.chat.protocol import WsChat
from tests.support.checkers import ScriptedChecker, ws_answer

QUESTION = "Who was Marie Curie?"

APIS = ["chat", "responses", "messages"]


async def stream_through(proxy, face: str, mode: str) -> tuple[str, list[dict[str, Any]], str | None]:
    """The text, the factcheck events and the stop reason a client of ``face`` receives."""
    text, factcheck, stop = [], [], None
    if face == "chat":
        stream = await openai_client(proxy).chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTION}], stream=True, extra_body=extra(mode))
        async for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
                stop = choice.finish_reason or stop
            if (event := (chunk.model_extra or {}).get("factcheck")) is not None:
                factcheck.append(event)
    elif face == "responses":
        stream = await openai_client(proxy).responses.create(model="m", input=QUESTION, stream=True, extra_body=extra(mode))
        async for event in stream:
            if event.type == "response.output_text.delta":
                text.append(event.delta)
            elif event.type == "response.factcheck":
                factcheck.append(event.model_dump()["factcheck"])
            elif event.type == "response.completed":
                stop = event.response.status
    else:
        stream = await anthropic_client(proxy).messages.create(
            model="m", max_tokens=100, messages=[{"role": "user", "content": QUESTION}], stream=True, extra_body=extra(mode))
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
            elif event.type == "factcheck":
                factcheck.append(event.model_dump()["factcheck"])
            elif event.type == "message_delta":
                stop = event.delta.stop_reason
    return "".join(text), factcheck, stop


STOPPED = {"chat": "stop", "responses": "completed", "messages": "end_turn"}
SHAPE = {"chat": "messages", "responses": "input", "messages": "max_tokens"}


async def scripted_proxy(make_proxy, upstream_api: str):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": upstream_api})
    proxy.upstream.answers = DemoAnswers(answers=[{"keywords": ["curie"], "answer": ANSWER}])
    return proxy


@pytest.mark.parametrize("upstream_api", APIS)
@pytest.mark.parametrize("face", APIS)
@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_every_face_over_every_upstream_api(make_proxy, face, upstream_api, mode):
    proxy = await scripted_proxy(make_proxy, upstream_api)
    text, factcheck, stop = await stream_through(proxy, face, mode)
    assert text == expected(mode)
    assert stop == STOPPED[face]
    assert SHAPE[upstream_api] in proxy.upstream.requests[-1]  # the upstream got a body of its own API
    if mode == "off":
        assert factcheck == []
    else:
        assert [event["type"] for event in factcheck].count("sentence") == 3
        assert factcheck[-1]["type"] == "summary" and factcheck[-1]["summary"]["verdicts"]["contradictory"] == 1


@pytest.mark.parametrize("upstream_api", ["responses", "messages"])
async def test_chat_non_stream_over_another_api(make_proxy, upstream_api):
    proxy = await scripted_proxy(make_proxy, upstream_api)
    completion = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_body=extra("correct"))
    assert completion.choices[0].message.content == expected("correct")
    assert completion.usage.completion_tokens > 0
    assert (completion.model_extra or {})["factcheck"]["summary"]["sentences"] == 3


async def test_messages_non_stream_over_chat(make_proxy):
    proxy = await scripted_proxy(make_proxy, "chat")
    message = await anthropic_client(proxy).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": QUESTION}], extra_body=extra("annotate"))
    assert message.content[0].text == ANSWER and message.stop_reason == "end_turn"
    assert (message.model_extra or {})["factcheck"]["summary"]["sentences"] == 3


@pytest.mark.parametrize("upstream_api", APIS)
async def test_the_websocket_chooses_the_api_spoken_to_the_upstream(make_proxy, upstream_api):
    proxy = await scripted_proxy(make_proxy, "chat")
    request = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "factcheck": "correct"}
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{proxy.url}/ws") as ws:
            messages = await ws_answer(ws, {"type": "chat", "request": request, "upstream_api": upstream_api})
    WsChat.model_validate({"type": "chat", "request": request, "upstream_api": upstream_api})
    assert SHAPE[upstream_api] in proxy.upstream.requests[-1]
    chunks = [m for m in messages[1:-1] if "choices" in m]
    assert "".join((c["delta"].get("content") or "") for m in chunks for c in m["choices"]) == expected("correct")
    assert messages[-2]["factcheck"]["type"] == "summary"


async def test_the_websocket_refuses_an_unknown_upstream_api(make_proxy):
    proxy = await scripted_proxy(make_proxy, "chat")
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{proxy.url}/ws") as ws:
            messages = await ws_answer(ws, {"type": "chat", "request": {"messages": [{"role": "user", "content": "q"}]},
                                            "upstream_api": "gemini"})
    assert messages[0]["error"]["param"] == "upstream_api" and proxy.upstream.requests == []
