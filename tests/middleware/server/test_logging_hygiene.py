"""No key and no evidence text is ever logged at INFO or above.

Requests run through the proxy with proxy keys, an upstream key, a client key, a pipeline
whose evidence comes from a (fake) search provider and whose LLM backends call a (fake) LLM
endpoint, along the happy path and the error paths (wrong key, rate limit, upstream errors
before and during the stream, invalid SSE, an LLM endpoint that answers 401 echoing the key
and the prompt). Every log record is captured at DEBUG; none at INFO+ may contain a secret.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.chat_client import ChatClient
from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.searxng import SearxngSource
from middleware.evidence.relevance import RelevanceRanker
from middleware.pipeline.cqgen import LLMQuestionGenerator
from middleware.pipeline.decontext import LLMDecontextualiser, NoDecontextualiser
from middleware.pipeline.factchecker import FactChecker, PipelineParts
from middleware.pipeline.slots import analyse
from middleware.pipeline.verifiers import LLMVerifier
from middleware.commands.serve import start_site

PROXY_KEY = "pk-proxy-5b1d0c9e7f3a"
WRONG_KEY = "pk-wrong-8c2e4a6b0d1f"
UPSTREAM_KEY = "sk-upstream-3f9a7c1e5d2b"
CLIENT_KEY = "sk-client-6e0b2d8f4a9c"
LLM_KEY = "sk-llm-1a7c3e9b5d0f"
EVIDENCE = "Quillfeather Bridge spans the Varn estuary and opened in 1911 after nine years of work."
SECRETS = {"proxy key": PROXY_KEY, "wrong key": WRONG_KEY, "upstream key": UPSTREAM_KEY, "client key": CLIENT_KEY,
           "LLM key": LLM_KEY, "evidence": EVIDENCE, "evidence fragment": "Varn estuary"}
ANSWER = "Quillfeather Bridge opened in 1911. It spans the Varn estuary. It took nine years to build."


class FakeServices:
    """A SearxNG API returning ``EVIDENCE`` and an LLM endpoint that accepts ``LLM_KEY``
    (answering 'Attributable') or answers 401 echoing the presented key and the prompt."""

    def __init__(self) -> None:
        self.searches = 0
        self.llm_calls = 0
        self.app = web.Application()
        self.app.router.add_get("/search", self.search)
        self.app.router.add_post("/v1/chat/completions", self.chat)

    async def search(self, request: web.Request) -> web.Response:
        self.searches += 1
        return web.json_response({"results": [{"url": "https://example.org/bridge", "title": "Bridge",
                                               "content": EVIDENCE}]})

    async def chat(self, request: web.Request) -> web.Response:
        self.llm_calls += 1
        body = await request.json()
        presented = request.headers.get("Authorization", "")
        if presented != f"Bearer {LLM_KEY}" or "fail" in str(body.get("model")):
            prompt = " ".join(m["content"] for m in body["messages"])
            message = f"Incorrect API key provided: {presented.removeprefix('Bearer ')}. Request was: {prompt}"
            return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=401)
        n = int(body.get("n") or 1)
        choices = [{"index": i, "message": {"role": "assistant", "content": "Attributable\nReason: it says so."},
                    "finish_reason": "stop"} for i in range(n)]
        return web.json_response({"id": "x", "object": "chat.completion", "choices": choices})


def llm_pipeline(base_url: str, llm_model: str) -> tuple[FactChecker, SearxngSource, ChatClient]:
    chat = ChatClient(f"{base_url}/v1", api_key=LLM_KEY, model=llm_model, timeout_s=5)
    source = SearxngSource(base_url, http=HttpClient("test", RetryPolicy(0, 0.01, 0.01)), timeout_s=2.0)
    checker = FactChecker(PipelineParts(
        sources=[source], questions=LLMQuestionGenerator(chat, samples=1),
        decontext=LLMDecontextualiser(chat, fallback=NoDecontextualiser()),
        verifier=LLMVerifier(chat), ranker=RelevanceRanker(),
    ))
    return checker, source, chat


async def send(url: str, body: dict[str, Any], key: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=body, headers=headers) as response:
            return response.status, await response.text()


def body(mode: str, stream: bool = True, **mock: Any) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Tell me about the bridge."}],
            "mock": {"text": ANSWER, **mock}, "factcheck": {"mode": mode}}


def leaks(records: list[logging.LogRecord]) -> list[str]:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    found = []
    for record in records:
        if record.levelno < logging.INFO:
            continue
        text = formatter.format(record)  # message, arguments, exception and stack trace
        found += [f"{name} in {record.name}:{record.levelname}: {text[:200]}" for name, secret in SECRETS.items()
                  if secret in text]
    return found


@pytest.mark.parametrize("llm_model", ["good", "fail"])
async def test_no_key_or_evidence_logged_at_info_or_above(make_proxy, caplog, llm_model):
    analyse("Warm up the parser.")
    services = FakeServices()
    runner, port = await start_site(services.app, "127.0.0.1", 0)
    checker, source, chat = llm_pipeline(f"http://127.0.0.1:{port}", llm_model)
    caplog.set_level(logging.DEBUG)
    try:
        keyed = await make_proxy(checker, **{"server.api_keys": [PROXY_KEY], "server.rate_limit_per_minute": 12,
                                             "upstream.api_key": UPSTREAM_KEY, "check.sentence_budget_s": 10.0})
        open_ = await make_proxy(checker, **{"check.sentence_budget_s": 10.0})
        outcomes = [
            await send(keyed.url, body("annotate"), PROXY_KEY),
            await send(keyed.url, body("correct"), PROXY_KEY),
            await send(keyed.url, body("annotate", stream=False), PROXY_KEY),
            await send(keyed.url, body("annotate", invalid_after=3), PROXY_KEY),
            await send(keyed.url, body("annotate", fail_after=6), PROXY_KEY),
            await send(keyed.url, body("annotate", error_status=500), PROXY_KEY),
            await send(keyed.url, body("annotate"), WRONG_KEY),
            await send(keyed.url, body("annotate"), None),
            await send(open_.url, body("annotate"), CLIENT_KEY),
            await send(open_.url, body("correct", error_status=401), CLIENT_KEY),
        ]
        for _ in range(8):  # past the per-key rate limit
            outcomes.append(await send(keyed.url, body("off"), PROXY_KEY))
    finally:
        await source.aclose()
        await chat.close()
        await runner.cleanup()
    statuses = [status for status, _ in outcomes]
    assert statuses[:4] == [200, 200, 200, 200] and statuses[6:8] == [401, 401] and 429 in statuses[10:]
    # the secrets really went through the system (else the test proves nothing)
    assert services.llm_calls
    if llm_model == "good":  # with a failing LLM the checks stop at question generation
        assert services.searches
        assert EVIDENCE in outcomes[0][1] and EVIDENCE in outcomes[8][1]  # evidence reached the client's reports
    assert any(h.get("Authorization") == f"Bearer {UPSTREAM_KEY}" for h in keyed.upstream.headers)
    assert any(h.get("Authorization") == f"Bearer {CLIENT_KEY}" for h in open_.upstream.headers)
    assert any(r.levelno >= logging.WARNING for r in caplog.records)  # error paths did log
    assert leaks(caplog.records) == []
