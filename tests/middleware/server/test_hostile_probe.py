"""The faults a hostile probe found (issue 23), each pinned by a test: every stream in every
mode ends with ``[DONE]`` or an OpenAI-style error event, nothing received is lost, bad input
gets a 400, limits hold, nothing private leaks. Loopback only, scripted upstreams."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.demo_upstream import tokenize
from middleware.chat.api_router import SERVICE_KEY
from middleware.commands.serve import start_site
from middleware.sse import SSEEvent, SSEParser, delta_content, json_payloads
from middleware.types import CheckContext, Mode, Passage, Sentence, SentenceReport, StreamSummary
from tests.support.checkers import ScriptedChecker, TokenizingChecker, ws_answer
from tests.support.streams import sized_stream

TEXT = "The Eiffel Tower is in Paris. It was completed in 1889. Marie Curie was born in Warsaw in 1867."
MODES = ["off", "annotate", "correct"]


def chat_body(text: str = TEXT, mode: str = "annotate", stream: bool = True, **mock: Any) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Tell me about Paris."}],
            "mock": {"text": text, **mock}, "factcheck": {"mode": mode}}


async def read_stream(url: str, body: dict[str, Any] | bytes, timeout: float = 60) -> tuple[int, list[SSEEvent], bool]:
    """Status, every SSE event received, and whether the body ended properly (not truncated)."""
    parser, events, complete = SSEParser(), [], True
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with aiohttp.ClientSession() as session, asyncio.timeout(timeout):
        async with session.post(f"{url}/chat/completions", data=data,
                                headers={"Content-Type": "application/json"}) as response:
            try:
                async for chunk in response.content.iter_any():
                    events += parser.feed(chunk)
            except aiohttp.ClientPayloadError:
                complete = False
            return response.status, events + parser.flush(), complete


def reports_of(events: list[SSEEvent]) -> list[dict[str, Any]]:
    return [c["factcheck"]["report"] for c in json_payloads(events) if (c.get("factcheck") or {}).get("type") == "sentence"]


def ends_with_error(events: list[SSEEvent]) -> dict[str, Any]:
    """The stream's last event is an OpenAI error object; return it."""
    last = events[-1].json()
    assert set(last) == {"error"} and {"message", "type", "code"} <= set(last["error"]), last
    return last["error"]


async def post_json(url: str, body: dict[str, Any] | bytes, path: str = "/chat/completions",
                    **headers: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}{path}", data=data, headers={"Content-Type": "application/json", **headers}) as r:
            return r.status, await r.json(content_type=None), dict(r.headers)


# --- 2: correct mode must not lose text when the upstream fails mid-stream ----------------------


@pytest.mark.parametrize("fail_after", [6, 12])
async def test_correct_mode_flushes_held_text_and_reports_then_an_error_event(make_proxy, caplog, fail_after):
    proxy = await make_proxy(ScriptedChecker())
    with caplog.at_level(logging.INFO):
        status, events, complete = await read_stream(proxy.url, chat_body(mode="correct", fail_after=fail_after))
    assert status == 200 and complete  # a properly ended body, not a truncated one
    assert delta_content(events) == "".join(tokenize(TEXT)[:fail_after])  # everything the upstream sent arrived
    assert reports_of(events)  # the held text was checked before it went out
    assert ends_with_error(events)["type"] == "upstream_error"
    assert "client went away" not in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_every_mode_ends_a_failed_upstream_with_an_error_event(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker())
    status, events, complete = await read_stream(proxy.url, chat_body(mode=mode, fail_after=9))
    assert status == 200 and complete
    assert delta_content(events) == "".join(tokenize(TEXT)[:9])
    assert ends_with_error(events)["code"] == "disconnect"


# --- 3: an oversized upstream event ends the stream with an error in every mode -----------------


@pytest.mark.parametrize("mode", MODES)
async def test_oversized_upstream_event_ends_the_stream_with_an_error(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(), **{"upstream.max_event_bytes": 256 * 1024})
    status, events, complete = await read_stream(
        proxy.url, chat_body(mode=mode, big_event_after=3, big_event_bytes=512 * 1024), timeout=30)
    assert status == 200 and complete
    error = ends_with_error(events)
    assert error["code"] == "event_too_large" and "262144" in error["message"]
    assert delta_content(events) == "".join(tokenize(TEXT)[:3])  # whole events before it, unaltered


