"""``ChatService`` and according-to prompting: the body that goes upstream (untouched when no
instruction applies, byte for byte), and the summary reporting what was added, over SSE, the
non-stream completion and the websocket."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from middleware.chat.api_router import SERVICE_KEY
from middleware.chat.grounding_prompt import grounding_instruction
from tests.support.checkers import ScriptedChecker, ws_answer
from tests.support.grounding_doubles import RecordingUpstream

QUESTION = "Who was Marie Curie?"
ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903."


async def recorded(make_proxy, **overrides: object) -> tuple[Any, RecordingUpstream]:
    """A proxy whose service records every body it hands its upstream client."""
    proxy = await make_proxy(ScriptedChecker(), **overrides)
    service = proxy.app[SERVICE_KEY]
    service.upstream = recorder = RecordingUpstream(service.upstream)
    return proxy, recorder


def chat_body(stream: bool, factcheck: object = None, **extra: object) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": "Answer in one line."},
                                                      {"role": "user", "content": QUESTION}],
                            "stream": stream, "mock": {"text": ANSWER}, **extra}
    if factcheck is not None:
        body["factcheck"] = factcheck
    return body


async def post(proxy, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The summary (None when there is none) and the answer text, stream or not."""
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.url}/chat/completions", data=json.dumps(body)) as response:
            assert response.status == 200, await response.text()
            if not body.get("stream"):
                completion = await response.json()
                factcheck = completion.get("factcheck")
                return (factcheck["summary"] if factcheck else None), completion["choices"][0]["message"]["content"]
            summary, text = None, []
            async for line in response.content:
                data = line.decode().strip()
                if not data.startswith("data:") or data == "data: [DONE]":
                    continue
                chunk = json.loads(data[5:])
                text += [(c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or []]
                if (chunk.get("factcheck") or {}).get("type") == "summary":
                    summary = chunk["factcheck"]["summary"]
            return summary, "".join(text)


def without_factcheck(body: dict[str, Any]) -> bytes:
    """What the proxy sent upstream before according-to prompting existed: the body minus ``factcheck``."""
    return json.dumps({k: v for k, v in body.items() if k != "factcheck"}).encode()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("factcheck", "overrides"),
    [
        (None, {}),
        ({"mode": "annotate"}, {}),
        ({"grounding_prompt": "off"}, {"check.grounding_prompt": "Wikipedia"}),
        ({"mode": "off"}, {"check.grounding_prompt": "Wikipedia"}),
        ("correct", {"check.grounding_prompt": "OFF"}),
    ],
)
async def test_no_instruction_leaves_the_forwarded_body_byte_identical(make_proxy, stream, factcheck, overrides):
    proxy, recorder = await recorded(make_proxy, **overrides)
    body = chat_body(stream, factcheck, zeta="ü ✓", temperature=0.3, tools=[{"type": "function", "function": {"name": "f"}}])
    summary, text = await post(proxy, body)
    assert text == ANSWER
    assert recorder.sent == [without_factcheck(body)]
    assert proxy.upstream.requests[-1]["messages"] == body["messages"]
    if summary is not None:  # annotate and correct mode report that nothing was added
        assert summary["grounding_prompt"] is None


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_option_appends_the_instruction_and_the_summary_says_so(make_proxy, stream):
    proxy, recorder = await recorded(make_proxy)
    summary, text = await post(proxy, chat_body(stream, {"grounding_prompt": "the demo corpus"}))
    instruction = grounding_instruction("the demo corpus")
    [sent] = recorder.bodies
    assert sent["messages"] == [{"role": "system", "content": "Answer in one line."},
                                {"role": "user", "content": f"{QUESTION} {instruction}"}]
    assert proxy.upstream.requests[-1]["messages"] == sent["messages"]  # what the upstream received
    assert text == ANSWER
    assert summary is not None
    assert summary["grounding_prompt"] == {"corpus": "the demo corpus", "instruction": instruction, "placement": "append"}
    # the checker is given the user's question as written, not the instruction
    assert {context.user_message for _, context in proxy.checker.seen} == {QUESTION}


async def test_the_websocket_reports_the_instruction_in_its_summary(make_proxy):
    proxy, recorder = await recorded(make_proxy)
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{proxy.url}/ws") as ws:
            messages = await ws_answer(ws, {"type": "chat", "request": chat_body(True, {"grounding_prompt": "PubMed"})})
    [summary] = [m["factcheck"]["summary"] for m in messages if (m.get("factcheck") or {}).get("type") == "summary"]
    assert summary["grounding_prompt"]["instruction"] == grounding_instruction("PubMed")
    assert recorder.bodies[0]["messages"][-1]["content"] == f"{QUESTION} {grounding_instruction('PubMed')}"


@pytest.mark.parametrize("stream", [False, True])
async def test_the_server_default_in_a_system_message(make_proxy, stream):
    proxy, recorder = await recorded(make_proxy, **{"check.grounding_prompt": "Wikipedia",
                                                    "check.grounding_placement": "system"})
    body = chat_body(stream)
    summary, _ = await post(proxy, body)
    [sent] = recorder.bodies
    assert sent["messages"] == [body["messages"][0], {"role": "system", "content": grounding_instruction("Wikipedia")},
                                body["messages"][1]]
    assert summary is not None and summary["grounding_prompt"]["placement"] == "system"


async def test_off_mode_grounds_only_when_the_request_asks(make_proxy):
    proxy, recorder = await recorded(make_proxy, **{"check.grounding_prompt": "Wikipedia"})
    summary, _ = await post(proxy, chat_body(False, {"mode": "off", "grounding_prompt": "PubMed"}))
    assert summary is None  # off mode has no summary
    assert recorder.bodies[0]["messages"][-1]["content"] == f"{QUESTION} {grounding_instruction('PubMed')}"


async def test_the_closed_book_call_of_the_memory_check_stays_ungrounded(make_proxy):
    proxy, recorder = await recorded(make_proxy, **{"check.sentence_budget_s": 10.0})
    body = chat_body(False, {"grounding_prompt": "Wikipedia", "memory_check": True})
    summary, _ = await post(proxy, body)
    assert summary is not None and summary["grounding_prompt"]["corpus"] == "Wikipedia"
    [closed_book] = [b for b in recorder.bodies if len(b["messages"]) == 1]
    [main] = [b for b in recorder.bodies if b is not closed_book]
    assert closed_book["messages"] == [{"role": "user", "content": QUESTION}]
    assert main["messages"][-1]["content"].endswith(grounding_instruction("Wikipedia"))
