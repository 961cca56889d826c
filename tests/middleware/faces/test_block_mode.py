"""Block mode at every front door, with the demo LLM's Marie Curie answer and its planted error
(adapters/demo_answers.yaml: "She received a second Nobel Prize, in Chemistry, in 1915."): the
official ``openai`` and ``anthropic`` SDKs, stream and not, receive the answer up to the
sentence before, then their API's own signal for withheld content with the sentence's report;
the websocket a ``blocked`` message; the upstream stream is closed at the block; ``/metrics``
counts it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from adapters.demo_upstream import DemoAnswers, tokenize
from middleware.chat.checked_stream import check_answer
from middleware.chat.protocol import BlockedEvent, ChatChunk, CompletionFactcheck
from middleware.checking import CheckRunner
from middleware.commands.check import answer_json
from middleware.chat.wire import ReceivedReports
from middleware.messages.protocol import MessagesFactcheck
from middleware.responses.protocol import ResponseFactcheck
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode
from tests.middleware.chat.test_face_router import anthropic_client, openai_client
from tests.support.checkers import ScriptedChecker, ws_answer
from tests.support.sdk_clients import closed_sdk_clients  # noqa: F401 (autouse)

QUESTION = "Who was Marie Curie and what did she discover?"
CURIE = DemoAnswers.load().answer_for(QUESTION)
PLANTED = "She received a second Nobel Prize, in Chemistry, in 1915."
BEFORE = CURIE[: CURIE.index(PLANTED)]
"""What the client receives: the answer up to the planted sentence."""
FIXES = {"in 1915": "in 1911"}


def block(mode: str = "block", **mock: Any) -> dict[str, Any]:
    return {"factcheck": {"mode": mode}, **({"mock": mock} if mock else {})}


async def demo_proxy(make_proxy, upstream_api: str = "chat", **overrides: Any):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": upstream_api, **overrides})
    proxy.upstream.answers = DemoAnswers.load()
    return proxy


def assert_blocked_event(event: dict[str, Any], reason: str = "contradictory") -> BlockedEvent:
    """The ``blocked`` factcheck event as a client receives it, validated against the protocol."""
    blocked = ReceivedReports().event(event)
    assert isinstance(blocked, BlockedEvent) and blocked.reason == reason
    assert blocked.report.text == PLANTED and blocked.report.verdict.label == reason
    assert blocked.summary.mode.value == "block"
    assert blocked.summary.sentences == blocked.report.index + 1  # the sentences up to it, not after
    return blocked


def blocks_total(metrics: str, verdict: str) -> float:
    line = next(line for line in metrics.splitlines()
                if line.startswith(f'factcheck_blocks_total{{verdict="{verdict}"}}'))
    return float(line.rsplit(" ", 1)[1])


async def metrics_text(proxy) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(proxy.url.removesuffix("/v1") + "/metrics") as response:
            return await response.text()


# ------------------------------------------------------------------------- chat completions


async def test_chat_stream_ends_with_content_filter_and_the_report(make_proxy):
    proxy = await demo_proxy(make_proxy)
    before = blocks_total(await metrics_text(proxy), "contradictory")
    stream = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], stream=True, extra_body=block())
    chunks = [chunk async for chunk in stream]
    text = "".join(choice.delta.content or "" for chunk in chunks for choice in chunk.choices)
    assert text == BEFORE
    last = chunks[-1]
    assert last.choices[0].finish_reason == "content_filter"
    assert [c.choices[0].finish_reason for c in chunks[:-1] if c.choices].count("content_filter") == 0
    ChatChunk.model_validate(last.model_dump(exclude_unset=True))
    assert_blocked_event(last.model_extra["factcheck"])
    sentences = [c.model_extra["factcheck"] for c in chunks[:-1] if (c.model_extra or {}).get("factcheck")]
    assert [s["type"] for s in sentences] == ["sentence"] * len(sentences)
    assert all(s["report"]["verdict"]["label"] == "attributable" for s in sentences)
    assert blocks_total(await metrics_text(proxy), "contradictory") == before + 1


async def test_chat_non_stream_is_truncated_with_content_filter(make_proxy):
    proxy = await demo_proxy(make_proxy)
    completion = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_body=block())
    assert completion.choices[0].finish_reason == "content_filter"
    assert completion.choices[0].message.content == BEFORE
    factcheck = CompletionFactcheck.model_validate(completion.model_extra["factcheck"])
    assert factcheck.blocked is not None and factcheck.blocked.reason == "contradictory"
    assert factcheck.reports[-1].index == factcheck.blocked.index and factcheck.reports[-1].text == PLANTED
    assert factcheck.summary.sentences == len(factcheck.reports)


async def test_block_mode_is_also_the_server_default_and_a_header(make_proxy):
    proxy = await demo_proxy(make_proxy, **{"check.default_mode": "block"})
    completion = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}])
    assert completion.choices[0].finish_reason == "content_filter"
    proxy = await demo_proxy(make_proxy)
    completion = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_headers={"X-Factcheck-Mode": "block"})
    assert completion.choices[0].message.content == BEFORE


async def test_an_answer_with_nothing_to_block_goes_out_whole(make_proxy):
    proxy = await make_proxy(ScriptedChecker({}))
    proxy.upstream.answers = DemoAnswers.load()
    stream = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], stream=True, extra_body=block())
    chunks = [chunk async for chunk in stream]
    assert "".join(choice.delta.content or "" for chunk in chunks for choice in chunk.choices) == CURIE
    assert [choice.finish_reason for chunk in chunks for choice in chunk.choices if choice.finish_reason] == ["stop"]
    assert chunks[-1].model_extra["factcheck"]["type"] == "summary"


@pytest.mark.parametrize("setting", [False, True])
async def test_extrapolatory_sentences_block_only_by_setting(make_proxy, setting):
    class Unsupported(ScriptedChecker):
        async def check(self, sentence, context):
            report = await super().check(sentence, context)
            if "contradictory" == report.verdict.label:
                return report.model_copy(update={"verdict": report.verdict.model_copy(update={"label": "extrapolatory"})})
            return report

    proxy = await make_proxy(Unsupported(FIXES), **{"check.block_extrapolatory": setting})
    proxy.upstream.answers = DemoAnswers.load()
    completion = await openai_client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_body=block())
    if setting:
        assert completion.choices[0].finish_reason == "content_filter"
        assert completion.model_extra["factcheck"]["blocked"]["reason"] == "extrapolatory"
        assert completion.choices[0].message.content == BEFORE
    else:
        assert completion.choices[0].finish_reason == "stop" and completion.choices[0].message.content == CURIE
        assert "blocked" not in completion.model_extra["factcheck"]


async def test_the_upstream_stream_is_closed_at_the_block(make_proxy):
    """No tokens are paid for after the block: the upstream connection is closed there, long
    before the upstream would have finished its answer."""
    tail = " Her laboratory notebooks are still radioactive today." * 60
    proxy = await demo_proxy(make_proxy)
    total = len(tokenize(CURIE + tail))
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": QUESTION}],
                **block(text=CURIE + tail, token_rate=200)}
        async with session.post(f"{proxy.url}/chat/completions", json=body) as response:
            received = await asyncio.wait_for(response.read(), 10)
    assert b'"finish_reason":"content_filter"' in received and received.endswith(b"data: [DONE]\n\n")
    await asyncio.sleep(0.3)  # the upstream's next write finds the connection closed
    sent = proxy.upstream.sent_tokens[-1]
    await asyncio.sleep(0.3)
    assert proxy.upstream.sent_tokens[-1] == sent < total / 2  # it stopped sending, far from the end


# ------------------------------------------------------------------------------- Responses


@pytest.mark.parametrize("upstream_api", ["responses", "chat"])
async def test_responses_stream_ends_incomplete_for_content_filter(make_proxy, upstream_api):
    proxy = await demo_proxy(make_proxy, upstream_api)
    stream = await openai_client(proxy).responses.create(model="m", input=QUESTION, stream=True, extra_body=block())
    events = [event async for event in stream]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == BEFORE
    assert events[-1].type == "response.incomplete"
    response = events[-1].response
    assert response.status == "incomplete" and response.incomplete_details.reason == "content_filter"
    assert response.output_text == BEFORE and response.id == events[0].response.id
    factcheck = [e.model_dump() for e in events if e.type == "response.factcheck"]
    ResponseFactcheck.model_validate({key: factcheck[-1][key] for key in ("type", "sequence_number", "factcheck")})
    assert_blocked_event(factcheck[-1]["factcheck"])
    done = [e for e in events if e.type == "response.output_text.done"]
    assert [d.text for d in done] == [BEFORE]
    numbers = [e.sequence_number for e in events]
    closing = numbers[-4:]  # output_text.done, content_part.done, output_item.done, response.incomplete
    assert numbers == sorted(numbers) and closing == list(range(closing[0], closing[0] + 4)) and closing[0] > numbers[-5]


async def test_responses_stream_helper_accumulates_the_blocked_response(make_proxy):
    proxy = await demo_proxy(make_proxy, "responses")
    async with openai_client(proxy).responses.stream(model="m", input=QUESTION, extra_body=block()) as stream:
        kinds = [event.type async for event in stream]  # the SDK's accumulator checks the events' order and ids
    assert kinds[-1] == "response.incomplete" and "response.output_item.done" in kinds


async def test_responses_non_stream_is_incomplete_for_content_filter(make_proxy):
    proxy = await demo_proxy(make_proxy, "responses")
    response = await openai_client(proxy).responses.create(model="m", input=QUESTION, extra_body=block())
    assert response.status == "incomplete" and response.incomplete_details.reason == "content_filter"
    assert response.output_text == BEFORE
    assert response.model_extra["factcheck"]["blocked"]["reason"] == "contradictory"


# -------------------------------------------------------------------------------- Messages


@pytest.mark.parametrize("upstream_api", ["messages", "chat"])
async def test_messages_stream_stops_with_refusal(make_proxy, upstream_api):
    proxy = await demo_proxy(make_proxy, upstream_api)
    stream = await anthropic_client(proxy).messages.create(
        model="m", max_tokens=500, messages=[{"role": "user", "content": QUESTION}], stream=True, extra_body=block())
    events = [event async for event in stream]
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == BEFORE
    assert [e.type for e in events[-3:]] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[-2].delta.stop_reason == "refusal"
    factcheck = [e.model_dump() for e in events if e.type == "factcheck"]
    MessagesFactcheck.model_validate({key: factcheck[-1][key] for key in ("type", "factcheck")})
    assert_blocked_event(factcheck[-1]["factcheck"])


async def test_messages_stream_helper_gets_the_truncated_message(make_proxy):
    proxy = await demo_proxy(make_proxy, "messages")
    async with anthropic_client(proxy).messages.stream(
            model="m", max_tokens=500, messages=[{"role": "user", "content": QUESTION}], extra_body=block()) as stream:
        message = await stream.get_final_message()
    assert message.stop_reason == "refusal" and message.content[0].text == BEFORE


async def test_messages_non_stream_stops_with_refusal(make_proxy):
    proxy = await demo_proxy(make_proxy, "messages")
    message = await anthropic_client(proxy).messages.create(
        model="m", max_tokens=500, messages=[{"role": "user", "content": QUESTION}], extra_body=block())
    assert message.stop_reason == "refusal" and [b.text for b in message.content] == [BEFORE]
    assert message.model_extra["factcheck"]["blocked"]["reason"] == "contradictory"


# ------------------------------------------------------------------------------- websocket


async def test_websocket_sends_a_blocked_message(make_proxy):
    proxy = await demo_proxy(make_proxy)
    request = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "factcheck": "block"}
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{proxy.url}/ws") as ws:
            messages = await ws_answer(ws, {"type": "chat", "request": request})
    assert messages[0] == {"type": "start", "mode": "block"}
    assert [m.get("type") for m in messages[-2:]] == ["blocked", "done"]
    BlockedEvent.model_validate(assert_blocked_event(messages[-2]).model_dump())
    chunks = [m for m in messages[1:-2] if "choices" in m]
    assert "".join((c["delta"].get("content") or "") for m in chunks for c in m["choices"]) == BEFORE


# ----------------------------------------------------------------------- the checked stream


async def test_an_unverified_sentence_goes_out_and_the_check_command_names_the_block():
    """Block mode stops at a verdict, never at a check that did not finish: a sentence left
    unverified (here: past its budget) is sent as written; ``factcheck check --json`` says
    where the text was stopped."""

    class SlowOnBirth(ScriptedChecker):
        async def check(self, sentence, context):
            if "Warsaw" in sentence.text:
                await asyncio.sleep(5)
            return await super().check(sentence, context)

    runner = CheckRunner(SlowOnBirth(FIXES), CheckSettings(sentence_budget_s=0.3))
    answer = await check_answer(runner, CURIE, CheckContext(user_message=QUESTION, mode=Mode.BLOCK))
    data = answer_json(answer)
    assert data["text"] == BEFORE
    labels = {r["text"]: r["verdict"] for r in data["reports"]}
    assert next(v for t, v in labels.items() if "Warsaw" in t)["reason"] == "timeout"
    assert data["blocked"] == {"index": data["reports"][-1]["index"], "reason": "contradictory"}
    assert "blocked" not in answer_json(await check_answer(runner, CURIE, CheckContext(mode=Mode.CORRECT)))
