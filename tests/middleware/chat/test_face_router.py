"""The front doors that speak typed events (``middleware.chat.face_router``, under
``middleware.responses`` and ``middleware.messages``): ``POST /v1/responses`` and
``POST /v1/messages`` end to end on loopback with the official ``openai`` and ``anthropic``
SDKs, every mode; the upstream's bytes relayed untouched in off and
annotate mode; a value split across two events checked as one sentence; errors in each API's
own format."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import anthropic
import pytest
from openai import AsyncOpenAI, BadRequestError

from middleware.composition import build_app
from middleware.messages.protocol import AnthropicErrorBody, MessagesFactcheck, MessagesTextDelta
from middleware.responses.protocol import ResponseErrorEvent, ResponseFactcheck, ResponseTextDelta
from middleware.commands.serve import start_site
from middleware.settings import load_settings
from tests.support.canned_upstream import CannedUpstream, recorded_stream
from tests.support.checkers import ScriptedChecker
from tests.support.sdk_clients import closed_sdk_clients  # noqa: F401 (autouse)

ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905. She died in 1934."
CORRECTED = ANSWER.replace("1905", "1903")
FIXES = {"1905": "1903"}
MODES = ["off", "annotate", "correct"]


def expected(mode: str) -> str:
    return CORRECTED if mode == "correct" else ANSWER


def openai_client(proxy) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0)


def anthropic_client(proxy) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=proxy.url.removesuffix("/v1"), api_key="sk-test", max_retries=0)


def extra(mode: str) -> dict[str, object]:
    return {"mock": {"text": ANSWER}, "factcheck": {"mode": mode}}


# ------------------------------------------------------------------------------- Responses


@pytest.mark.parametrize("mode", MODES)
async def test_responses_create_stream_in_every_mode(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "responses"})
    stream = await openai_client(proxy).responses.create(model="m", input="Who was Marie Curie?", stream=True,
                                                         extra_body=extra(mode))
    types, text, factcheck = [], [], []
    async for event in stream:
        types.append(event.type)
        if event.type == "response.output_text.delta":
            text.append(event.delta)
        elif event.type == "response.factcheck":  # the SDK exposes the extension event's fields
            data = event.model_dump()
            ResponseFactcheck.model_validate({key: data[key] for key in ("type", "sequence_number", "factcheck")})
            factcheck.append(data["factcheck"])
    assert "".join(text) == expected(mode)
    assert types[-1] == "response.completed"
    if mode == "off":
        assert factcheck == []
        return
    kinds = [f["type"] for f in factcheck]
    assert kinds.count("summary") == 1 and kinds[-1] == "summary" and kinds.count("sentence") == 3
    assert types[-2] == "response.factcheck"  # the summary, before the terminal event
    bad = next(f["report"] for f in factcheck if f["type"] == "sentence" and "1905" in f["report"]["text"])
    assert bad["verdict"]["label"] == "contradictory"


@pytest.mark.parametrize("mode", MODES)
async def test_responses_stream_helper_gets_the_checked_text(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "responses"})
    async with openai_client(proxy).responses.stream(model="m", input="q", extra_body=extra(mode)) as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == expected(mode)
    assert final.output_text == expected(mode)  # correct mode: the whole texts repeat the corrected one


@pytest.mark.parametrize("mode", MODES)
async def test_responses_non_stream(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "responses"})
    response = await openai_client(proxy).responses.create(model="m", input="q", extra_body=extra(mode))
    assert response.output_text == expected(mode)
    factcheck = (response.model_extra or {}).get("factcheck")
    assert (factcheck is None) == (mode == "off")
    if factcheck is not None:
        assert [r["verdict"]["label"] for r in factcheck["reports"]] == ["attributable", "contradictory",
                                                                         "attributable"]


async def test_responses_errors_are_openai_errors(make_proxy):
    proxy = await make_proxy(**{"upstream.api": "responses"})
    with pytest.raises(BadRequestError) as raised:
        await openai_client(proxy).responses.create(model="m", input="q", extra_body={"factcheck": "loud"})
    assert raised.value.body["param"] == "factcheck.mode"


async def test_responses_correct_mode_text_events_follow_the_protocol(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "responses"})
    stream = await openai_client(proxy).responses.create(model="m", input="q", stream=True, extra_body=extra("correct"))
    deltas = [event.model_dump() async for event in stream if event.type == "response.output_text.delta"]
    assert any("1903" in d["delta"] for d in deltas)
    for delta in deltas:
        ResponseTextDelta.model_validate(delta)


# -------------------------------------------------------------------------------- Messages


@pytest.mark.parametrize("mode", MODES)
async def test_messages_stream_helper_in_every_mode(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "messages"})
    async with anthropic_client(proxy).messages.stream(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "Who was Marie Curie?"}],
        extra_body=extra(mode),
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == expected(mode)
    assert final.content[0].text == expected(mode) and final.stop_reason == "end_turn"


@pytest.mark.parametrize("mode", MODES)
async def test_messages_raw_stream_exposes_the_reports(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "messages"})
    stream = await anthropic_client(proxy).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "q"}], stream=True, extra_body=extra(mode))
    types, factcheck = [], []
    async for event in stream:
        types.append(event.type)
        if event.type == "factcheck":  # the SDK exposes the extension event's fields
            data = event.model_dump()
            factcheck.append(MessagesFactcheck.model_validate({"type": data["type"], "factcheck": data["factcheck"]}).factcheck)
        if mode == "correct" and event.type == "content_block_delta":
            MessagesTextDelta.model_validate(event.model_dump(exclude_none=True))
    assert types[0] == "message_start" and types[-1] == "message_stop"
    if mode == "off":
        assert factcheck == []
    else:
        assert [f.type for f in factcheck] == ["sentence"] * 3 + ["summary"] and types[-2] == "factcheck"


@pytest.mark.parametrize("mode", MODES)
async def test_messages_non_stream(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "messages"})
    message = await anthropic_client(proxy).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "q"}], extra_body=extra(mode))
    assert message.content[0].text == expected(mode)
    factcheck = (message.model_extra or {}).get("factcheck")
    assert (factcheck is None) == (mode == "off")


async def test_messages_errors_are_anthropic_errors(make_proxy):
    proxy = await make_proxy(**{"upstream.api": "messages"})
    with pytest.raises(anthropic.BadRequestError) as raised:
        await anthropic_client(proxy).messages.create(model="m", max_tokens=0, messages=[{"role": "user", "content": "q"}])
    assert AnthropicErrorBody.model_validate(raised.value.body).error.type == "invalid_request_error"
    with pytest.raises(anthropic.InternalServerError) as raised:  # the upstream's own failure, same format
        await anthropic_client(proxy).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}],
                                                      extra_body={"mock": {"text": "x", "error_status": 500}})
    assert AnthropicErrorBody.model_validate(raised.value.body).error.message == "scripted failure 500"


# ------------------------------------------------ the upstream's bytes, and a value split in two


@contextlib.asynccontextmanager
async def canned_proxy(api: str, upstream_bytes: bytes, checker: ScriptedChecker) -> AsyncIterator[str]:
    """The proxy's base URL, in front of an upstream answering ``upstream_bytes``."""
    up_runner, up_port = await start_site(CannedUpstream(upstream_bytes).app(), "127.0.0.1", 0)
    settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{up_port}/v1", "upstream.api": api,
                                "check.checker": "none"})
    runner, port = await start_site(build_app(settings, checker=checker), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
        await up_runner.cleanup()


async def relay(api: str, upstream_bytes: bytes, mode: str) -> bytes:
    """What the proxy sends for an upstream answering ``upstream_bytes`` (as raw bytes)."""
    body = ({"model": "m", "input": "q", "stream": True} if api == "responses" else
            {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "q"}]})
    async with canned_proxy(api, upstream_bytes, ScriptedChecker(FIXES)) as url:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/v1/{api}", json={**body, "factcheck": mode}) as response:
                assert response.status == 200
                return await response.read()


