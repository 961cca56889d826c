"""Safe page fetching: the main text of a web page, for evidence.

Limits: a size cap (the body is streamed and reading stops at the cap), a time cap over the
whole fetch including redirects, an accepted content-type list, and a redirect limit (redirects
are followed here, one hop at a time, so each target is vetted).

SSRF guard: every hop's host is resolved (all A/AAAA records) and refused if any address is
loopback, private, link-local, multicast, unspecified, reserved or a cloud-metadata address,
unless the host or a CIDR holding the address is in ``evidence.fetch_allowlist``. The session
connects through :class:`GuardedResolver`, which hands aiohttp only the addresses the guard
vetted, so a second DNS answer (DNS rebinding) can never be used for the connection.

Charset: the Content-Type header, then a ``<meta>`` declaration, then detection
(charset-normalizer); main text by trafilatura.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from pydantic import BaseModel
from yarl import URL

from middleware.cache import Cache, cached, hash_key
from middleware.metrics import PROVIDER_ERRORS, timed
from middleware.settings import EvidenceSettings, Settings

log = logging.getLogger(__name__)

ACCEPTED_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_PIN_TTL_S = 30.0

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata"})
METADATA_IPS = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
GetAddrInfo = Callable[..., Awaitable[list[tuple[Any, ...]]]]


class FetchError(Exception):
    """A page could not be fetched; ``kind`` names why (metrics, logs)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class SsrfError(FetchError):
    """The SSRF guard refused a URL."""

    def __init__(self, message: str):
        super().__init__("ssrf", message)


class Page(BaseModel):
    """A fetched page: final URL after redirects, decoded main text and title."""

    url: str
    status: int
    content_type: str
    charset: str
    title: str | None = None
    text: str
    truncated: bool = False
    redirects: list[str] = []


def refusal_reason(ip: IPAddress) -> str | None:
    """Why the guard refuses ``ip`` (None: a public address). IPv6 forms that embed an IPv4
    address (mapped, 6to4, Teredo, NAT64) are judged by the embedded address too."""
    embedded = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    if embedded is not None and (reason := refusal_reason(embedded)):
        return reason
    if ip in METADATA_IPS:
        return "cloud metadata"
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


class SsrfGuard:
    """Resolves hosts and refuses non-public addresses unless allowlisted.

    ``allowlist`` entries are host names (``example.org``; ``.example.org`` also matches its
    subdomains) or IP addresses / CIDRs (``127.0.0.1``, ``10.0.0.0/8``)."""

    def __init__(self, allowlist: Iterable[str] = (), *, getaddrinfo: GetAddrInfo | None = None):
        self.hosts: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allowlist:
            entry = entry.strip().lower()
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.hosts.add(entry.rstrip("."))
        self._getaddrinfo = getaddrinfo

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(h.startswith(".") and host.endswith(h) for h in self.hosts)

    def check_ip(self, ip: IPAddress, host: str | None = None) -> None:
        """Raise :class:`SsrfError` unless ``ip`` is public or allowlisted."""
        if any(ip in net for net in self.networks):
            return
        reason = refusal_reason(ip)
        if reason:
            shown = f"{host} resolves to {ip}, which" if host and host != str(ip) else str(ip)
            raise SsrfError(f"refused to fetch: {shown} is {reason}")

    async def resolve(self, host: str, port: int) -> list[ResolveResult]:
        """All vetted addresses of ``host`` (raises :class:`SsrfError` if any is refused)."""
        host = host.lower().rstrip(".")
        literal = _ip_literal(host)
        allowed_name = self.host_allowed(host)
        if literal is not None:
            if not allowed_name:
                self.check_ip(literal)
            return [_result(host, literal, port)]
        if host in METADATA_HOSTS and not allowed_name:
            raise SsrfError(f"refused to fetch: {host} is a cloud metadata host")
        getaddrinfo = self._getaddrinfo or asyncio.get_running_loop().getaddrinfo
        try:
            infos = await getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise FetchError("dns", f"cannot resolve {host}: {exc}") from exc
        ips = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
        if not ips:
            raise FetchError("dns", f"{host} has no addresses")
        if not allowed_name:
            for ip in ips:
                self.check_ip(ip, host)
        return [_result(host, ip, port) for ip in ips]


