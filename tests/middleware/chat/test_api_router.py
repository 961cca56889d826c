"""The proxy end to end on loopback: real openai SDK and LangChain clients, every mode."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from langchain_openai import ChatOpenAI
from openai import APIError, AsyncOpenAI

from tests.support.checkers import ScriptedChecker
from tests.support.sdk_clients import closed_sdk_clients  # noqa: F401 (autouse)

ANSWER = (
    "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905.\n\n"
    "## Later life\n- She founded the Radium Institute.\n- Use `pip install x` to try.\n\n"
    "```python\nprint('not checked. Really.')\n```\nDr. Smith visited the U.S. in 2001... Then he left!"
)
FIXES = {"1905": "1903"}


def mock(text: str = ANSWER, **kw: object) -> dict[str, object]:
    return {"mock": {"text": text, **kw}}


def client(proxy, **headers: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0, default_headers=headers or None)


async def collect(stream) -> tuple[str, list[dict], list]:
    content, factcheck, chunks = [], [], []
    async for chunk in stream:
        chunks.append(chunk)
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
        extra = (chunk.model_extra or {}).get("factcheck")
        if extra:
            factcheck.append(extra)
    return "".join(content), factcheck, chunks


@pytest.mark.parametrize("mode", ["off", "annotate"])
async def test_openai_stream_is_byte_identical(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    stream = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True,
        extra_body={**mock(), "factcheck": {"mode": mode}},
    )
    content, factcheck, _ = await collect(stream)
    assert content == ANSWER
    if mode == "off":
        assert factcheck == []
    else:
        kinds = [f["type"] for f in factcheck]
        assert kinds[-1] == "summary" and kinds.count("summary") == 1
        reports = [f["report"] for f in factcheck if f["type"] == "sentence"]
        texts = [r["text"] for r in reports]
        assert "She won the Nobel Prize in Physics in 1905." in texts
        assert not any("not checked" in t for t in texts)  # fenced code never checked
        for r in reports:
            assert ANSWER[r["start"] : r["end"]] == r["text"]
        bad = next(r for r in reports if "1905" in r["text"])
        assert bad["verdict"]["label"] == "contradictory"
        assert bad["edits"][0]["replacement"] == "1903"


async def test_correct_mode_edits_and_reports_original(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    stream = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True,
        extra_body={**mock(), "factcheck": {"mode": "correct"}},
    )
    content, factcheck, chunks = await collect(stream)
    assert content == ANSWER.replace("1905", "1903")
    summary = factcheck[-1]["summary"]
    assert summary["edits"][0]["original"] == "1905"
    assert chunks[-2].choices[0].finish_reason == "stop" or any(c.choices and c.choices[0].finish_reason for c in chunks)


async def test_header_selects_mode_and_usage_still_works(make_proxy):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    stream = await client(proxy, **{"X-Factcheck-Mode": "correct"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True,
        stream_options={"include_usage": True}, extra_body=mock(),
    )
    content, factcheck, chunks = await collect(stream)
    assert "1903" in content and "1905" not in content
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].completion_tokens > 0


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_openai_non_stream(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    completion = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], extra_body={**mock(), "factcheck": mode},
    )
    content = completion.choices[0].message.content
    factcheck = (completion.model_extra or {}).get("factcheck")
    if mode == "correct":
        assert content == ANSWER.replace("1905", "1903")
        assert factcheck["summary"]["edits"][0]["original"] == "1905"
    else:
        assert content == ANSWER
        assert (factcheck is None) == (mode == "off")


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_langchain_chat_openai(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker(FIXES))
    llm = ChatOpenAI(
        base_url=proxy.url, api_key="sk-test", model="m", max_retries=0,
        extra_body={**mock(), "factcheck": {"mode": mode}},
    )
    expected = ANSWER.replace("1905", "1903") if mode == "correct" else ANSWER
    streamed = "".join([chunk.content async for chunk in llm.astream("q")])
    assert streamed == expected
    message = await llm.ainvoke("q")
    assert message.content == expected


async def test_unknown_fields_forwarded_and_factcheck_stripped(make_proxy):
    proxy = await make_proxy()
    body = {
        "model": "m", "messages": [{"role": "user", "content": "q"}], "temperature": 0.3, "n": 1,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "response_format": {"type": "text"}, "seed": 7, "factcheck": {"mode": "annotate"}, **mock("Hi there."),
    }
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{proxy.url}/chat/completions", json=body, headers={"Authorization": "Bearer sk-client"}) as r:
            assert r.status == 200
    received = proxy.upstream.requests[-1]
    expected = {k: v for k, v in body.items() if k != "factcheck"}
    assert received == expected
    assert proxy.upstream.headers[-1]["Authorization"] == "Bearer sk-client"


async def test_upstream_key_replaces_client_authorization(make_proxy):
    proxy = await make_proxy(**{"upstream.api_key": "sk-upstream"})
    async with aiohttp.ClientSession() as s:
        body = {"model": "m", "messages": [{"role": "user", "content": "q"}], **mock("Hi.")}
        async with s.post(f"{proxy.url}/chat/completions", json=body, headers={"Authorization": "Bearer sk-c"}) as r:
            assert r.status == 200
        async with s.get(f"{proxy.url}/models") as r:
            assert r.status == 200
            assert (await r.json())["data"][0]["id"]
    assert proxy.upstream.headers[0]["Authorization"] == "Bearer sk-upstream"


@pytest.mark.parametrize(
    ("raw", "headers", "status", "code"),
    [
        (b"{not json", {}, 400, "invalid_json"),
        (b"[1, 2]", {}, 400, "invalid_request"),
        (json.dumps({"model": "m", "messages": "hello"}).encode(), {}, 400, "invalid_value"),
        (json.dumps({"model": "m", "messages": []}).encode(), {}, 400, "invalid_value"),
        (json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": "yes"}).encode(),
         {}, 400, "invalid_value"),
        (json.dumps({"messages": [{"role": "user", "content": "q"}], "factcheck": {"mode": "loud"}}).encode(),
         {}, 400, "invalid_value"),
        (json.dumps({"messages": [{"role": "user", "content": "q"}]}).encode(), {"X-Factcheck-Mode": "loud"},
         400, "invalid_mode"),
        (json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}).encode(), {}, 413, "body_too_large"),
    ],
)
async def test_bad_requests_get_openai_errors(make_proxy, raw, headers, status, code):
    proxy = await make_proxy(**{"server.max_body_bytes": 4096})
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{proxy.url}/chat/completions", data=raw,
                          headers={"Content-Type": "application/json", **headers}) as r:
            assert r.status == status
            body = await r.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == code and body["error"]["message"]


@pytest.mark.parametrize("status", [500, 429, 401])
async def test_upstream_errors_keep_status_and_body(make_proxy, status):
    proxy = await make_proxy()
    with pytest.raises(APIError) as info:
        await client(proxy).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], stream=True,
            extra_body=mock(error_status=status),
        )
    assert info.value.status_code == status  # type: ignore[attr-defined]
    assert "scripted failure" in info.value.message


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_upstream_failure_mid_stream_ends_with_error_event(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker())
    stream = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True,
        extra_body={**mock(fail_after=12), "factcheck": mode},
    )
    received = []
    with pytest.raises(APIError):
        async for chunk in stream:
            received.extend(c.delta.content or "" for c in chunk.choices)
    assert ANSWER.startswith("".join(received))  # nothing received was altered


async def test_upstream_hang_times_out_with_error_event(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"upstream.read_timeout_s": 0.5})
    stream = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True, extra_body=mock(hang_after=5),
    )
    with pytest.raises(APIError, match="timeout"):
        async for _ in stream:
            pass


async def test_budget_expiry_reports_unverified_timeout(make_proxy):
    proxy = await make_proxy(ScriptedChecker(delay=5.0), **{"check.sentence_budget_s": 0.2})
    stream = await client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True,
        extra_body={**mock("Paris is in France. Rome is in Italy."), "factcheck": "correct"},
    )
    content, factcheck, _ = await collect(stream)
    assert content == "Paris is in France. Rome is in Italy."
    reports = [f["report"] for f in factcheck if f["type"] == "sentence"]
    assert [r["verdict"]["label"] for r in reports] == ["unverified", "unverified"]
    assert all(r["verdict"]["reason"] == "timeout" for r in reports)


async def test_client_disconnect_cancels_upstream_and_checks(make_proxy):
    checker = ScriptedChecker(delay=30.0)
    proxy = await make_proxy(checker, **{"check.sentence_budget_s": 60})
    text = " ".join(f"Sentence number {i} is here." for i in range(200))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}],
            **mock(text, token_rate=200)}
    before = {t for t in asyncio.all_tasks()}
    async with aiohttp.ClientSession() as s:
        response = await s.post(f"{proxy.url}/chat/completions", json=body)
        await response.content.readuntil(b"\n\n")
        while checker.running == 0:
            await asyncio.sleep(0.01)
        response.close()
    for _ in range(200):
        await asyncio.sleep(0.02)
        if checker.running == 0:
            break
    assert checker.running == 0 and checker.cancelled >= 1
    await asyncio.sleep(0.1)
    left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    names = [t.get_name() for t in left]
    assert not any(n.startswith("check-") for n in names), names


async def test_health_and_metrics(make_proxy):
    proxy = await make_proxy()
    base = proxy.url.removesuffix("/v1")
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/healthz") as r:
            assert (await r.json()) == {"status": "ok"}
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}], **mock("A b c. D e.")}
        async with s.post(f"{proxy.url}/chat/completions", json=body) as r:
            await r.read()
        async with s.get(f"{base}/metrics") as r:
            text = await r.text()
    for name in ("factcheck_stage_latency_seconds", "factcheck_time_to_first_token_seconds",
                 "factcheck_added_latency_seconds", "factcheck_sentences_total", "factcheck_active_streams",
                 "factcheck_upstream_errors_total"):
        assert name in text
