"""The HTTP client shared by a set of search providers: one lazy session of the guarded
outbound client (``adapters.http``), JSON requests with bounded bodies, and retries with
exponential backoff and jitter.

Redirects: a provider's request that carries its key (a header, or any POST) never follows
one (``ProviderError('redirect')``: set the provider's URL to the final address); a keyless
GET (SearxNG, Wikipedia) follows up to :data:`MAX_REDIRECTS` hops, and a hop to an origin other
than the configured one is vetted by the SSRF guard (loopback, private and metadata addresses
refused unless in ``evidence.fetch_allowlist``). The environment's proxy settings are not read
unless ``outbound.trust_env`` is set."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import aiohttp

from adapters.http import OutboundClient, failure_reason, read_capped
from adapters.search.errors import ProviderError
from adapters.ssrf import FetchError, SsrfGuard
from middleware.redaction import redact

MAX_JSON_BYTES = 5_000_000
MAX_REDIRECTS = 3
SESSION_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=10)
"""A backstop: each provider's search runs under its own timeout (``evidence.search_timeout_s``)."""


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

    def __init__(
        self, user_agent: str, retry: RetryPolicy | None = None, max_body_bytes: int = MAX_JSON_BYTES, *,
        trust_env: bool = False, allowlist: list[str] | tuple[str, ...] = (), max_redirects: int = MAX_REDIRECTS,
    ):
        self.user_agent = user_agent
        self.retry = retry or RetryPolicy()
        self.max_body_bytes = max_body_bytes
        self.client = OutboundClient(timeout=SESSION_TIMEOUT, guard=SsrfGuard(allowlist), max_redirects=max_redirects,
                                     trust_env=trust_env, headers={"User-Agent": user_agent})

    @property
    def session(self) -> aiohttp.ClientSession:
        return self.client.session

    async def aclose(self) -> None:
        await self.client.close()

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
            async with await self.client.send(method, url, **kwargs) as resp:
                if resp.status == 429 or resp.status >= 500:
                    kind = "http_429" if resp.status == 429 else "http_5xx"
                    raise _Retryable(kind, f"HTTP {resp.status}", resp.headers.get("Retry-After"))
                if resp.status >= 400:
                    raise ProviderError("http_4xx", f"HTTP {resp.status}")
                body, truncated = await read_capped(resp, self.max_body_bytes)
                if truncated:
                    raise ProviderError("too_large", f"answer larger than {self.max_body_bytes} bytes")
                return parse_json(body, resp.charset)
        except FetchError as exc:  # a redirect not followed, or a hop the SSRF guard refused
            hint = "; set the provider's URL to the final address" if exc.kind == "redirect" else ""
            raise ProviderError(exc.kind, f"{exc}{hint}") from exc
        except aiohttp.ServerTimeoutError:
            raise
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise _Retryable("connection", failure_reason(exc)) from exc
        except aiohttp.ClientResponseError as exc:  # not HTTP we accept (an oversized header, say)
            raise ProviderError("invalid_http", failure_reason(exc)) from exc


def parse_json(body: bytes, charset: str | None) -> Any:
    """Decode a JSON body; HTML or anything else that is not JSON raises ProviderError."""
    try:
        text = body.decode(charset or "utf-8", errors="replace").strip()
    except LookupError:  # an unknown charset name
        text = body.decode("utf-8", errors="replace").strip()
    if text[:1] == "<":
        raise ProviderError("html", f"answered HTML instead of JSON: {redact(text[:80])!r}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProviderError("bad_json", f"answer is not JSON: {redact(text[:80])!r}") from exc


class _Retryable(Exception):
    def __init__(self, kind: str, message: str, retry_after: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after