class GuardedResolver(AbstractResolver):
    """aiohttp resolver that only ever returns addresses the guard vetted.

    :meth:`vet` resolves and vets a host (raising :class:`SsrfError`) and pins the answer for a
    short while; :meth:`resolve` (called by aiohttp when it opens a connection) returns the
    pinned answer, or vets afresh, so the connection goes to a vetted address."""

    def __init__(self, guard: SsrfGuard, pin_ttl_s: float = _PIN_TTL_S):
        self.guard = guard
        self.pin_ttl_s = pin_ttl_s
        self._pins: dict[tuple[str, int], tuple[float, list[ResolveResult]]] = {}

    async def vet(self, host: str, port: int) -> list[ResolveResult]:
        key = (host.lower().rstrip("."), port)
        pinned = self._pins.get(key)
        if pinned and pinned[0] > time.monotonic():
            return pinned[1]
        results = await self.guard.resolve(host, port)
        now = time.monotonic()
        if len(self._pins) > 1024:
            self._pins = {k: v for k, v in self._pins.items() if v[0] > now}
        self._pins[key] = (now + self.pin_ttl_s, results)
        return results

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[ResolveResult]:
        results = await self.vet(host, port)
        if family in (socket.AF_INET, socket.AF_INET6):
            results = [r for r in results if r["family"] == family]
        if not results:
            raise OSError(f"no vetted {family!r} address for {host}")
        return results

    async def close(self) -> None:
        self._pins.clear()


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _result(host: str, ip: IPAddress, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return ResolveResult(
        hostname=host, host=str(ip), port=port, family=family, proto=socket.IPPROTO_TCP, flags=socket.AI_NUMERICHOST
    )


async def read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most ``max_bytes`` of the (decompressed) body, stopping there: (body, truncated)."""
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        buf += chunk
        if len(buf) > max_bytes:
            return bytes(buf[:max_bytes]), True
    return bytes(buf), False


def decode_body(body: bytes, header_charset: str | None) -> tuple[str, str]:
    """Decode with the header charset, else a ``<meta>`` charset, else detection.
    Returns (text, charset used)."""
    candidates = [header_charset, _bom_charset(body), _meta_charset(body)]
    for name in candidates:
        text = _try_decode(body, name)
        if text is not None:
            return text, codecs.lookup(name).name  # type: ignore[arg-type]
    detected = _detect_charset(body)
    if detected and (text := _try_decode(body, detected)) is not None:
        return text, codecs.lookup(detected).name
    return body.decode("utf-8", errors="replace"), "utf-8"


def _bom_charset(body: bytes) -> str | None:
    for bom, name in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if body.startswith(bom):
            return name
    return None


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:4096])
    return match.group(1).decode("ascii") if match else None


def _detect_charset(body: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    return best.encoding if best else None


def _try_decode(body: bytes, charset: str | None) -> str | None:
    """Strict decode; tolerate only a character cut at the very end (a capped body)."""
    if not charset:
        return None
    try:
        codecs.lookup(charset)
    except LookupError:
        return None
    try:
        return body.decode(charset)
    except UnicodeDecodeError as exc:
        if exc.start >= len(body) - 4:
            return body.decode(charset, errors="replace")
        return None


def extract_main_text(markup: str, url: str | None = None) -> tuple[str, str | None]:
    """(main text, title) of an HTML page by trafilatura; falls back to all visible text."""
    import trafilatura  # heavy import, only needed once a page is fetched

    doc = trafilatura.bare_extraction(
        markup, url=url, with_metadata=True, include_comments=False, include_tables=True
    )
    title = getattr(doc, "title", None) if doc is not None else None
    text = (getattr(doc, "text", None) or "") if doc is not None else ""
    if not text.strip():
        text = trafilatura.html2txt(markup) or ""
    return text.strip(), title


class PageFetcher:
    """Fetches pages under the limits and SSRF guard of ``evidence`` settings.

    One aiohttp session (created lazily, closed by :meth:`aclose`); pages cached under
    ``page:<sha256(url)>`` when a cache is given."""

    def __init__(
        self,
        settings: Settings | EvidenceSettings,
        *,
        cache: Cache | None = None,
        guard: SsrfGuard | None = None,
    ):
        ev = settings.evidence if isinstance(settings, Settings) else settings
        self.max_bytes = ev.fetch_max_bytes
        self.timeout_s = ev.fetch_timeout_s
        self.max_redirects = ev.fetch_max_redirects
        self.ttl_s = ev.cache_ttl_s
        self.user_agent = ev.http_user_agent
        self.cache = cache
        self.guard = guard or SsrfGuard(ev.fetch_allowlist)
        self.resolver = GuardedResolver(self.guard)
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, url: str) -> Page:
        """The page at ``url``; raises :class:`FetchError` (or :class:`SsrfError`), counted in
        ``factcheck_provider_errors_total{provider="fetch", kind}``."""
        with timed("fetch"):
            try:
                return await cached(
                    self.cache,
                    hash_key(url),
                    lambda: self._fetch(url),
                    kind="page",
                    ttl_s=self.ttl_s,
                    dump=lambda page: page.model_dump(mode="json"),
                    load=Page.model_validate,
                )
            except FetchError as exc:
                PROVIDER_ERRORS.labels(provider="fetch", kind=exc.kind).inc()
                raise

    async def fetch_or_none(self, url: str) -> Page | None:
        """Like :meth:`fetch` but logs a failure and returns None."""
        try:
            return await self.fetch(url)
        except FetchError as exc:
            log.warning("fetch of %s failed (%s): %s", url, exc.kind, exc)
            return None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _fetch(self, url: str) -> Page:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._follow(url)
        except TimeoutError as exc:
            raise FetchError("timeout", f"fetch of {url} took longer than {self.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise FetchError("connection", f"fetch of {url} failed: {exc!r}") from exc

    async def _follow(self, url: str) -> Page:
        current = URL(url)
        hops: list[str] = []
        session = self._get_session()
        for _ in range(self.max_redirects + 1):
            await self._vet(current)
            async with session.get(current, allow_redirects=False) as resp:
                if resp.status in _REDIRECTS:
                    location = resp.headers.get("Location")
                    if not location:
                        raise FetchError("redirect", f"{current} redirects without a Location")
                    hops.append(str(current))
                    current = current.join(URL(location))
                    continue
                return await self._read(resp, current, hops)
        raise FetchError("redirects", f"more than {self.max_redirects} redirects from {url}")

    async def _vet(self, url: URL) -> None:
        if url.scheme not in ("http", "https") or not url.host:
            raise FetchError("scheme", f"refusing to fetch {url}: only http(s) URLs with a host")
        await self.resolver.vet(url.host, url.port or (443 if url.scheme == "https" else 80))

    async def _read(self, resp: aiohttp.ClientResponse, url: URL, hops: list[str]) -> Page:
        if resp.status >= 400:
            raise FetchError(f"http_{resp.status}", f"{url} answered HTTP {resp.status}")
        ctype = resp.content_type.lower()
        if ctype not in ACCEPTED_TYPES:
            raise FetchError("content_type", f"{url} is {ctype}, not one of {sorted(ACCEPTED_TYPES)}")
        body, truncated = await read_capped(resp, self.max_bytes)
        text, charset = decode_body(body, resp.charset)
        if ctype == "text/plain":
            main, title = text.strip(), None
        else:
            main, title = await asyncio.to_thread(extract_main_text, text, str(url))
        return Page(
            url=str(url), status=resp.status, content_type=ctype, charset=charset,
            title=title, text=main, truncated=truncated, redirects=hops,
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(resolver=self.resolver, use_dns_cache=False, limit=64)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # a proxy would resolve hosts itself, past the guard
                headers={"User-Agent": self.user_agent, "Accept": "text/html,application/xhtml+xml,text/plain"},
            )
        return self._session


async def fetch_page(url: str, settings: Settings | EvidenceSettings, *, cache: Cache | None = None) -> Page:
    """One-shot fetch with its own session (use a :class:`PageFetcher` for many pages)."""
    fetcher = PageFetcher(settings, cache=cache)
    try:
        return await fetcher.fetch(url)
    finally:
        await fetcher.aclose()
