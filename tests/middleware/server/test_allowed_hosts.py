"""Allowed hosts (issue 47, item 4): every endpoint answers only the Host values of
``server.allowed_hosts`` (by default the address it listens on and loopback's names), and a
websocket's Origin must name an allowed host: a DNS-rebinding page (Host and Origin both
``evil.example``) is refused before any work. Loopback only."""

from __future__ import annotations

import aiohttp
import pytest

from middleware.chat.hosts import AllowedHosts, split_authority
from middleware.settings import ServerSettings
from tests.support.checkers import ScriptedChecker, ws_answer

CHAT = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "q"}], "mock": {"text": "Hi."}}
WS_CHAT = {"type": "chat", "request": {"model": "m", "messages": [{"role": "user", "content": "q"}],
                                       "mock": {"text": "Hi."}, "factcheck": {"mode": "off"}}}


def port_of(url: str) -> int:
    return int(url.removeprefix("http://").removesuffix("/v1").split(":")[1])


@pytest.mark.parametrize(("path", "shape"), [("/chat/completions", "openai"), ("/messages", "anthropic"),
                                             ("/responses", "openai")])
async def test_a_foreign_host_is_refused_before_any_work(make_proxy, path, shape):
    proxy = await make_proxy(ScriptedChecker())
    body = {**CHAT, "max_tokens": 16} if path == "/messages" else CHAT
    async with aiohttp.ClientSession() as s, s.post(f"{proxy.url}{path}", json=body,
                                                    headers={"Host": f"evil.example:{port_of(proxy.url)}"}) as r:
        payload = await r.json()
    assert r.status == 400
    error = payload["error"]
    assert error["type"] == "invalid_request_error"
    if shape == "openai":
        assert error["code"] == "host_not_allowed" and error["param"] == "Host"
    else:
        assert payload["type"] == "error"
    assert proxy.upstream.requests == []


async def test_the_default_hosts_are_answered(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    port = port_of(proxy.url)
    async with aiohttp.ClientSession() as s:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            async with s.get(proxy.url.removesuffix("/v1") + "/healthz", headers={"Host": host}) as r:
                assert r.status == 200, host
        async with s.get(proxy.url.removesuffix("/v1") + "/healthz", headers={"Host": "evil.example"}) as r:
            assert r.status == 400


async def test_configured_hosts_replace_the_default(make_proxy):
    proxy = await make_proxy(ScriptedChecker(), **{"server.allowed_hosts": ["proxy.example.org", ".corp.example"]})
    async with aiohttp.ClientSession() as s:
        for host, status in (("proxy.example.org", 200), ("a.corp.example:443", 200), ("127.0.0.1", 400),
                             ("example.org", 400)):
            async with s.post(f"{proxy.url}/chat/completions", json=CHAT, headers={"Host": host}) as r:
                assert r.status == status, host


async def test_a_dns_rebinding_page_cannot_open_the_websocket(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    port = port_of(proxy.url)
    rebinding = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:  # before: accepted (Origin matched Host)
            await s.ws_connect(f"{proxy.url}/ws", headers=rebinding)
        assert refused.value.status == 400
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:  # an allowed Host, a foreign page
            await s.ws_connect(f"{proxy.url}/ws", headers={"Origin": f"http://evil.example:{port}"})
        assert refused.value.status == 403
        for origin in (f"http://localhost:{port}", f"http://127.0.0.1:{port}"):  # the proxy's own page (the UI)
            async with s.ws_connect(f"{proxy.url}/ws", headers={"Origin": origin}) as ws:
                assert (await ws_answer(ws, WS_CHAT))[0]["type"] == "start"
        with pytest.raises(aiohttp.WSServerHandshakeError):  # another server on this machine
            await s.ws_connect(f"{proxy.url}/ws", headers={"Origin": f"http://localhost:{port + 1}"})


def test_the_default_hosts_follow_the_listening_address():
    local = AllowedHosts.for_server(ServerSettings(host="127.0.0.1"))
    assert local.allows("localhost") and local.allows("::1") and local.allows("127.0.0.1")
    assert not local.allows("10.0.0.5") and not local.allows("evil.example")
    named = AllowedHosts.for_server(ServerSettings(host="10.0.0.5"))
    assert named.allows("10.0.0.5") and not named.allows("10.0.0.6")
    everywhere = AllowedHosts.for_server(ServerSettings(host="0.0.0.0"))
    assert everywhere.allows("10.0.0.6") and everywhere.allows("fe80::1") and everywhere.allows("proxy")
    assert not everywhere.allows("evil.example") and not everywhere.allows("proxy.evil.example")
    assert AllowedHosts(["*"]).allows("anything.example")


@pytest.mark.parametrize(("value", "expected"), [
    ("example.org", ("example.org", None)), ("example.org:8000", ("example.org", 8000)),
    ("[::1]:8000", ("::1", 8000)), ("[::1]", ("::1", None)), ("example.org:x", None), ("[::1", None),
    (":80", None), ("example.org:99999", None),
])
def test_split_authority(value, expected):
    assert split_authority(value) == expected