def without_extension_events(raw: bytes, api: str) -> tuple[bytes, list[bytes]]:
    name = b"event: response.factcheck\n" if api == "responses" else b"event: factcheck\n"
    events = [event + b"\n\n" for event in raw.split(b"\n\n") if event]
    return b"".join(e for e in events if not e.startswith(name)), [e for e in events if e.startswith(name)]


SPLIT = ["Marie Curie won the Nobel Prize in Physics in 19", "05. She died in 1934."]
"""The year arrives in two events: a per-event check would never see '1905'."""


@pytest.mark.parametrize("api", ["responses", "messages"])
@pytest.mark.parametrize("mode", ["off", "annotate"])
async def test_upstream_bytes_pass_untouched_and_a_split_value_is_one_sentence(api, mode):
    tool = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    upstream = recorded_stream(api, SPLIT, tool_call=tool)
    relayed = await relay(api, upstream, mode)
    passed, extension = without_extension_events(relayed, api)
    assert passed == upstream  # tool use, usage and the stop reason included, byte for byte
    if mode == "off":
        assert extension == []
        return
    assert len(extension) == 3  # two sentences, then the summary
    assert b'"contradictory"' in extension[0] and b"in 1905." in extension[0]
    assert relayed.endswith(upstream[upstream.rindex(b"event: "):])  # the terminal event last, after the summary


