"""Limits and auth: proxy keys, per-key rate limits, the concurrent stream cap, OpenAPI; and the
rate limiter kept in Redis (``server.rate_limit_store: redis``), against a real redis-server on
loopback: one budget shared exactly by several replicas, the same bucket as the in-process
limiter, and failing open to per-process limits while Redis is down (those tests are marked
``redis``)."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
import redis.asyncio as aioredis

from middleware.chat.limits import RateLimiter, RedisRateLimiter, make_limiter
from middleware.errors import RequestError
from middleware.server.workers import worker_share
from middleware.settings import load_settings
from tests.support.redis_server import FakeClock, free_port, require_redis_server, start_redis, stop_redis

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


# --- the limiter kept in Redis ---------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_two_replicas_share_one_budget_exactly(redis_url: str, prefix: str) -> None:
    a = RedisRateLimiter(10, redis_url, prefix=prefix)
    b = RedisRateLimiter(10, redis_url, prefix=prefix)
    try:
        # 40 concurrent requests of one client, spread over both replicas: exactly 10 pass
        waits = await asyncio.gather(*((a if i % 2 else b).allow("key:0") for i in range(40)))
        assert sum(w == 0 for w in waits) == 10
        assert all(0 < w <= 6.0 for w in waits if w)  # one request every 6 s refills
        assert await a.allow("key:1") == 0  # each client has its own budget
        with pytest.raises(RequestError) as refused:
            await b.check("key:0")
        assert refused.value.status == 429 and int(refused.value.retry_after or 0) >= 1
        assert a.available and b.available
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_redis_bucket_refills_like_the_local_one(redis_url: str, prefix: str) -> None:
    limiter = RedisRateLimiter(120, redis_url, prefix=prefix)  # 2 per second, bursting to 120
    raw = aioredis.Redis.from_url(redis_url)
    try:
        assert [await limiter.allow("c") for _ in range(120)] == [0.0] * 120
        wait = await limiter.allow("c")
        assert 0.25 < wait <= 0.5  # the next token comes 500 ms after the first one was taken
        await asyncio.sleep(wait + 0.02)
        assert await limiter.allow("c") == 0.0
        ttl_ms = await raw.pttl(f"{prefix}ratelimit:c")
        assert 0 < ttl_ms <= 60_010  # the key expires once the bucket would be full again
    finally:
        await raw.aclose()
        await limiter.aclose()


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_limit_off_never_touches_redis() -> None:
    limiter = RedisRateLimiter(0, f"redis://127.0.0.1:{free_port()}/0")
    try:
        assert [await limiter.allow("c") for _ in range(5)] == [0.0] * 5
        assert limiter.available
    finally:
        await limiter.aclose()


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_redis_down_fails_open_to_the_local_bucket_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    limiter = RedisRateLimiter(3, f"redis://127.0.0.1:{free_port()}/0", retry_after_s=30)
    caplog.set_level(logging.WARNING, logger="middleware.cache")
    try:
        waits = [await limiter.allow("key:0") for _ in range(5)]
        assert waits[:3] == [0.0] * 3 and all(w > 0 for w in waits[3:])  # still limited, per process
        assert not limiter.available
        warnings = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(warnings) == 1 and "rate limiter" in warnings[0]
    finally:
        await limiter.aclose()


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_redis_back_after_an_outage_is_used_again(prefix: str) -> None:
    require_redis_server()
    port = free_port()
    clock = FakeClock()
    limiter = RedisRateLimiter(2, f"redis://127.0.0.1:{port}/0", prefix=prefix, retry_after_s=10, clock=clock)
    proc = None
    try:
        assert await limiter.allow("k") == 0  # down: the local bucket counts it
        assert not limiter.available
        proc = start_redis(port)
        clock.now += 11
        assert await limiter.allow("k") == 0  # Redis again, a fresh shared bucket
        assert limiter.available
        raw = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0")
        assert await raw.exists(f"{prefix}ratelimit:k") == 1
        await raw.aclose()
    finally:
        await limiter.aclose()
        if proc is not None:
            stop_redis(proc)


@pytest.mark.redis
@pytest.mark.timeout(60)
def test_settings_choose_the_store_and_workers_keep_a_shared_budget_whole() -> None:
    assert type(make_limiter(load_settings(**{"server.rate_limit_per_minute": 5}))) is RateLimiter
    shared = load_settings(**{"server.rate_limit_per_minute": 5, "server.rate_limit_store": "redis",
                              "server.workers": 2})
    assert type(make_limiter(shared)) is RedisRateLimiter
    assert worker_share(shared).server.rate_limit_per_minute == 5  # one budget in Redis, not split
    local = load_settings(**{"server.rate_limit_per_minute": 5, "server.workers": 2})
    assert worker_share(local).server.rate_limit_per_minute == 3


async def _status(url: str, key: str) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}) as r:
            await r.read()
            return r.status


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_two_proxies_on_one_redis_enforce_one_per_key_limit(make_proxy, redis_url: str, prefix: str) -> None:
    shared = {"server.api_keys": ["key-a", "key-b"], "server.rate_limit_per_minute": 3,
              "server.rate_limit_store": "redis", "evidence.redis_url": redis_url, "evidence.redis_key_prefix": prefix}
    first, second = await make_proxy(**shared), await make_proxy(**shared)
    statuses = [await _status((first, second)[i % 2].url, "key-a") for i in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    assert await _status(second.url, "key-b") == 200


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_a_proxy_whose_redis_is_down_serves_and_limits_per_process(make_proxy) -> None:
    proxy = await make_proxy(**{"server.api_keys": ["key-a"], "server.rate_limit_per_minute": 2,
                                "server.rate_limit_store": "redis",
                                "evidence.redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    assert [await _status(proxy.url, "key-a") for _ in range(3)] == [200, 200, 429]
