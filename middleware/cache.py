"""Caches for what repeats: search results, fetched pages, embeddings.

One small async interface (:class:`Cache`) with two backends:

- :class:`MemoryCache`: an in-process LRU with per-entry TTL and a bound on the number of items;
- :class:`RedisCache`: a shared cache for several replicas (``redis.asyncio``). When Redis is
  unreachable it logs one warning, serves from an in-process cache, and tries Redis again after
  ``redis_retry_s``; it never raises a connection error into the caller.

Values are JSON-serialisable objects or ``bytes``. Both backends store the encoded form, so a
value read back is a fresh copy with the same semantics whatever the backend (tuples come back
as lists). :func:`cached` wraps a computation; :func:`cached_embeddings` caches rows of an
embedding matrix by model and text hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from middleware.metrics import CACHE_REQUESTS
from middleware.settings import EvidenceSettings, Settings

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

_BYTES_TAG = b"B"
_JSON_TAG = b"J"


@runtime_checkable
class Cache(Protocol):
    """Async key-value cache. ``ttl_s=None`` means the backend's default TTL."""

    async def get(self, key: str) -> Any | None: ...

    async def set(self, key: str, value: Any, ttl_s: float | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def aclose(self) -> None: ...


def encode_value(value: Any) -> bytes:
    """Tagged encoding: raw bytes, or compact JSON. Raises TypeError for anything else."""
    if isinstance(value, bytes | bytearray | memoryview):
        return _BYTES_TAG + bytes(value)
    return _JSON_TAG + json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_value(data: bytes) -> Any:
    tag, body = data[:1], data[1:]
    if tag == _BYTES_TAG:
        return body
    if tag == _JSON_TAG:
        return json.loads(body)
    raise ValueError(f"unknown cache value tag {tag!r}")


def hash_key(*parts: str) -> str:
    """A short, stable key for arbitrary text: ``sha256`` of the parts joined by NUL."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


class MemoryCache:
    """In-process LRU with TTL. Not shared between processes."""

    def __init__(self, max_items: int = 10_000, default_ttl_s: float = 3600.0, clock: Clock = time.monotonic):
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self.max_items = max_items
        self.default_ttl_s = default_ttl_s
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get_nowait(self, key: str) -> Any | None:
        entry = self._items.get(key)
        if entry is None:
            return None
        expires, data = entry
        if expires <= self._clock():
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return decode_value(data)

    def set_nowait(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        data = encode_value(value)
        ttl = self.default_ttl_s if ttl_s is None else ttl_s
        self._items[key] = (self._clock() + ttl, data)
        self._items.move_to_end(key)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    async def get(self, key: str) -> Any | None:
        return self.get_nowait(key)

    async def set(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        self.set_nowait(key, value, ttl_s)

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)

    async def aclose(self) -> None:
        self._items.clear()


class RedisCache:
    """Redis-backed cache shared by replicas, with an in-process fallback while Redis is down."""

    def __init__(
        self,
        url: str,
        *,
        default_ttl_s: float = 3600.0,
        prefix: str = "factcheck:",
        fallback: MemoryCache | None = None,
        retry_after_s: float = 15.0,
        socket_timeout_s: float = 0.5,
        clock: Clock = time.monotonic,
    ):
        self.url = url
        self.default_ttl_s = default_ttl_s
        self.prefix = prefix
        self.retry_after_s = retry_after_s
        self.fallback = fallback or MemoryCache(default_ttl_s=default_ttl_s, clock=clock)
        self._outage = RedisOutage(url, "cache", "the in-process cache", retry_after_s, clock)
        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s
        )

    @property
    def available(self) -> bool:
        """False while the cache is serving from the in-process fallback."""
        return self._outage.available

    async def get(self, key: str) -> Any | None:
        if self._outage.active():
            return self.fallback.get_nowait(key)
        try:
            data = await self._redis.get(self.prefix + key)
        except (RedisError, OSError) as exc:
            self._outage.down(exc)
            return self.fallback.get_nowait(key)
        self._outage.up()
        return None if data is None else decode_value(data)

    async def set(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        data = encode_value(value)
        ttl = self.default_ttl_s if ttl_s is None else ttl_s
        if self._outage.active():
            self.fallback.set_nowait(key, value, ttl)
            return
        try:
            await self._redis.set(self.prefix + key, data, px=max(1, int(ttl * 1000)))
        except (RedisError, OSError) as exc:
            self._outage.down(exc)
            self.fallback.set_nowait(key, value, ttl)
            return
        self._outage.up()

    async def delete(self, key: str) -> None:
        await self.fallback.delete(key)
        if self._outage.active():
            return
        try:
            await self._redis.delete(self.prefix + key)
        except (RedisError, OSError) as exc:
            self._outage.down(exc)

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self.fallback.aclose()


class RedisOutage:
    """When a Redis client serves from its in-process fallback: after a failure, for
    ``retry_after_s``, then Redis is tried again. Logs one warning when Redis goes down and one
    when it is back, not one per failed call."""

    def __init__(self, url: str, user: str, fallback: str, retry_after_s: float, clock: Clock = time.monotonic):
        self.url, self.user, self.fallback, self.retry_after_s = url, user, fallback, retry_after_s
        self._clock = clock
        self._down_until: float | None = None

    @property
    def available(self) -> bool:
        """False from a failure until a call to Redis succeeds again."""
        return self._down_until is None

    def active(self) -> bool:
        """True while calls should skip Redis and use the fallback."""
        return self._down_until is not None and self._clock() < self._down_until

    def down(self, exc: BaseException) -> None:
        if self._down_until is None:
            log.warning("Redis %s at %s is unreachable (%s); using %s, retrying every %.0fs",
                        self.user, self.url, exc, self.fallback, self.retry_after_s)
        self._down_until = self._clock() + self.retry_after_s

    def up(self) -> None:
        if self._down_until is not None:
            log.warning("Redis %s at %s is reachable again", self.user, self.url)
            self._down_until = None


def make_cache(settings: Settings | EvidenceSettings) -> Cache:
    """The cache named by ``evidence.cache``: ``memory`` or ``redis`` (with in-process fallback)."""
    ev = settings.evidence if isinstance(settings, Settings) else settings
    local = MemoryCache(max_items=ev.cache_max_items, default_ttl_s=ev.cache_ttl_s)
    if ev.cache == "memory":
        return local
    return RedisCache(
        ev.redis_url,
        default_ttl_s=ev.cache_ttl_s,
        prefix=ev.redis_key_prefix,
        fallback=local,
        retry_after_s=ev.redis_retry_s,
    )


async def cached(
    cache: Cache | None,
    key: str,
    compute: Callable[[], Awaitable[T]],
    *,
    kind: str,
    ttl_s: float | None = None,
    dump: Callable[[T], Any] | None = None,
    load: Callable[[Any], T] | None = None,
) -> T:
    """Return the cached value for ``kind:key``, or compute, store and return it.

    ``dump``/``load`` convert between the value and its JSON/bytes form. A computation that
    raises is not cached. An entry that ``load`` cannot read counts as a miss.
    ``kind`` (search, page, embedding, ...) labels ``factcheck_cache_requests_total``.
    """
    if cache is None:
        return await compute()
    full_key = f"{kind}:{key}"
    raw = await cache.get(full_key)
    if raw is not None:
        try:
            value = load(raw) if load else raw
        except Exception:  # noqa: BLE001 - a stale or foreign entry is a miss, not an error
            log.warning("ignoring unreadable %s cache entry %s", kind, full_key)
        else:
            CACHE_REQUESTS.labels(cache=kind, result="hit").inc()
            return value
    CACHE_REQUESTS.labels(cache=kind, result="miss").inc()
    value = await compute()
    await cache.set(full_key, dump(value) if dump else value, ttl_s)
    return value


def embedder_name(embedder: object) -> str:
    """The model part of an embedder's cache keys: its ``name``, else its class."""
    return getattr(embedder, "name", None) or type(embedder).__qualname__


def embedding_key(model: str, text: str) -> str:
    """Cache key of one embedding: the model name plus the text's hash."""
    return f"embedding:{model}:{hash_key(text)}"


async def cached_embeddings(
    cache: Cache | None,
    model: str,
    texts: Sequence[str],
    embed: Callable[[Sequence[str]], Awaitable[np.ndarray]],
    *,
    ttl_s: float | None = None,
) -> np.ndarray:
    """Embed ``texts`` with ``embed``, computing only the rows not already cached.

    Rows are stored as float32 bytes under :func:`embedding_key`; the result keeps the order
    of ``texts``."""
    if cache is None or not texts:
        return await embed(texts)
    keys = [embedding_key(model, t) for t in texts]
    found = await asyncio.gather(*(cache.get(k) for k in keys))
    rows: list[np.ndarray | None] = [
        np.frombuffer(v, dtype=np.float32) if isinstance(v, bytes) else None for v in found
    ]
    missing = [i for i, row in enumerate(rows) if row is None]
    CACHE_REQUESTS.labels(cache="embedding", result="hit").inc(len(texts) - len(missing))
    CACHE_REQUESTS.labels(cache="embedding", result="miss").inc(len(missing))
    if missing:
        fresh = np.asarray(await embed([texts[i] for i in missing]), dtype=np.float32)
        for i, row in zip(missing, fresh, strict=True):
            rows[i] = row
        await asyncio.gather(*(cache.set(keys[i], rows[i].tobytes(), ttl_s) for i in missing))
    dims = {row.shape[0] for row in rows if row is not None}
    if len(dims) != 1:
        raise ValueError(f"cached embeddings of {model} disagree on dimension: {sorted(dims)}")
    return np.stack(rows).astype(np.float32, copy=False)
