"""One guarded HTTP client for everything that leaves the process: the upstream LLM, the
search providers, the pipeline's LLM and the page fetcher all open their sessions here
(:class:`OutboundClient`), under one policy:

- **Environment**: ``trust_env`` is off unless configured (``outbound.trust_env``): no proxy
  from ``HTTP(S)_PROXY`` and no ``.netrc`` credentials are picked up by accident. The page
  fetcher never trusts it (a proxy would resolve names past the SSRF guard).
- **Redirects**: never followed for a request that is not a GET (or HEAD) or that carries
  credentials (an ``Authorization``, API-key or cookie header): a 307 would re-send the key,
  and the body, wherever it points. :class:`RedirectRefused` says so. A GET without
  credentials may follow up to ``max_redirects`` hops, each one re-vetted: a hop to an origin
  the operator did not configure is resolved and refused by the SSRF guard
  (``adapters.ssrf``) unless public (or allowlisted), and the connection goes to the vetted
  address. A client without a guard follows nothing.
- **Caps**: every session has a time cap (its ``ClientTimeout``: required, no default of
  "forever"), response header lines and fields are capped at :data:`MAX_HEADER_BYTES`, and
  bodies are read through :func:`read_capped`.
- **Errors**: :func:`failure_reason` names a connection failure in words a client can act on,
  without the internal address or the exception's text.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
from aiohttp.abc import ResolveResult
from yarl import URL

from adapters.ssrf import FetchError, GuardedResolver, SsrfGuard

MAX_HEADER_BYTES = 16 * 1024
"""Longest response status line or header field accepted from any server."""
MAX_ERROR_BODY_BYTES = 64 * 1024
"""Most of an error answer's body read (to summarise or pass on an OpenAI-style error)."""
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-subscription-token"}
)
"""Headers that make a request credentialed: its redirects are never followed."""
_CHUNK = 64 * 1024


class RedirectRefused(FetchError):
    """A redirect that is not followed: ``kind`` is ``redirect`` (the policy refuses it, or it
    has no Location) or ``redirects`` (too many hops); ``status`` is the 3xx received."""

    def __init__(self, kind: str, message: str, status: int) -> None:
        super().__init__(kind, message)
        self.status = status


def origin(url: URL) -> tuple[str, int]:
    """(host, port) of a URL, as the connection sees it (the scheme's default port filled in)."""
    return (url.host or "").lower().rstrip("."), url.port or (443 if url.scheme == "https" else 80)


def has_credentials(headers: Mapping[str, str] | None) -> bool:
    return any(name.lower() in CREDENTIAL_HEADERS for name in (headers or {}))


class OriginResolver(GuardedResolver):
    """The guarded resolver, except for the configured origins (host and port), which are
    resolved as any client would: the operator named them (a SearxNG on loopback, a model
    server on the LAN). Every other host, a redirect's target say, only ever connects to an
    address the guard vetted."""

    def __init__(self, guard: SsrfGuard) -> None:
        super().__init__(guard)
        self.trusted: set[tuple[str, int]] = set()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[ResolveResult]:
        if (host.lower().rstrip("."), port) not in self.trusted:
            return await super().resolve(host, port, family)
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        return [ResolveResult(hostname=host, host=info[4][0], port=info[4][1], family=info[0], proto=info[2],
                              flags=socket.AI_NUMERICHOST) for info in infos]