@pytest.mark.parametrize("api", ["responses", "messages"])
async def test_the_grounding_instruction_reaches_an_upstream_of_the_faces_api(make_proxy, api):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": api})
    grounding = {"factcheck": {"mode": "annotate", "grounding_prompt": "Wikipedia"}}
    if api == "responses":
        response = await openai_client(proxy).responses.create(model="m", input="Who was Marie Curie?",
                                                               extra_body=grounding)
        summary = response.model_extra["factcheck"]["summary"]
    else:
        message = await anthropic_client(proxy).messages.create(
            model="m", max_tokens=100, messages=[{"role": "user", "content": "Who was Marie Curie?"}],
            extra_body=grounding)
        summary = message.model_extra["factcheck"]["summary"]
    sent = proxy.upstream.requests[-1]
    assert "attributed to Wikipedia" in json.dumps(sent)
    assert ("input" if api == "responses" else "max_tokens") in sent  # still a body of the upstream's API
    assert summary["grounding_prompt"]["corpus"] == "Wikipedia"


async def test_a_broken_stream_ends_with_the_apis_error_event(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "messages"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        async with anthropic_client(proxy).messages.stream(
            model="m", max_tokens=100, messages=[{"role": "user", "content": "q"}],
            extra_body={"mock": {"text": ANSWER, "fail_after": 5}, "factcheck": "annotate"},
        ) as stream:
            async for _ in stream.text_stream:
                pass
    assert AnthropicErrorBody.model_validate(raised.value.body).error.type == "api_error"


async def test_responses_broken_stream_error_event(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "responses"})
    stream = await openai_client(proxy).responses.create(
        model="m", input="q", stream=True, extra_body={"mock": {"text": ANSWER, "fail_after": 5}, "factcheck": "annotate"})
    errors = [event async for event in stream if event.type == "error"]
    assert len(errors) == 1 and errors[0].code == "disconnect"
    ResponseErrorEvent.model_validate(errors[0].model_dump())


async def test_an_anthropic_upstream_gets_its_own_headers_and_never_the_proxy_key(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES), **{"upstream.api": "messages", "upstream.api_key": "sk-up",
                                                        "server.api_keys": ["proxy-key"]})
    client = anthropic.AsyncAnthropic(base_url=proxy.url.removesuffix("/v1"), api_key="proxy-key", max_retries=0)
    message = await client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": "q"}],
                                           extra_body=extra("off"))
    assert message.content[0].text == ANSWER
    sent = {name.lower(): value for name, value in proxy.upstream.headers[-1].items()}
    assert sent["x-api-key"] == "sk-up" and "authorization" not in sent and sent["anthropic-version"]
    with pytest.raises(anthropic.AuthenticationError) as raised:
        await anthropic.AsyncAnthropic(base_url=proxy.url.removesuffix("/v1"), api_key="wrong", max_retries=0
                                       ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}])
    assert AnthropicErrorBody.model_validate(raised.value.body).error.type == "authentication_error"


async def test_correct_mode_text_goes_to_its_own_block_when_the_reader_is_ahead():
    """Text, a tool call, more text: each block's checked text comes back in its own block,
    though the proxy has read past the tool call while the first block's checks ran."""
    tool = {"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    upstream = recorded_stream("messages", ["Marie Curie won the Nobel Prize ", "in Physics in 1905."], tool_call=tool,
                               then=["She died in 1934."])
    async with canned_proxy("messages", upstream, ScriptedChecker(FIXES, delay=0.2)) as url:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-test", max_retries=0)
        async with client.messages.stream(model="m", max_tokens=9, messages=[{"role": "user", "content": "q"}],
                                          extra_body={"factcheck": "correct"}) as stream:
            message = await stream.get_final_message()
    assert [block.type for block in message.content] == ["text", "tool_use", "text"]
    assert message.content[0].text == "Marie Curie won the Nobel Prize in Physics in 1903."
    assert message.content[1].input == {"q": 1} and message.content[2].text == "She died in 1934."


async def test_correct_mode_responses_text_goes_to_its_own_output_item():
    tool = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    upstream = recorded_stream("responses", ["Marie Curie won the Nobel Prize ", "in Physics in 1905."],
                               tool_call=tool, then=["She died in 1934."])
    async with canned_proxy("responses", upstream, ScriptedChecker(FIXES, delay=0.2)) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
        async with client.responses.stream(model="m", input="q", extra_body={"factcheck": "correct"}) as stream:
            response = await stream.get_final_response()
    assert [item.type for item in response.output] == ["message", "function_call", "message"]
    assert response.output[0].content[0].text == "Marie Curie won the Nobel Prize in Physics in 1903."
    assert response.output[2].content[0].text == "She died in 1934."
