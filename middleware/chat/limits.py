"""Rate limits shared by the HTTP endpoints and the websocket.

Two stores, one contract (``await limiter.allow(client)`` -> seconds to wait, 0 when allowed;
``await limiter.check(client)`` raises the 429):

- :class:`RateLimiter`: a token bucket per client in this process (``server.rate_limit_store:
  memory``). With ``--workers N`` each worker gets ``1/N`` of the limit.
- :class:`RedisRateLimiter`: the same bucket kept in Redis (``server.rate_limit_store: redis``,
  at ``evidence.redis_url``) and updated by one atomic Lua script (GCRA on Redis's own clock),
  so every worker and every replica draws from one budget, exactly. While Redis is unreachable
  it fails open to an in-process bucket of the full limit (one warning in the log, and one when
  Redis is back; Redis is tried again after ``evidence.redis_retry_s``): a request is never
  refused or delayed because Redis is down, and each replica then limits on its own.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from middleware.cache import RedisOutage
from middleware.errors import RequestError
from middleware.settings import Settings

log = logging.getLogger(__name__)


class Limiter:
    """What the HTTP middleware and the websocket call, whatever the store."""

    enabled: bool = False

    async def allow(self, client: str) -> float:
        """0 if ``client`` may make a request now (and it is counted), else seconds until it may."""
        raise NotImplementedError

    async def check(self, client: str) -> None:
        """Raise a 429 ``RequestError`` (with Retry-After) when ``client`` is over its limit."""
        if (wait := await self.allow(client)) > 0:
            raise RequestError("rate limit exceeded", status=429, code="rate_limited", type_="rate_limit_error",
                               retry_after=str(max(1, math.ceil(wait))))

    async def aclose(self) -> None:
        return None


class RateLimiter(Limiter):
    """A token bucket per client (a proxy key, or the client's address when no keys are
    configured): ``per_minute`` requests, bursting up to the same number. 0 turns it off.
    The HTTP middleware and each websocket chat message draw from the same buckets."""

    MAX_CLIENTS = 100_000
    """Past this many buckets, the full ones (clients idle for a minute) are dropped."""

    def __init__(self, per_minute: int) -> None:
        self.enabled = per_minute > 0
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}

    async def allow(self, client: str) -> float:
        return self.take(client)

    def take(self, client: str) -> float:
        """0 if allowed now (and counted), else seconds until a request would be."""
        if not self.enabled:
            return 0.0
        now = time.monotonic()
        tokens, last = self._buckets.get(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if len(self._buckets) >= self.MAX_CLIENTS:
            self._prune(now)
        if tokens >= 1.0:
            self._buckets[client] = (tokens - 1.0, now)
            return 0.0
        self._buckets[client] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        self._buckets = {c: (t, last) for c, (t, last) in self._buckets.items()
                         if t + (now - last) * self.rate < self.capacity}


# GCRA (the generic cell rate algorithm): the key holds the theoretical arrival time (TAT) of the
# next request, in microseconds of Redis's clock. A request is allowed when the new TAT stays
# within the burst (capacity * interval) of now; the same bucket as RateLimiter's, in one key.
_GCRA = """
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local wait = new_tat - now - burst
if wait > 0 then return math.ceil(wait) end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return 0
"""


class RedisRateLimiter(Limiter):
    """The token bucket of :class:`RateLimiter`, kept in Redis for every process that uses the
    same ``url`` and ``prefix``: exact across workers and replicas (one atomic script per
    request, on Redis's clock). Fails open to ``fallback`` (an in-process bucket) while Redis
    is unreachable, and tries Redis again after ``retry_after_s``."""

    def __init__(self, per_minute: int, url: str, *, prefix: str = "factcheck:", retry_after_s: float = 15.0,
                 socket_timeout_s: float = 0.25, fallback: RateLimiter | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = per_minute > 0
        self.interval_us = 60_000_000 / per_minute if self.enabled else 0.0
        self.burst_us = self.interval_us * per_minute
        self.key_prefix = f"{prefix}ratelimit:"
        self.fallback = fallback or RateLimiter(per_minute)
        self._outage = RedisOutage(url, "rate limiter", "per-process rate limits", retry_after_s, clock)
        self._redis = aioredis.Redis.from_url(url, socket_timeout=socket_timeout_s,
                                              socket_connect_timeout=socket_timeout_s)
        self._gcra = self._redis.register_script(_GCRA)

    @property
    def available(self) -> bool:
        """False while the limits are per process (Redis unreachable)."""
        return self._outage.available

    async def allow(self, client: str) -> float:
        if not self.enabled:
            return 0.0
        if self._outage.active():
            return self.fallback.take(client)
        try:
            wait_us = await self._gcra(keys=[self.key_prefix + client], args=[self.interval_us, self.burst_us])
        except (RedisError, OSError) as exc:
            self._outage.down(exc)
            return self.fallback.take(client)
        self._outage.up()
        return int(wait_us) / 1_000_000

    async def aclose(self) -> None:
        await self._redis.aclose()


def make_limiter(settings: Settings) -> Limiter:
    """The limiter ``server.rate_limit_store`` names, at ``server.rate_limit_per_minute``."""
    server, evidence = settings.server, settings.evidence
    if server.rate_limit_store == "redis" and server.rate_limit_per_minute > 0:
        return RedisRateLimiter(server.rate_limit_per_minute, evidence.redis_url, prefix=evidence.redis_key_prefix,
                                retry_after_s=evidence.redis_retry_s)
    return RateLimiter(server.rate_limit_per_minute)


def client_id(request: web.Request) -> str:
    """Who the rate limit counts: the proxy key's position, else the client's address."""
    return request.get(CLIENT_KEY) or f"addr:{request.remote}"


LIMITER_KEY = web.AppKey("limiter", Limiter)
CLIENT_KEY = web.RequestKey("factcheck_client", str)
"""Request key under which the auth middleware records the matched proxy key."""