# --- 4: invalid Unicode ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [True, False])
async def test_lone_surrogate_in_the_request_is_a_400(make_proxy, mode, stream):
    proxy = await make_proxy(ScriptedChecker())
    body = chat_body(mode=mode, stream=stream)
    body["factcheck"]["context"] = ["Paris is the capital of France. \ud800 It is big."]
    raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as the escape \ud800
    assert b"\\ud800" in raw
    status, payload, _ = await post_json(proxy.url, raw)
    assert status == 400 and payload["error"]["code"] == "invalid_unicode"
    assert "factcheck.context" in payload["error"]["param"]
    assert proxy.upstream.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_lone_surrogate_from_the_upstream_does_not_cut_the_stream(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker())
    status, events, complete = await read_stream(proxy.url, chat_body(mode=mode, surrogate_after=4))
    assert status == 200 and complete and events[-1].is_done
    assert not any("error" in c for c in json_payloads(events))
    content = delta_content(events)
    expected = "".join(tokenize(TEXT)[:4]) + "{}" + "".join(tokenize(TEXT)[4:])
    if mode == "correct":  # the proxy re-encodes content: the surrogate becomes U+FFFD
        assert content == expected.format("\ufffd")
        assert len(reports_of(events)) == 3
    else:  # the upstream's bytes, unchanged
        assert content == expected.format("\ud800")


# --- 5: malformed content parts ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("part", [{"type": "text", "text": 5}, {"type": "text", "text": None}, {"type": "text"},
                                  "just a string", {"text": "no type"}])
async def test_malformed_content_part_is_a_400(make_proxy, mode, part):
    proxy = await make_proxy(ScriptedChecker())
    body = chat_body(mode=mode)
    body["messages"] = [{"role": "system", "content": [part]}, {"role": "user", "content": "q"}]
    status, payload, _ = await post_json(proxy.url, body)
    assert status == 400, payload
    assert payload["error"]["code"] == "invalid_value" and payload["error"]["param"].startswith("messages.0.content")
    assert proxy.upstream.requests == []


async def test_well_formed_content_parts_still_pass(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    body = chat_body(mode="annotate", stream=False)
    body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "q"},
                                                     {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]
    status, payload, _ = await post_json(proxy.url, body)
    assert status == 200 and payload["choices"][0]["message"]["content"] == TEXT
    assert proxy.upstream.requests[0]["messages"] == body["messages"]  # forwarded unchanged


# --- 7: limits ---------------------------------------------------------------------------------


async def test_stream_slot_is_taken_before_the_upstream_answers(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.max_concurrent_streams": 2,
                                                   "upstream.read_timeout_s": 2.0})
    body = chat_body(mode="off", headers_delay=30)
    results = await asyncio.gather(*(post_json(proxy.url, body) for _ in range(8)))
    statuses = sorted(status for status, _, _ in results)
    assert statuses.count(429) == 6 and statuses.count(504) == 2, statuses
    refused = next(payload for status, payload, _ in results if status == 429)
    assert refused["error"]["code"] == "too_many_streams"
    assert all(headers.get("Retry-After") == "1" for status, _, headers in results if status == 429)