class OutboundClient:
    """One lazily created aiohttp session (inside the running loop) under the module's policy.

    ``guard``: the SSRF guard for hosts that are not configured (without one, no redirect is
    ever followed and every host is connected to as named). ``max_redirects``: hops a GET
    without credentials may follow. ``timeout``: the session's time cap. ``limit``: most
    connections at once (0: no limit). ``trust_env``: read proxies and ``.netrc`` from the
    environment (off unless configured)."""

    def __init__(
        self,
        *,
        timeout: aiohttp.ClientTimeout,
        guard: SsrfGuard | None = None,
        max_redirects: int = 0,
        trust_env: bool = False,
        headers: Mapping[str, str] | None = None,
        limit: int = 100,
        ttl_dns_cache: int | None = 10,
    ) -> None:
        if max_redirects and guard is None:
            raise ValueError("following redirects needs an SSRF guard to vet each hop")
        self.timeout = timeout
        self.guard = guard
        self.resolver = OriginResolver(guard) if guard is not None else None
        self.max_redirects = max_redirects
        self.trust_env = trust_env
        self.headers = dict(headers or {})
        self.limit = limit
        self.ttl_dns_cache = ttl_dns_cache
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self.resolver is not None:
                connector = aiohttp.TCPConnector(limit=self.limit, resolver=self.resolver, use_dns_cache=False)
            else:
                connector = aiohttp.TCPConnector(limit=self.limit, ttl_dns_cache=self.ttl_dns_cache)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, trust_env=self.trust_env, headers=self.headers,
                max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES,
            )
        return self._session

    @property
    def closed(self) -> bool:
        return self._session is None or self._session.closed

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def trust(self, url: str | URL) -> None:
        """Connect to ``url``'s origin without vetting it: the operator configured it."""
        if self.resolver is not None:
            self.resolver.trusted.add(origin(URL(url)))

    def trusted(self, url: URL) -> bool:
        return self.resolver is None or origin(url) in self.resolver.trusted

    async def send(
        self, method: str, url: str | URL, *, configured: bool = True, credentials: bool | None = None,
        hops: list[str] | None = None, **kwargs: Any,
    ) -> aiohttp.ClientResponse:
        """The response to ``method url`` (the caller releases it, or uses ``async with``),
        after the redirects the policy follows; raises :class:`RedirectRefused` for one it does
        not follow, ``SsrfError`` for a hop the guard refuses, ``FetchError('scheme')`` for a
        hop that is not http(s). ``configured``: ``url`` comes from the operator's settings (its
        origin is trusted); False for a URL from elsewhere (a search result), vetted like a hop.
        ``credentials``: the request carries any (default: judged by its headers). ``hops``
        collects the URLs redirected from."""
        current = URL(url)
        if configured:
            self.trust(current)
        method = method.upper()
        credentialed = credentials if credentials is not None else (
            has_credentials(kwargs.get("headers")) or has_credentials(self.headers))
        followed = 0
        while True:
            if not self.trusted(current):
                await self.vet(current)
            response = await self.session.request(method, current, allow_redirects=False, **kwargs)
            if response.status not in REDIRECT_STATUSES:
                return response
            location = response.headers.get("Location")
            response.release()
            status = response.status
            if method not in ("GET", "HEAD") or credentialed or self.guard is None or not self.max_redirects:
                why = "it carries credentials" if credentialed else (
                    f"it is a {method}" if method not in ("GET", "HEAD") else "this client follows none")
                raise RedirectRefused("redirect", f"answered a redirect (HTTP {status}), not followed: {why}", status)
            if not location:
                raise RedirectRefused("redirect", f"answered a redirect (HTTP {status}) without a Location", status)
            if followed >= self.max_redirects:
                raise RedirectRefused("redirects", f"more than {self.max_redirects} redirects", status)
            if hops is not None:
                hops.append(str(current))
            current = current.join(URL(location))
            kwargs.pop("params", None)  # they are in the URL redirected from, not in its target
            followed += 1

    async def vet(self, url: URL) -> None:
        """Refuse a URL that is not http(s) or whose host the guard refuses (its answer is
        pinned for the connection)."""
        if url.scheme not in ("http", "https") or not url.host:
            raise FetchError("scheme", f"refusing {url}: only http(s) URLs with a host")
        if self.resolver is not None:
            await self.resolver.vet(url.host, origin(url)[1])


async def read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most ``max_bytes`` of the (decompressed) body, stopping there: (body, truncated)."""
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        buf += chunk
        if len(buf) > max_bytes:
            return bytes(buf[:max_bytes]), True
    return bytes(buf), False


def failure_reason(exc: BaseException) -> str:
    """A connection failure in words: what happened, never where (no address, no port, no
    exception text: those stay in the server's log)."""
    reasons: Iterable[tuple[type[BaseException], str]] = (
        (aiohttp.ClientConnectorDNSError, "its host name does not resolve"),
        (aiohttp.ClientConnectorCertificateError, "its TLS certificate was not accepted"),
        (aiohttp.ClientConnectorSSLError, "the TLS handshake failed"),
        (aiohttp.ClientSSLError, "the TLS connection failed"),
        (aiohttp.ClientProxyConnectionError, "the HTTP proxy refused the connection"),
        (aiohttp.ClientConnectorError, "the connection was refused or could not be made"),
        (aiohttp.ServerDisconnectedError, "the server closed the connection"),
        (aiohttp.ClientPayloadError, "the answer was cut off"),
        (aiohttp.ServerTimeoutError, "the server stopped answering (timeout)"),
        (TimeoutError, "the server did not answer in time"),
        (aiohttp.TooManyRedirects, "too many redirects"),
        (aiohttp.ClientResponseError, "the answer was not valid HTTP"),
        (aiohttp.InvalidURL, "its URL is not valid"),
        (aiohttp.ClientOSError, "the connection failed"),
        (ConnectionError, "the connection failed"),
    )
    return next((text for kind, text in reasons if isinstance(exc, kind)), "the request failed")
