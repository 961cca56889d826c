"""Secrets are never echoed (issue 35), one test per path: an upstream whose errors echo the
Authorization header it received (misconfigured gateways do) must not hand the server's
upstream key to the client, whether the request streams or not, on /v1/models, over the
websocket, in the middle of a stream, or in the log line of the memory check's closed-book
call; the pipeline's LLM and the search providers' keys stay out of their errors and logs;
a proxy key in a log line is cut out. Loopback only."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.chat_client import ChatClient, LLMError
from adapters.search.brave import BraveSource
from adapters.search.client import HttpClient, RetryPolicy
from middleware.composition import build_app
from middleware.redaction import REDACTED
from middleware.commands.serve import start_site
from middleware.settings import load_settings
from tests.support.checkers import ScriptedChecker

UPSTREAM_KEY = "sk-upstream-echoed-9d3f61ab2c"
CLIENT_KEY = "sk-client-echoed-4a8e0f7b13"
LLM_KEY = "sk-llm-echoed-7c2d9e1f05"
BRAVE_KEY = "brave-echoed-5b7a3c9d1e"
PROXY_KEY = "pk-proxy-logged-2e6f8a0c4d"
TEXT = "The Eiffel Tower is in Paris. It was completed in 1889."


def sse(payload: dict[str, Any] | str) -> bytes:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()


def chunk(content: str) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


class EchoingGateway:
    """A gateway that echoes the Authorization header it received: in a JSON error body (an
    error is asked for by ``"mock": "error"``, and for the closed-book call of the memory
    check: a non-streamed request with only a user message), or inside a streamed event
    (``"mock": "stream_echo"``). Otherwise it answers ``TEXT``."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.app.router.add_post("/v1/messages", self.messages)
        self.app.router.add_get("/v1/models", self.models)

    @staticmethod
    def echo(request: web.Request, status: int = 401) -> web.Response:
        presented = request.headers.get("Authorization", "")
        return web.json_response({"error": {
            "message": f"Incorrect API key provided: {presented}", "type": "invalid_request_error",
            "param": None, "code": "invalid_api_key", "received_headers": {"authorization": presented}}}, status=status)

    async def messages(self, request: web.Request) -> web.Response:
        """An Anthropic-style error echoing the x-api-key received."""
        presented = request.headers.get("x-api-key", "")
        return web.json_response({"type": "error", "error": {
            "type": "authentication_error", "message": f"invalid x-api-key: {presented}"}}, status=401)

    async def models(self, request: web.Request) -> web.Response:
        return self.echo(request, 403)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        mock = body.get("mock")
        closed_book = not body.get("stream") and [m["role"] for m in body["messages"]] == ["user"]
        if mock == "error" or (mock == "memory" and closed_book):
            return self.echo(request)
        if not body.get("stream"):
            return web.json_response({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT},
                                                   "finish_reason": "stop"}]})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if mock == "memory":
            await asyncio.sleep(0.5)  # the closed-book call fails (and is logged) while the stream is open
        if mock == "stream_echo":
            await response.write(sse({"error": {"message": f"gateway saw {request.headers.get('Authorization')}"}}))
        for word in TEXT.split(" "):
            await response.write(sse(chunk(word + " ")))
        await response.write(sse("[DONE]"))
        await response.write_eof()
        return response


@dataclass
class Proxy:
    url: str
    app: web.Application


@pytest.fixture
async def proxy_to_gateway() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []
    gateway_runner, port = await start_site(EchoingGateway().app, "127.0.0.1", 0)
    runners.append(gateway_runner)

    async def make(**overrides: Any) -> Proxy:
        settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{port}/v1", "check.checker": "none",
                                    "check.sentence_budget_s": 2.0, **overrides})
        app = build_app(settings, checker=ScriptedChecker())
        runner, proxy_port = await start_site(app, "127.0.0.1", 0)
        runners.append(runner)
        return Proxy(f"http://127.0.0.1:{proxy_port}/v1", app)

    yield make
    for runner in reversed(runners):
        await runner.cleanup()


def body(mode: str = "annotate", stream: bool = False, mock: str = "error", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Where is the tower?"}],
            "mock": mock, "factcheck": {"mode": mode, **extra}}


async def post(url: str, payload: dict[str, Any], key: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as s, s.post(f"{url}/chat/completions", json=payload, headers=headers) as r:
        return r.status, await r.text()


# --- the upstream's error bodies ----------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_an_upstream_error_echoing_the_upstream_key_is_redacted(proxy_to_gateway, stream, mode):
    proxy = await proxy_to_gateway(**{"upstream.api_key": UPSTREAM_KEY})
    status, text = await post(proxy.url, body(mode, stream=stream))
    assert status == 401
    assert UPSTREAM_KEY not in text
    error = json.loads(text)["error"]
    assert error["message"] == f"Incorrect API key provided: Bearer {REDACTED}"  # the rest of the error stands
    assert error["received_headers"] == {"authorization": f"Bearer {REDACTED}"} and error["code"] == "invalid_api_key"


@pytest.mark.parametrize("configured", [True, False])
async def test_a_messages_upstream_echoing_its_x_api_key_is_redacted(proxy_to_gateway, configured):
    """An Anthropic upstream gets the key as x-api-key: the server's, or the client's own."""
    proxy = await proxy_to_gateway(**{"upstream.api": "messages", **({"upstream.api_key": UPSTREAM_KEY} if configured else {})})
    payload = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "q"}], "factcheck": {"mode": "off"}}
    headers = {} if configured else {"x-api-key": CLIENT_KEY}
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}/messages", json=payload, headers=headers) as r:
        status, text = r.status, await r.text()
    assert status == 401 and UPSTREAM_KEY not in text and CLIENT_KEY not in text and REDACTED in text


