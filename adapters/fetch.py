"""Safe page fetching: the main text of a web page, for evidence.

Limits: a size cap (the body is streamed and reading stops at the cap), a time cap over the
whole fetch including redirects, an accepted content-type list, and a redirect limit (redirects
are followed here, one hop at a time, so each target is vetted).

SSRF guard (``adapters.ssrf``): every hop's host is resolved (all A/AAAA records) and refused if
any address is loopback, private, link-local, multicast, unspecified, reserved or a
cloud-metadata address, unless the host or a CIDR holding the address is in
``evidence.fetch_allowlist``. The session is an ``adapters.http.OutboundClient`` that connects
through the guard's resolver, which hands aiohttp only the addresses the guard vetted, so a
second DNS answer (DNS rebinding) can never be used for the connection; no page URL counts as
configured, and the environment's proxies are never used.

Charset: the Content-Type header, then a ``<meta>`` declaration, then detection
(charset-normalizer); main text by trafilatura.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import re

import aiohttp
from pydantic import BaseModel
from yarl import URL

from adapters.http import OutboundClient, failure_reason, read_capped
from adapters.ssrf import (  # noqa: F401 - the guard's names, as this module has always offered them
    METADATA_HOSTS,
    METADATA_IPS,
    FetchError,
    GuardedResolver,
    SsrfError,
    SsrfGuard,
    refusal_reason,
)
from middleware.cache import Cache, cached, hash_key
from middleware.metrics import PROVIDER_ERRORS, timed
from middleware.settings import EvidenceSettings, Settings

log = logging.getLogger(__name__)

ACCEPTED_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


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
        self.client = OutboundClient(
            timeout=aiohttp.ClientTimeout(total=self.timeout_s), guard=self.guard, max_redirects=self.max_redirects,
            trust_env=False,  # a proxy would resolve hosts itself, past the guard
            headers={"User-Agent": self.user_agent, "Accept": "text/html,application/xhtml+xml,text/plain"}, limit=64,
        )
        assert self.client.resolver is not None
        self.resolver = self.client.resolver

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
        await self.client.close()

    async def _fetch(self, url: str) -> Page:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._follow(url)
        except TimeoutError as exc:
            raise FetchError("timeout", f"fetch of {url} took longer than {self.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise FetchError("connection", f"fetch of {url} failed: {failure_reason(exc)}") from exc

    async def _follow(self, url: str) -> Page:
        """Each hop vetted (no page URL is configured), at most ``fetch_max_redirects``."""
        hops: list[str] = []
        async with await self.client.send("GET", url, configured=False, hops=hops) as resp:
            return await self._read(resp, URL(resp.url), hops)

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


async def fetch_page(url: str, settings: Settings | EvidenceSettings, *, cache: Cache | None = None) -> Page:
    """One-shot fetch with its own session (use a :class:`PageFetcher` for many pages)."""
    fetcher = PageFetcher(settings, cache=cache)
    try:
        return await fetcher.fetch(url)
    finally:
        await fetcher.aclose()
