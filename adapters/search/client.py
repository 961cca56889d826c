"""The HTTP client shared by a set of search providers: one lazy aiohttp session, JSON
requests with bounded bodies, and retries with exponential backoff and jitter."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import aiohttp

from adapters.fetch import read_capped
from adapters.search.errors import ProviderError

MAX_JSON_BYTES = 5_000_000


@dataclass(frozen=True)
class RetryPolicy:
    """Retry 429, 5xx and dropped connections ``retries`` times; the n-th delay is
    ``min(max_s, base_s * 2**n)`` scaled by a random factor in [0.5, 1] (Retry-After, when
    given, replaces the computed delay but is capped by ``max_s`` as well)."""

    retries: int = 2
    base_s: float = 0.25
    max_s: float = 2.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            try:
                return min(self.max_s, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: fall back to our own schedule
        return min(self.max_s, self.base_s * 2**attempt) * random.uniform(0.5, 1.0)


class HttpClient:
    """One aiohttp session for a set of providers, created inside the running loop on first
    use. Closing is idempotent; a closed client opens a new session if used again."""

    def __init__(self, user_agent: str, retry: RetryPolicy | None = None, max_body_bytes: int = MAX_JSON_BYTES):
        self.user_agent = user_agent
        self.retry = retry or RetryPolicy()
        self.max_body_bytes = max_body_bytes
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers={"User-Agent": self.user_agent}, trust_env=True)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request_json(self, method: str, url: str, **kwargs: Any) -> Any:
        """Send the request (aiohttp keyword arguments) and return the decoded JSON body,
        retrying per :attr:`retry`. Raises :class:`ProviderError`."""
        attempt = 0
        while True:
            try:
                return await self._once(method, url, **kwargs)
            except _Retryable as exc:
                if attempt >= self.retry.retries:
                    raise ProviderError(exc.kind, f"{exc} (after {attempt + 1} attempts)") from exc
                await asyncio.sleep(self.retry.delay(attempt, exc.retry_after))
                attempt += 1

    async def _once(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            async with self.session.request(method, url, **kwargs) as resp:
                if resp.status == 429 or resp.status >= 500:
                    kind = "http_429" if resp.status == 429 else "http_5xx"
                    raise _Retryable(kind, f"HTTP {resp.status}", resp.headers.get("Retry-After"))
                if resp.status >= 400:
                    raise ProviderError("http_4xx", f"HTTP {resp.status}")
                body, truncated = await read_capped(resp, self.max_body_bytes)
                if truncated:
                    raise ProviderError("too_large", f"answer larger than {self.max_body_bytes} bytes")
                return parse_json(body, resp.charset)
        except aiohttp.ServerTimeoutError:
            raise
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise _Retryable("connection", repr(exc)) from exc


def parse_json(body: bytes, charset: str | None) -> Any:
    """Decode a JSON body; HTML or anything else that is not JSON raises ProviderError."""
    try:
        text = body.decode(charset or "utf-8", errors="replace").strip()
    except LookupError:  # an unknown charset name
        text = body.decode("utf-8", errors="replace").strip()
    if text[:1] == "<":
        raise ProviderError("html", f"answered HTML instead of JSON: {text[:80]!r}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProviderError("bad_json", f"answer is not JSON: {text[:80]!r}") from exc


class _Retryable(Exception):
    def __init__(self, kind: str, message: str, retry_after: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after
