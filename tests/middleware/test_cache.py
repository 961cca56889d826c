"""Caches: in-process LRU+TTL, Redis on a real loopback redis-server, fallback and recovery."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
import redis.asyncio as aioredis

from middleware.cache import (
    MemoryCache,
    RedisCache,
    cached,
    cached_embeddings,
    decode_value,
    embedding_key,
    encode_value,
    make_cache,
)
from middleware.metrics import CACHE_REQUESTS
from middleware.settings import EvidenceSettings
from tests.support.redis_server import FakeClock
from tests.support.redis_server import free_port as _free_port
from tests.support.redis_server import start_redis as _start_redis
from tests.support.redis_server import stop_redis as _stop


# --- encoding ---------------------------------------------------------------------------


def test_values_round_trip_as_json_or_bytes() -> None:
    for value in ({"a": [1, 2.5, "é"]}, [1, None, True], "text", 3, b"\x00\xffraw"):
        assert decode_value(encode_value(value)) == value
    assert decode_value(encode_value((1, 2))) == [1, 2]
    with pytest.raises(TypeError):
        encode_value(object())


# --- memory -----------------------------------------------------------------------------


async def test_memory_cache_expires_entries_after_ttl() -> None:
    clock = FakeClock()
    cache = MemoryCache(max_items=10, default_ttl_s=60, clock=clock)
    await cache.set("a", {"x": 1})
    await cache.set("b", "short", ttl_s=1)
    clock.now += 2
    assert await cache.get("a") == {"x": 1}
    assert await cache.get("b") is None
    clock.now += 60
    assert await cache.get("a") is None
    assert len(cache) == 0


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_items=2)
    await cache.set("a", 1)
    await cache.set("b", 2)
    assert await cache.get("a") == 1  # a is now the most recent
    await cache.set("c", 3)
    assert await cache.get("b") is None
    assert await cache.get("a") == 1 and await cache.get("c") == 3


async def test_memory_cache_returns_copies() -> None:
    cache = MemoryCache()
    value = {"list": [1]}
    await cache.set("k", value)
    value["list"].append(2)
    got = await cache.get("k")
    got["list"].append(3)
    assert await cache.get("k") == {"list": [1]}
    await cache.delete("k")
    assert await cache.get("k") is None


# --- cached() ---------------------------------------------------------------------------


def _count(kind: str, result: str) -> float:
    return CACHE_REQUESTS.labels(cache=kind, result=result)._value.get()


async def test_cached_computes_once_and_counts_hits() -> None:
    cache = MemoryCache()
    calls = []

    async def compute() -> list[int]:
        calls.append(1)
        return [1, 2]

    hits, misses = _count("unit", "hit"), _count("unit", "miss")
    assert await cached(cache, "key", compute, kind="unit") == [1, 2]
    assert await cached(cache, "key", compute, kind="unit") == [1, 2]
    assert len(calls) == 1
    assert _count("unit", "hit") == hits + 1 and _count("unit", "miss") == misses + 1


async def test_cached_does_not_store_failures_and_skips_unreadable_entries() -> None:
    cache = MemoryCache()

    async def boom() -> int:
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError):
        await cached(cache, "k", boom, kind="unit")
    assert await cache.get("unit:k") is None

    await cache.set("unit:k", {"not": "a list"})

    async def fresh() -> list[str]:
        return ["ok"]

    def load(raw: object) -> list[str]:
        if not isinstance(raw, list):
            raise ValueError("old format")
        return raw

    assert await cached(cache, "k", fresh, kind="unit", load=load) == ["ok"]
    assert await cache.get("unit:k") == ["ok"]


async def test_cached_embeddings_computes_only_missing_rows() -> None:
    cache = MemoryCache()
    seen: list[list[str]] = []

    async def embed(texts):
        seen.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    first = await cached_embeddings(cache, "m", ["a", "bb"], embed)
    second = await cached_embeddings(cache, "m", ["bb", "ccc", "a"], embed)
    assert seen == [["a", "bb"], ["ccc"]]
    np.testing.assert_array_equal(first, [[1, 1], [2, 1]])
    np.testing.assert_array_equal(second, [[2, 1], [3, 1], [1, 1]])
    assert second.dtype == np.float32
    assert embedding_key("m", "a") != embedding_key("other", "a")
    await cached_embeddings(cache, "other", ["a"], embed)
    assert seen[-1] == ["a"]  # keys include the model


def test_make_cache_selects_backend() -> None:
    assert isinstance(make_cache(EvidenceSettings(cache="memory", cache_max_items=5)), MemoryCache)
    cache = make_cache(EvidenceSettings(cache="redis", redis_url="redis://127.0.0.1:1/0", redis_retry_s=7))
    assert isinstance(cache, RedisCache) and cache.retry_after_s == 7


# --- Redis ------------------------------------------------------------------------------


async def test_redis_cache_stores_with_ttl_and_is_shared(redis_url: str, prefix: str) -> None:
    a = RedisCache(redis_url, prefix=prefix, default_ttl_s=60)
    b = RedisCache(redis_url, prefix=prefix)  # a second replica
    raw = aioredis.Redis.from_url(redis_url)
    try:
        await a.set("json", {"passages": [{"id": "x"}]})
        await a.set("bytes", b"\x01\x02", ttl_s=5)
        assert await b.get("json") == {"passages": [{"id": "x"}]}
        assert await b.get("bytes") == b"\x01\x02"
        assert 0 < await raw.pttl(prefix + "bytes") <= 5000
        assert 55_000 < await raw.pttl(prefix + "json") <= 60_000
        await b.delete("json")
        assert await a.get("json") is None
        assert a.available and b.available
    finally:
        await raw.delete(prefix + "bytes")
        await raw.aclose()
        await a.aclose()
        await b.aclose()


async def test_redis_down_falls_back_to_memory_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    cache = RedisCache(f"redis://127.0.0.1:{_free_port()}/0", retry_after_s=30)
    caplog.set_level(logging.WARNING, logger="middleware.cache")
    try:
        await cache.set("k", [1, 2])
        assert await cache.get("k") == [1, 2]
        assert not cache.available
        warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        await cache.aclose()


async def test_redis_recovers_after_outage(prefix: str) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("recovery needs the redis-server binary (bash .ci/redis.sh installs it)")
    port = _free_port()
    clock = FakeClock()
    cache = RedisCache(f"redis://127.0.0.1:{port}/0", prefix=prefix, retry_after_s=10, clock=clock)
    proc = None
    try:
        await cache.set("during", "outage")  # Redis is down: local only
        assert not cache.available
        proc = _start_redis(port)
        clock.now += 5
        await cache.set("still", "local")  # within retry_after_s: Redis not retried yet
        clock.now += 6
        await cache.set("after", "recovered")
        assert cache.available
        direct = RedisCache(f"redis://127.0.0.1:{port}/0", prefix=prefix)
        assert await direct.get("after") == "recovered"
        assert await direct.get("during") is None
        await direct.aclose()
    finally:
        await cache.aclose()
        if proc is not None:
            _stop(proc)