async def test_rate_limit_by_client_address_without_keys(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.rate_limit_per_minute": 3})
    statuses = [(await post_json(proxy.url, chat_body(stream=False)))[0] for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    status, payload, headers = await post_json(proxy.url, chat_body(stream=False))
    assert payload["error"]["code"] == "rate_limited" and int(headers["Retry-After"]) >= 1


# --- 6: websocket ------------------------------------------------------------------------------


def ws_chat(mode: str = "annotate", **mock: Any) -> dict[str, Any]:
    return {"type": "chat", "request": {"model": "m", "messages": [{"role": "user", "content": "q"}],
                                        "mock": {"text": TEXT, **mock}, "factcheck": {"mode": mode}}}


async def test_ws_deeply_nested_message_gets_an_error_and_the_socket_stays(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    async with aiohttp.ClientSession() as s, s.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_str("[" * 10_000 + "]" * 10_000)
        error = (await asyncio.wait_for(ws.receive_json(), 10))["error"]
        assert error["code"] == "invalid_json" and "deep" in error["message"]
        deep = {"type": "chat", "request": {"model": "m", "messages": [{"role": "user", "content": "q"}]}}
        nested: Any = 1
        for _ in range(200):  # parses, but deeper than server.max_json_depth
            nested = [nested]
        deep["request"]["extra"] = nested
        await ws.send_json(deep)
        error = (await asyncio.wait_for(ws.receive_json(), 10))["error"]
        assert error["code"] == "invalid_json" and "64 levels" in error["message"]
        messages = await ws_answer(ws, ws_chat())  # the socket still serves
        assert messages[0]["type"] == "start" and content_of_ws(messages) == TEXT


def content_of_ws(messages: list[dict[str, Any]]) -> str:
    return "".join((choice.get("delta") or {}).get("content") or ""
                   for m in messages if m.get("object") == "chat.completion.chunk" for choice in m["choices"])


async def test_ws_messages_count_against_the_rate_limit(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.api_keys": ["key-a"], "server.rate_limit_per_minute": 3})
    auth = {"Authorization": "Bearer key-a"}
    async with aiohttp.ClientSession() as s, s.ws_connect(f"{proxy.url}/ws", headers=auth) as ws:  # 1 of 3
        assert (await ws_answer(ws, ws_chat()))[0]["type"] == "start"  # 2 of 3
        assert (await ws_answer(ws, ws_chat()))[0]["type"] == "start"  # 3 of 3
        refused = await ws_answer(ws, ws_chat())
        assert refused[0]["error"]["code"] == "rate_limited" and refused[-1] == {"type": "done"}
    status, payload, _ = await post_json(proxy.url, chat_body(stream=False), **auth)  # the same bucket
    assert status == 429


async def test_ws_origin_is_checked(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.ws_allowed_origins": ["https://app.example"]})
    host = proxy.url.removeprefix("http://").removesuffix("/v1")
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await s.ws_connect(f"{proxy.url}/ws", headers={"Origin": "https://evil.example"})
        assert refused.value.status == 403
        for origin in ("https://app.example", f"http://{host}", None):  # allowed, same origin, no browser
            headers = {"Origin": origin} if origin else {}
            async with s.ws_connect(f"{proxy.url}/ws", headers=headers) as ws:
                assert (await ws_answer(ws, ws_chat()))[0]["type"] == "start"


# --- 9: what leaks to clients -------------------------------------------------------------------


async def test_upstream_redirects_are_not_followed(make_proxy):
    secret = web.Application()
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"secret": "internal admin page"})

    secret.router.add_route("*", "/{tail:.*}", handler)
    runner, port = await start_site(secret, "127.0.0.1", 0)
    try:
        proxy = await make_proxy(ScriptedChecker())
        for stream in (True, False):
            body = chat_body(stream=stream, redirect_to=f"http://127.0.0.1:{port}/admin")
            status, payload, _ = await post_json(proxy.url, body)
            assert status == 502 and payload["error"]["code"] == "redirect", payload
            assert "secret" not in json.dumps(payload)
    finally:
        await runner.cleanup()
    assert hits == []


async def test_non_json_upstream_error_body_is_summarised_not_echoed(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    body = chat_body(error_status=500, error_text="Traceback: /srv/app/secrets.py line 3, DB_PASSWORD=hunter2")
    status, payload, _ = await post_json(proxy.url, body)
    assert status == 500
    assert "hunter2" not in json.dumps(payload) and "Traceback" not in json.dumps(payload)
    assert "HTTP 500" in payload["error"]["message"]


# --- 12: summarizer timeouts -------------------------------------------------------------------


class SlowSummaryChecker(ScriptedChecker):
    async def summarize(self, reports: list[SentenceReport], mode: Mode) -> StreamSummary:
        await asyncio.sleep(30)
        raise AssertionError("never reached")


async def test_summarizer_timeouts_are_one_warning_with_a_count(make_proxy, caplog):
    proxy = await make_proxy(SlowSummaryChecker(), **{"check.sentence_budget_s": 0.2})
    with caplog.at_level(logging.INFO, logger="middleware"):
        results = await asyncio.gather(*(read_stream(proxy.url, chat_body()) for _ in range(4)))
    for status, events, _ in results:
        assert status == 200 and events[-1].is_done
        assert json_payloads(events)[-1]["factcheck"]["summary"]["sentences"] == 3  # the basic summary went out
    timeouts = [r for r in caplog.records if "summar" in r.getMessage()]
    assert [r.levelno for r in timeouts] == [logging.WARNING], [r.getMessage() for r in timeouts]
    assert "1 " in timeouts[0].getMessage() and timeouts[0].exc_info is None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert proxy.app[SERVICE_KEY].runner.summary_timeouts == 4


# --- 1: one client's huge context does not stall everyone ----------------------------------------


async def test_healthz_stays_fast_while_a_huge_context_is_checked(make_proxy):
    checker = TokenizingChecker()
    proxy = await make_proxy(checker, **{"check.sentence_budget_s": 30.0})
    body = chat_body(mode="annotate")
    body["factcheck"]["context"] = ["x" * 390_000]  # no spaces: the worst case for a tokenizer
    health = proxy.url.removesuffix("/v1") + "/healthz"
    worst = 0.0
    async with aiohttp.ClientSession() as s:
        task = asyncio.create_task(read_stream(proxy.url, body))
        while not task.done():
            t0 = time.perf_counter()
            async with s.get(health) as r:
                assert r.status == 200
            worst = max(worst, time.perf_counter() - t0)
            await asyncio.sleep(0.01)
    status, events, _ = task.result()
    assert status == 200 and events[-1].is_done and checker.encoded > 0
    assert worst < 0.5, worst
    assert threading.get_ident() not in checker.tokenizer.threads  # tokenised in a worker thread, not on the loop


async def test_context_past_the_cap_is_a_400(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.max_context_chars": 1000})
    body = chat_body(mode="annotate")
    body["factcheck"]["context"] = ["y" * 1001]
    status, payload, _ = await post_json(proxy.url, body)
    assert status == 400 and payload["error"]["code"] == "context_too_large"
    body["stream"], body["factcheck"]["mode"] = False, "off"  # off mode reads no context
    assert (await post_json(proxy.url, body))[0] == 200


def test_tokenizer_cost_is_bounded_whatever_the_text_length():
    tokenizer = TokenizingChecker().tokenizer
    t0 = time.perf_counter()
    [long] = tokenizer.encode(["word " * 200_000])
    assert time.perf_counter() - t0 < 0.2
    [short] = tokenizer.encode(["word " * 300])
    assert long.ids == short.ids and len(long.ids) == 256  # the same truncated tokens


# --- 8 and 9: reports reference evidence by id; sources by name ----------------------------------


class EvidenceChecker(ScriptedChecker):
    """Reports every sentence attributable to the request's first five context passages and
    to one local-index passage (whose source is a server path, as the index stores it)."""

    INDEX = Passage(id="ix-1", text="Paris is the capital of France.", provider="index",
                    source="/srv/factcheck/corpus/geo/france.md#L4")

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        return report.model_copy(update={"evidence": [*context.request_passages[:5], self.INDEX]})

    async def summarize(self, reports: list[SentenceReport], mode: Mode) -> StreamSummary:
        evidence = [p for r in reports for p in r.evidence][:5]
        return StreamSummary(sentences=len(reports), verdicts={}, attribution_report=evidence, mode=mode)


def big_context() -> str:
    """About 100 KB in 20 sentences."""
    return " ".join(f"Fact {i} says that " + "lorem ipsum dolor sit amet " * 185 + "ends here." for i in range(20))


@pytest.mark.parametrize("mode", ["annotate", "correct"])
async def test_response_size_is_bounded_by_the_request_size(make_proxy, mode):
    proxy = await make_proxy(EvidenceChecker())
    answer = " ".join(f"Sentence {i} is about Paris." for i in range(10))
    body = chat_body(answer, mode=mode)
    body["factcheck"]["context"] = [big_context()]
    raw = json.dumps(body).encode()
    size, events = await sized_stream(proxy.url, raw)
    reports = reports_of(events)
    assert len(reports) == 10 and events[-1].is_done
    assert size < 1.5 * len(raw), (size, len(raw))  # was 10 x: each report repeated five 20 KB passages
    texts: dict[tuple[str, str], str] = {}
    summary = json_payloads(events)[-1]["factcheck"]["summary"]
    for passage in [p for r in reports for p in r["evidence"]] + summary["attribution_report"]:
        key = (passage["provider"], passage["id"])
        if "text" in passage:
            assert key not in texts  # each text once
            texts[key] = passage["text"]
        else:
            assert key in texts  # a reference to a passage already received
    assert len(texts) == 6 and all(texts.values())


async def test_non_stream_reports_reference_evidence_by_id_and_show_no_server_paths(make_proxy):
    proxy = await make_proxy(EvidenceChecker())
    body = chat_body(" ".join(f"Sentence {i} is about Paris." for i in range(4)), stream=False)
    body["factcheck"]["context"] = ["Paris is in France. It is large. It has a tower. It has a river."]
    status, payload, _ = await post_json(proxy.url, body)
    assert status == 200
    reports = payload["factcheck"]["reports"]
    evidence = [p for r in reports for p in r["evidence"]]
    assert sum("text" in p for p in evidence) == 2 and len(evidence) == 8
    assert "/srv/" not in json.dumps(payload)
    assert {p["source"] for p in evidence} == {"factcheck.context[0]", "france.md#L4"}
