"""Rate limits shared by the HTTP endpoints and the websocket."""

from __future__ import annotations

import time

from aiohttp import web

from middleware.errors import RequestError


class RateLimiter:
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

    def allow(self, client: str) -> float:
        """0 if allowed now, else seconds until a request would be."""
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

    def check(self, client: str) -> None:
        """Raise a 429 ``RequestError`` (with Retry-After) when ``client`` is over its limit."""
        if (wait := self.allow(client)) > 0:
            raise RequestError("rate limit exceeded", status=429, code="rate_limited", type_="rate_limit_error",
                               retry_after=str(max(1, round(wait))))

    def _prune(self, now: float) -> None:
        self._buckets = {c: (t, last) for c, (t, last) in self._buckets.items()
                         if t + (now - last) * self.rate < self.capacity}


def client_id(request: web.Request) -> str:
    """Who the rate limit counts: the proxy key's position, else the client's address."""
    return request.get(CLIENT_KEY) or f"addr:{request.remote}"


LIMITER_KEY = web.AppKey("limiter", RateLimiter)
CLIENT_KEY = web.RequestKey("factcheck_client", str)
"""Request key under which the auth middleware records the matched proxy key."""
