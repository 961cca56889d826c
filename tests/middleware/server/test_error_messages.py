"""Error messages name what the client can act on (issue 35): never the upstream's internal
address, never the interpreter's own wording (``sys.set_int_max_str_digits()``, codec names).
Loopback only."""

from __future__ import annotations

import asyncio
import json
import re
import socket

import aiohttp
import pytest

from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.settings import load_settings
from tests.support.checkers import ScriptedChecker

INTERNALS = ("sys.", "set_int_max_str_digits", "codec", "Traceback", "Error(", "ssl:default", "Connect call")


async def post(url: str, data: bytes) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/chat/completions", data=data, headers={"Content-Type": "application/json"}) as r:
            return r.status, await r.json(content_type=None)


@pytest.mark.parametrize(("raw", "says"), [
    (b'{"model": "m", "messages": [], "n": ' + b"9" * 5000 + b"}", "too many digits"),
    (b'{"model": "m", "messages": [{"role": "user", "content": "caf\xff"}]}', "not UTF-8 text (byte 60"),
    (b'{"model": "m", "messages": [}', "at line 1, column 29"),
])
async def test_a_bad_body_is_described_in_the_clients_terms(make_proxy, raw, says):
    proxy = await make_proxy(ScriptedChecker())
    status, payload = await post(proxy.url, raw)
    message = payload["error"]["message"]
    assert status == 400 and payload["error"]["code"] == "invalid_json"
    assert says in message and not [w for w in INTERNALS if w in message], message


async def test_an_unreachable_upstream_is_a_502_without_its_address(make_proxy):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the block ends
    settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{port}/v1", "check.checker": "none"})
    runner, proxy_port = await start_site(build_app(settings, checker=ScriptedChecker()), "127.0.0.1", 0)
    try:
        for stream in (False, True):
            body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "q"}]}
            status, payload = await post(f"http://127.0.0.1:{proxy_port}/v1", json.dumps(body).encode())
            message = payload["error"]["message"]
            assert status == 502 and payload["error"]["code"] == "connect"
            assert "127.0.0.1" not in message and str(port) not in message and "refused" in message, message
    finally:
        await runner.cleanup()


async def test_a_stream_cut_by_the_upstream_says_so_without_internals(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}],
            "mock": {"text": "One two three four five six.", "fail_after": 3}, "factcheck": {"mode": "annotate"}}
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}/chat/completions", json=body) as r:
        text = await r.text()
    last = json.loads([line for line in text.splitlines() if line.startswith("data: {")][-1][6:])
    message = last["error"]["message"]
    assert last["error"]["code"] == "disconnect" and "127.0.0.1" not in message
    assert not [w for w in INTERNALS if w in message], message


JSON_MODULE_WORDING = ("Expecting", "delimiter", "Unterminated", "Extra data", "Invalid control character",
                       "enclosed in double quotes", "Invalid \\escape", "(char ")


@pytest.mark.parametrize("raw", [
    b'{"model": "m", "messages": [}', b'{"model" "m"}', b'{"model": "m" "stream": true}', b"{model: 1}",
    b'{"model": "m', b'{"model": "a\x01"}', b'{"model": "\\q"}', b"{} {}",
])
@pytest.mark.parametrize("path", ["chat/completions", "responses", "messages"])
async def test_a_syntax_error_is_told_in_the_proxys_words_not_the_json_modules(make_proxy, path, raw):
    """Before: "Expecting value at line 1, column 29" (docs/privacy.md promises otherwise)."""
    proxy = await make_proxy(ScriptedChecker())
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}/{path}", data=raw,
                                                    headers={"Content-Type": "application/json"}) as r:
        status, payload = r.status, await r.json(content_type=None)
    message = payload["error"]["message"]
    assert status == 400 and re.search(r"not valid JSON: [a-z].* at line 1, column \d+$", message), message
    assert not [w for w in JSON_MODULE_WORDING if w in message], message


async def test_a_websocket_message_that_is_not_json_is_told_in_the_proxys_words(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    async with aiohttp.ClientSession() as s, s.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_str('{"type": "chat", "request": }')
        message = (await asyncio.wait_for(ws.receive_json(), 10))["error"]["message"]
    assert message == "message is not valid JSON: a value is missing or malformed at line 1, column 29"
    assert not [w for w in JSON_MODULE_WORDING if w in message], message
