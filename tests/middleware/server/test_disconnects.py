"""Ordinary disconnects are their own outcome (issue 35): a client that goes away before its
answer is complete (a closed tab, a cancelled SDK call) is counted as
``factcheck_http_requests_total{outcome="client_gone"}``, never ``internal``, and never logs
an ERROR traceback, including the race where a write meets the closing transport ('Cannot
write to closing transport') before aiohttp cancels the handler. Loopback only."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from middleware.metrics import HTTP_REQUESTS
from tests.support.checkers import ScriptedChecker

TEXT = " ".join(f"Sentence number {i} is about Paris." for i in range(40))


def counts(endpoint: str) -> dict[str, float]:
    return {outcome: HTTP_REQUESTS.labels(endpoint=endpoint, outcome=outcome)._value.get()
            for outcome in ("ok", "refused", "upstream_error", "client_gone", "internal")}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def body(mode: str, stream: bool = True, **mock: Any) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "q"}],
            "mock": {"text": TEXT, "token_rate": 200, **mock}, "factcheck": {"mode": mode}}


async def settle(endpoint: str, before: dict[str, float]) -> dict[str, float]:
    for _ in range(100):  # the server notices the closed connection on its next event-loop turn
        if delta(before, counts(endpoint)):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    return delta(before, counts(endpoint))


def errors(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_a_client_leaving_mid_stream_is_client_gone_not_internal(make_proxy, caplog, mode):
    proxy = await make_proxy(ScriptedChecker())
    before = counts("chat")
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{proxy.url}/chat/completions", json=body(mode)) as r:
                assert r.status == 200
                await r.content.readany()  # the answer has started
            # leaving the block closes the connection mid-answer
        assert await settle("chat", before) == {"client_gone": 1}
    assert errors(caplog) == []


async def test_a_client_leaving_before_a_non_streamed_answer_is_client_gone(make_proxy, caplog):
    proxy = await make_proxy(ScriptedChecker())
    before = counts("chat")
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as s:
            with pytest.raises(asyncio.TimeoutError):
                async with asyncio.timeout(0.3):
                    await s.post(f"{proxy.url}/chat/completions", json=body("annotate", stream=False, headers_delay=5))
        assert await settle("chat", before) == {"client_gone": 1}
    assert errors(caplog) == []


async def test_a_write_meeting_the_closing_transport_is_quiet_and_client_gone(make_proxy, caplog, monkeypatch):
    """The race behind the 1-in-250 ERROR: the client's connection closes and the handler's
    next write fails before aiohttp has cancelled the handler."""
    proxy = await make_proxy(ScriptedChecker())
    real_write = web.StreamResponse.write
    writes = 0

    async def write(self: web.StreamResponse, data: bytes) -> None:
        nonlocal writes
        request = self._req  # noqa: SLF001 - the test reaches into the response it sabotages
        if request is not None and request.path.endswith("/chat/completions"):
            writes += 1
            if writes == 3 and request.transport is not None:
                request.transport.close()  # closing now; connection_lost (and the cancel) come later
        await real_write(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", write)
    before = counts("chat")
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientError):
                async with s.post(f"{proxy.url}/chat/completions", json=body("annotate")) as r:
                    await r.read()
        assert await settle("chat", before) == {"client_gone": 1}
    assert errors(caplog) == [], errors(caplog)
    assert any("went away" in r.getMessage() for r in caplog.records)


async def test_a_websocket_closed_mid_answer_is_client_gone(make_proxy, caplog):
    proxy = await make_proxy(ScriptedChecker())
    before = counts("ws")
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(f"{proxy.url}/ws") as ws:
                await ws.send_str(json.dumps({"type": "chat", "request": body("annotate")}))
                assert (await asyncio.wait_for(ws.receive_json(), 10))["type"] == "start"
                await ws.receive_json()
        assert await settle("ws", before) == {"client_gone": 1}
    assert errors(caplog) == []


async def test_a_finished_answer_is_still_ok(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    before = counts("chat")
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}/chat/completions", json=body("annotate")) as r:
        assert r.status == 200 and (await r.text()).rstrip().endswith("[DONE]")
    assert await settle("chat", before) == {"ok": 1}


FACE_BODIES = {
    "responses": lambda mode: {"model": "m", "input": "q", "stream": True,
                               "mock": {"text": TEXT, "token_rate": 200}, "factcheck": {"mode": mode}},
    "messages": lambda mode: {"model": "m", "max_tokens": 500, "stream": True, "messages": [{"role": "user", "content": "q"}],
                              "mock": {"text": TEXT, "token_rate": 200}, "factcheck": {"mode": mode}},
}


@pytest.mark.parametrize("face", ["responses", "messages"])
@pytest.mark.parametrize("mode", ["off", "annotate"])
async def test_a_client_leaving_a_typed_event_face_mid_stream_is_client_gone(make_proxy, caplog, face, mode):
    proxy = await make_proxy(ScriptedChecker(), **{"upstream.api": face})
    before = counts(face)
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{proxy.url}/{face}", json=FACE_BODIES[face](mode)) as r:
                assert r.status == 200
                await r.content.readany()
        assert await settle(face, before) == {"client_gone": 1}
    assert errors(caplog) == []
