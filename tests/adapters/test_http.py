"""One guarded HTTP client for everything that leaves the process (``adapters.http``, issue 35):
the page fetcher's guards (tests/adapters/test_ssrf.py, test_fetch.py) extended to the upstream,
the search providers and the pipeline's LLM. For each client: the environment's proxy is not used unless
configured; a redirect is never followed for a POST or a request carrying credentials; a
keyless GET's redirect to anything but the configured origin is vetted by the SSRF guard;
response headers and bodies are capped; a failure to connect names no address.
Servers run on 127.0.0.1 only."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.chat_client import ChatClient, LLMError
from adapters.fetch import PageFetcher
from adapters.http import MAX_HEADER_BYTES, OutboundClient, failure_reason
from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.errors import ProviderError
from adapters.ssrf import SsrfGuard
from adapters.upstream import UpstreamClient
from middleware.errors import UpstreamError
from middleware.commands.serve import start_site
from middleware.settings import EvidenceSettings, UpstreamSettings

ANSWER = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}


pytestmark = pytest.mark.usefixtures("loopback_only")  # tests/adapters/conftest.py


class Service:
    """A search API, an LLM endpoint and a model list on one loopback port, with redirects of
    every kind; ``hits`` counts requests per path (and what credentials each carried)."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.auth: list[str | None] = []
        self.port = 0
        self.other_port = 0
        self.app = web.Application()
        self.app.router.add_route("*", "/{name:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] += 1
        self.auth.append(request.headers.get("Authorization") or request.headers.get("X-Subscription-Token"))
        redirects = {
            "to-other-loopback-port": f"http://127.0.0.1:{self.other_port}/secret",
            "to-other-loopback": f"http://127.0.0.2:{self.port}/search",
            "to-private": "http://10.0.0.5/search",
            "to-metadata": "http://169.254.169.254/latest/meta-data/",
            "to-metadata-v6": "http://[fd00:ec2::254]/latest/meta-data/",
            "to-metadata-name": "http://metadata.google.internal/computeMetadata/v1/",
            "to-ftp": "ftp://127.0.0.1/file",
            "to-search": "/search",
            "loop": "/loop",
        }
        if name in redirects:
            raise web.HTTPFound(redirects[name])
        if name == "v1/moved/chat/completions":
            raise web.HTTPTemporaryRedirect("/v1/chat/completions")  # same origin: a 307 re-POSTs the key
        if name == "v1/chat/completions":
            return web.json_response(ANSWER)
        if name == "v1/models":
            return web.json_response({"object": "list", "data": []})
        if name == "search":
            return web.json_response({"results": []})
        if name.startswith("huge-header"):
            return web.json_response({}, headers={"X-Padding": "x" * (MAX_HEADER_BYTES + 1024)})
        if name in ("big/chat/completions", "big/models"):
            return web.json_response({**ANSWER, "padding": "x" * 200_000})
        raise web.HTTPNotFound()


class Recorder:
    """A server that records every request (the 'other loopback port', or an HTTP proxy)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(str(request.url))
        return web.json_response({"results": [], **ANSWER, "object": "list", "data": []})


@pytest.fixture
async def service() -> AsyncIterator[tuple[Service, Recorder]]:
    svc, other = Service(), Recorder()
    runners = []
    for app in (svc.app, other.app):
        runner, port = await start_site(app, "127.0.0.1", 0)
        runners.append((runner, port))
    svc.port, svc.other_port = runners[0][1], runners[1][1]
    try:
        yield svc, other
    finally:
        for runner, _ in runners:
            await runner.cleanup()


def base(svc: Service) -> str:
    return f"http://127.0.0.1:{svc.port}"


def search_client(**kwargs: Any) -> HttpClient:
    return HttpClient("test", RetryPolicy(0, 0.01, 0.01), **kwargs)


# --- search providers: redirects ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("to-other-loopback-port", "loopback"),  # the probe: a 302 to another port was followed 32 times
        ("to-other-loopback", "loopback"),
        ("to-private", "private"),
        ("to-metadata", "cloud metadata"),
        ("to-metadata-v6", "cloud metadata"),
        ("to-metadata-name", "metadata"),
    ],
)
async def test_a_keyless_search_redirect_to_a_refused_address_is_not_followed(service, name, reason) -> None:
    svc, other = service
    http = search_client()
    try:
        with pytest.raises(ProviderError, match=reason) as refused:
            await http.request_json("GET", f"{base(svc)}/{name}", params={"q": "x", "format": "json"})
    finally:
        await http.aclose()
    assert refused.value.kind == "ssrf" and svc.hits[name] == 1 and other.seen == []


async def test_a_keyless_search_redirect_within_the_configured_origin_is_followed(service) -> None:
    svc, _ = service
    http = search_client()
    try:
        assert await http.request_json("GET", f"{base(svc)}/to-search", params={"q": "x"}) == {"results": []}
        with pytest.raises(ProviderError) as looped:
            await http.request_json("GET", f"{base(svc)}/loop")
        with pytest.raises(ProviderError) as ftp:
            await http.request_json("GET", f"{base(svc)}/to-ftp")
    finally:
        await http.aclose()
    assert looped.value.kind == "redirects" and svc.hits["loop"] == 4  # 1 + 3 hops
    assert ftp.value.kind == "scheme"


@pytest.mark.parametrize(("method", "headers"), [("GET", {"X-Subscription-Token": "brave-key-12345678"}),
                                                 ("GET", {"Authorization": "Bearer tvly-key-12345678"}),
                                                 ("POST", {})])
async def test_a_search_request_with_credentials_or_a_body_never_follows_a_redirect(service, method, headers) -> None:
    svc, _ = service
    http = search_client()
    try:
        with pytest.raises(ProviderError, match="not followed") as refused:
            await http.request_json(method, f"{base(svc)}/to-search", headers=headers,
                                    **({"json": {"api_key": "tvly-key-12345678"}} if method == "POST" else {}))
    finally:
        await http.aclose()
    assert refused.value.kind == "redirect" and svc.hits["search"] == 0


# --- the pipeline's LLM and the upstream: no redirect, ever ----------------------------------------


async def test_the_pipeline_llm_does_not_re_post_its_key_on_a_same_origin_307(service) -> None:
    svc, _ = service
    async with ChatClient(f"{base(svc)}/v1/moved", api_key="sk-llm-key-12345678", timeout_s=5) as chat:
        with pytest.raises(LLMError, match="redirect.*pipeline.llm_url"):
            await chat.complete([{"role": "user", "content": "q"}])
    assert svc.hits["v1/moved/chat/completions"] == 1 and svc.hits["v1/chat/completions"] == 0


async def test_the_upstream_does_not_follow_a_same_origin_307(service) -> None:
    svc, _ = service
    client = UpstreamClient(UpstreamSettings(url=f"{base(svc)}/v1/moved", api_key="sk-upstream-12345678"))
    try:
        with pytest.raises(UpstreamError) as refused:
            await client.complete({"model": "m", "messages": []}, {})
    finally:
        await client.close()
    assert refused.value.kind == "redirect" and refused.value.status == 502
    assert svc.hits["v1/chat/completions"] == 0


# --- the environment's proxy: not read unless configured -------------------------------------------


async def each_client_call(svc: Service, trust_env: bool) -> None:
    """One request from each client (the page fetcher has no such option: never)."""
    http = search_client(trust_env=trust_env)
    chat = ChatClient(f"{base(svc)}/v1", timeout_s=5, trust_env=trust_env)
    upstream = UpstreamClient(UpstreamSettings(url=f"{base(svc)}/v1"), trust_env=trust_env)
    fetcher = PageFetcher(EvidenceSettings(fetch_allowlist=["127.0.0.1"]))
    try:
        await http.request_json("GET", f"{base(svc)}/search")
        await chat.complete([{"role": "user", "content": "q"}])
        await upstream.get("/models", {})
        await fetcher.fetch_or_none(f"{base(svc)}/search")
    finally:
        for close in (http.aclose, chat.close, upstream.close, fetcher.aclose):
            await close()


async def test_no_client_uses_the_environments_proxy_unless_configured(service, monkeypatch) -> None:
    svc, _ = service
    proxy = Recorder()
    runner, port = await start_site(proxy.app, "127.0.0.1", 0)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    try:
        await each_client_call(svc, trust_env=False)
        assert proxy.seen == [] and svc.hits["search"] == 2 and svc.hits["v1/models"] == 1
        await each_client_call(svc, trust_env=True)  # configured (outbound.trust_env): the three go through it
        assert len(proxy.seen) == 3 and svc.hits["search"] == 3
    finally:
        await runner.cleanup()


# --- caps and errors -------------------------------------------------------------------------------


async def test_every_client_refuses_oversized_response_headers(service) -> None:
    svc, _ = service
    http = search_client()
    try:
        with pytest.raises(ProviderError):
            await http.request_json("GET", f"{base(svc)}/huge-header")
    finally:
        await http.aclose()
    async with ChatClient(f"{base(svc)}/huge-header", timeout_s=5) as chat:
        with pytest.raises(LLMError, match="not valid HTTP"):
            await chat.complete([{"role": "user", "content": "q"}])
    upstream = UpstreamClient(UpstreamSettings(url=f"{base(svc)}/huge-header"))
    try:
        with pytest.raises(UpstreamError, match="not valid HTTP"):
            await upstream.get("", {})
    finally:
        await upstream.close()


async def test_non_streamed_answers_are_capped(service) -> None:
    svc, _ = service
    async with ChatClient(f"{base(svc)}/big", timeout_s=5, max_response_bytes=100_000) as chat:
        with pytest.raises(LLMError, match="larger than 100000 bytes"):
            await chat.complete([{"role": "user", "content": "q"}])
    upstream = UpstreamClient(UpstreamSettings(url=f"{base(svc)}/big"), max_response_bytes=100_000)
    try:
        with pytest.raises(UpstreamError) as too_large:
            await upstream.complete({"model": "m", "messages": []}, {})
        with pytest.raises(UpstreamError):
            await upstream.get("/models", {})
    finally:
        await upstream.close()
    assert too_large.value.kind == "too_large" and too_large.value.status == 502


async def test_a_connection_failure_names_no_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    upstream = UpstreamClient(UpstreamSettings(url=f"http://127.0.0.1:{port}/v1"))
    try:
        with pytest.raises(UpstreamError) as refused:
            await upstream.complete({"model": "m", "messages": []}, {})
    finally:
        await upstream.close()
    assert refused.value.kind == "connect" and "127.0.0.1" not in str(refused.value) and str(port) not in str(refused.value)
    assert "refused" in str(refused.value)
    async with ChatClient(f"http://127.0.0.1:{port}/v1", timeout_s=5) as chat:
        with pytest.raises(LLMError) as llm:
            await chat.complete([{"role": "user", "content": "q"}])
    assert "refused" in str(llm.value)


def test_failure_reason_words() -> None:
    assert failure_reason(aiohttp.ServerDisconnectedError()) == "the server closed the connection"
    assert failure_reason(TimeoutError()) == "the server did not answer in time"
    assert failure_reason(ValueError("x")) == "the request failed"


def test_following_redirects_needs_a_guard() -> None:
    with pytest.raises(ValueError, match="guard"):
        OutboundClient(timeout=aiohttp.ClientTimeout(total=1), max_redirects=2)
    assert OutboundClient(timeout=aiohttp.ClientTimeout(total=1), guard=SsrfGuard(), max_redirects=2).max_redirects == 2