async def test_models_error_echoing_the_upstream_key_is_redacted(proxy_to_gateway):
    proxy = await proxy_to_gateway(**{"upstream.api_key": UPSTREAM_KEY})
    async with aiohttp.ClientSession() as s, s.get(f"{proxy.url}/models") as r:
        status, text = r.status, await r.text()
    assert status == 403 and UPSTREAM_KEY not in text and REDACTED in text


async def test_websocket_upstream_error_echoing_the_upstream_key_is_redacted(proxy_to_gateway):
    proxy = await proxy_to_gateway(**{"upstream.api_key": UPSTREAM_KEY})
    async with aiohttp.ClientSession() as s, s.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_json({"type": "chat", "request": body()})
        received = []
        while not received or received[-1].get("type") != "done":
            received.append(await asyncio.wait_for(ws.receive_json(), 10))
    text = json.dumps(received)
    assert UPSTREAM_KEY not in text and REDACTED in text


async def test_the_clients_own_forwarded_key_is_not_echoed_either(proxy_to_gateway):
    proxy = await proxy_to_gateway()  # no upstream key: the client's Authorization travels on
    status, text = await post(proxy.url, body(), key=CLIENT_KEY)
    assert status == 401 and CLIENT_KEY not in text and REDACTED in text


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_a_streamed_event_echoing_the_upstream_key_is_redacted(proxy_to_gateway, mode):
    proxy = await proxy_to_gateway(**{"upstream.api_key": UPSTREAM_KEY})
    status, text = await post(proxy.url, body(mode, stream=True, mock="stream_echo"))
    assert status == 200 and "[DONE]" in text
    assert UPSTREAM_KEY not in text


async def test_the_memory_checks_closed_book_failure_is_logged_without_the_key(proxy_to_gateway, caplog):
    proxy = await proxy_to_gateway(**{"upstream.api_key": UPSTREAM_KEY})
    payload = body("annotate", stream=True, mock="memory", memory_check=True,
                   context=["The Eiffel Tower is in Paris. It was completed in 1889."])
    with caplog.at_level(logging.DEBUG):
        status, text = await post(proxy.url, payload)
    assert status == 200 and UPSTREAM_KEY not in text
    failures = [r for r in caplog.records if "closed-book" in r.getMessage()]
    assert failures, [r.getMessage() for r in caplog.records]  # the call did fail and say so
    formatter = logging.Formatter("%(message)s")
    assert not [r for r in caplog.records if UPSTREAM_KEY in formatter.format(r)]


# --- the pipeline's LLM and the search providers -------------------------------------------------


async def echoing_service() -> tuple[web.AppRunner, str]:
    app = web.Application()

    async def llm(request: web.Request) -> web.Response:
        return EchoingGateway.echo(request)

    async def brave(request: web.Request) -> web.Response:  # a 200 that is not JSON, quoting the key
        return web.Response(text=f"<html>token {request.headers.get('X-Subscription-Token')} is suspended</html>",
                            content_type="text/html")

    app.router.add_post("/v1/chat/completions", llm)
    app.router.add_get("/brave", brave)
    runner, port = await start_site(app, "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{port}"


async def test_the_pipeline_llm_key_echoed_in_an_error_stays_out_of_the_error(caplog):
    runner, base = await echoing_service()
    try:
        async with ChatClient(f"{base}/v1", api_key=LLM_KEY, timeout_s=5) as chat:
            with caplog.at_level(logging.DEBUG), pytest.raises(LLMError) as failed:
                await chat.complete([{"role": "user", "content": "q"}])
            logging.getLogger("middleware.pipeline").warning("LLM failed: %s", failed.value)
    finally:
        await runner.cleanup()
    assert "401" in str(failed.value) and LLM_KEY not in str(failed.value) and REDACTED in str(failed.value)
    assert not [r for r in caplog.records if LLM_KEY in r.getMessage()]


async def test_a_search_providers_key_echoed_in_its_answer_stays_out_of_the_log(caplog):
    runner, base = await echoing_service()
    source = BraveSource(f"{base}/brave", BRAVE_KEY, http=HttpClient("test", RetryPolicy(0, 0.01, 0.01)), timeout_s=5)
    try:
        with caplog.at_level(logging.DEBUG):
            assert await source.search("eiffel tower", 3) == []
    finally:
        await source.aclose()
        await runner.cleanup()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("html" in w for w in warnings), warnings  # it failed and said why
    assert not [w for w in warnings if BRAVE_KEY in w]


async def test_a_proxy_key_in_a_log_line_is_cut_out(proxy_to_gateway, caplog):
    await proxy_to_gateway(**{"server.api_keys": [PROXY_KEY]})  # building the app registers its keys
    with caplog.at_level(logging.INFO):
        logging.getLogger("middleware.server").info("client presented %s", PROXY_KEY)
    assert caplog.records[-1].getMessage() == f"client presented {REDACTED}"
