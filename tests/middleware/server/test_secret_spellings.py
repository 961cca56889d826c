"""Secrets redacted however they are spelt (issue 47): an upstream's 200 answer that echoes
the key it received in its text, written as itself, in ``\\u`` escapes (which a JSON parser
decodes to the key: annotate and correct mode re-serialise what they decode), or split across
two reads of one event, reaches no client of any face (chat completions, Responses, Messages;
stream and non-stream; off, annotate and correct mode), whether the key is the server's
(``upstream.api_key``) or the client's own, forwarded. What the client gets is checked both
as bytes and as what its JSON parser decodes. Loopback only."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from middleware.commands.serve import start_site
from middleware.composition import build_app
from middleware.redaction import REDACTED
from middleware.settings import load_settings
from middleware.translation.completions import translate_answer
from middleware.translation.streams import ChatToMessages, ChatToResponses, encode
from tests.support.checkers import ScriptedChecker

UPSTREAM_KEY = "sk-upstream-spelt-5c1e8a2f7d"
CLIENT_KEY = "sk-client-spelt-0b9d4e6a31"
PATHS = {"chat": "chat/completions", "responses": "responses", "messages": "messages"}


def escaped(key: str) -> str:
    """``key`` with every character as a ``\\u`` escape, hex digits in alternating case."""
    return "".join(f"\\u{ord(c):04x}" if i % 2 else f"\\u{ord(c):04X}" for i, c in enumerate(key))


class SpellingGateway:
    """An upstream of every API that answers "Your key is <the key it received>." with that
    key spelt as ``spelling`` says: ``plain``, ``escaped`` (``\\u`` escapes), ``split``
    (plain, in two writes cut in the middle of the key, some time apart: two reads)."""

    def __init__(self, spelling: str) -> None:
        self.spelling = spelling
        self.app = web.Application()
        for api, path in PATHS.items():
            self.app.router.add_post(f"/v1/{path}", self.answer(api))

    def answer(self, api: str) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            key = request.headers.get("x-api-key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
            text = f"Your key is {key}. Keep it safe."
            data = stream_bytes(api, text) if body.get("stream") else answer_bytes(api, text)
            if self.spelling == "escaped":
                data = data.replace(key.encode(), escaped(key).encode())
            content_type = "text/event-stream" if body.get("stream") else "application/json"
            response = web.StreamResponse(headers={"Content-Type": content_type})
            await response.prepare(request)
            cut = data.index(key.encode()) + len(key) // 2 if self.spelling == "split" else len(data)
            await response.write(data[:cut])
            if cut < len(data):
                await asyncio.sleep(0.05)
                await response.write(data[cut:])
            await response.write_eof()
            return response
        return handle


def chat_completion(text: str) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def answer_bytes(api: str, text: str) -> bytes:
    return json.dumps(translate_answer(chat_completion(text), "chat", api), ensure_ascii=False).encode()


def stream_bytes(api: str, text: str) -> bytes:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
              for word in re.findall(r"\S+\s*", text)]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if api == "chat":
        return b"".join(encode("chat", chunk) for chunk in chunks) + b"data: [DONE]\n\n"
    writer = ChatToResponses() if api == "responses" else ChatToMessages()
    events = [event for chunk in chunks for event in writer.feed(chunk)] + writer.finish()
    return b"".join(encode(api, event) for event in events)


@pytest.fixture
async def gateway_proxy() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def make(spelling: str, api: str, **overrides: Any) -> str:
        gateway, port = await start_site(SpellingGateway(spelling).app, "127.0.0.1", 0)
        runners.append(gateway)
        settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{port}/v1", "upstream.api": api,
                                    "check.checker": "none", "check.sentence_budget_s": 2.0, **overrides})
        runner, proxy_port = await start_site(build_app(settings, checker=ScriptedChecker()), "127.0.0.1", 0)
        runners.append(runner)
        return f"http://127.0.0.1:{proxy_port}/v1"

    yield make
    for runner in reversed(runners):
        await runner.cleanup()


def request_body(api: str, mode: str, stream: bool) -> dict[str, Any]:
    question = [{"role": "user", "content": "What is my key?"}]
    body: dict[str, Any] = {"model": "m", "stream": stream, "factcheck": {"mode": mode}}
    if api == "responses":
        return {**body, "input": question}
    return {**body, "messages": question, **({"max_tokens": 50} if api == "messages" else {})}


def decoded_strings(value: Any) -> list[str]:
    """Every string a JSON parser hands the client (keys and values, walked)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *decoded_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in decoded_strings(v)]
    return []


def client_view(raw: str, stream: bool) -> list[str]:
    """What the client's JSON parser decodes from the answer (each SSE event's data)."""
    if not stream:
        return decoded_strings(json.loads(raw))
    payloads = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
    return [s for p in payloads if p != "[DONE]" for s in decoded_strings(json.loads(p))]


@pytest.mark.parametrize("spelling", ["plain", "escaped", "split", "client_escaped"])
@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_echoed_key_reaches_no_client_however_it_is_spelt(gateway_proxy, api, stream, mode, spelling):
    """``client_escaped``: no upstream key, the client's own (``Authorization`` or
    ``x-api-key``) is forwarded and comes back in ``\\u`` escapes."""
    own = spelling.startswith("client_")
    key = CLIENT_KEY if own else UPSTREAM_KEY
    url = await gateway_proxy(spelling.removeprefix("client_"), api, **({} if own else {"upstream.api_key": key}))
    headers = ({"x-api-key": key} if api == "messages" else {"Authorization": f"Bearer {key}"}) if own else {}
    async with aiohttp.ClientSession() as s, s.post(f"{url}/{PATHS[api]}", json=request_body(api, mode, stream),
                                                    headers=headers) as r:
        status, raw = r.status, await r.text()
    assert status == 200, raw
    decoded = client_view(raw, stream)
    assert key not in raw and escaped(key) not in raw
    assert not [s for s in decoded if key in s], raw
    assert REDACTED in "".join(decoded), raw  # the answer came through, the key cut out
