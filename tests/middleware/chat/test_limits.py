"""Limits and auth: proxy keys, per-key rate limits, the concurrent stream cap, OpenAPI."""

from __future__ import annotations

import asyncio

import aiohttp

BODY = {"model": "m", "messages": [{"role": "user", "content": "q"}], "mock": {"text": "Hello there."}}


async def post(url: str, body: dict, **headers: str) -> tuple[int, dict, dict]:
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/chat/completions", json=body, headers=headers) as r:
            return r.status, await r.json(), dict(r.headers)


async def test_proxy_keys_are_required_and_not_forwarded(make_proxy):
    proxy = await make_proxy(**{"server.api_keys": ["key-a", "key-b"]})
    status, body, _ = await post(proxy.url, BODY)
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, body, _ = await post(proxy.url, BODY, Authorization="Bearer wrong")
    assert status == 401
    status, body, _ = await post(proxy.url, BODY, Authorization="Bearer key-b")
    assert status == 200 and body["choices"][0]["message"]["content"] == "Hello there."
    assert "Authorization" not in proxy.upstream.headers[-1]  # the proxy key never travels upstream
    async with aiohttp.ClientSession() as s:  # health and metrics stay open
        async with s.get(proxy.url.removesuffix("/v1") + "/healthz") as r:
            assert r.status == 200


async def test_per_key_rate_limit(make_proxy):
    proxy = await make_proxy(**{"server.api_keys": ["key-a", "key-b"], "server.rate_limit_per_minute": 2})
    statuses = [(await post(proxy.url, BODY, Authorization="Bearer key-a"))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    status, body, headers = await post(proxy.url, BODY, Authorization="Bearer key-a")
    assert status == 429 and int(headers["Retry-After"]) >= 1 and body["error"]["code"] == "rate_limited"
    assert (await post(proxy.url, BODY, Authorization="Bearer key-b"))[0] == 200  # other keys unaffected


async def test_concurrent_stream_cap_returns_429_with_retry_after(make_proxy):
    proxy = await make_proxy(**{"server.max_concurrent_streams": 1})
    slow = {**BODY, "stream": True, "mock": {"text": "one two three four five six seven.", "token_rate": 5}}
    async with aiohttp.ClientSession() as s:
        first = await s.post(f"{proxy.url}/chat/completions", json=slow)
        await first.content.readuntil(b"\n\n")
        status, body, headers = await post(proxy.url, slow)
        assert status == 429 and headers["Retry-After"] == "1"
        assert body["error"]["code"] == "too_many_streams"
        await first.read()
        first.close()
    await asyncio.sleep(0.05)
    assert (await post(proxy.url, BODY))[0] == 200


async def test_too_many_messages(make_proxy):
    proxy = await make_proxy(**{"server.max_messages": 2})
    body = {**BODY, "messages": [{"role": "user", "content": "q"}] * 3}
    status, payload, _ = await post(proxy.url, body)
    assert status == 400 and payload["error"]["code"] == "too_many_messages"


async def test_openapi_document_is_served(make_proxy):
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as s:
        async with s.get(proxy.url.removesuffix("/v1") + "/openapi.json") as r:
            doc = await r.json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) >= {"/v1/chat/completions", "/v1/models", "/healthz", "/metrics"}
    assert "ChatRequest" in doc["components"]["schemas"]
