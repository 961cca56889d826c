"""Page fetching: the SSRF guard as the fetcher applies it (redirects, DNS rebinding), size and time
caps, content types, charsets, caching and metrics. Servers run on 127.0.0.1 only, which the
tests allowlist explicitly; a safety net refuses any non-loopback connection attempt. (The guard
on its own: test_ssrf.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from adapters.fetch import (
    FetchError,
    PageFetcher,
    SsrfError,
    SsrfGuard,
    decode_body,
    fetch_page,
)
from middleware.cache import MemoryCache
from middleware.metrics import PROVIDER_ERRORS, STAGE_LATENCY
from middleware.settings import EvidenceSettings
from tests.adapters.test_ssrf import fake_dns

ARTICLE = """<!DOCTYPE html><html><head><title>The Eiffel Tower</title></head><body>
<nav>Home | About | Contact</nav>
<article><h1>The Eiffel Tower</h1>
<p>The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.
It is named after the engineer Gustave Eiffel, whose company designed and built the tower.</p>
<p>Constructed from 1887 to 1889 as the centrepiece of the 1889 World's Fair, it was initially
criticised by some of France's leading artists and intellectuals for its design.</p>
</article><footer>Copyright notice</footer></body></html>"""
CAFE = "<html><body><article><p>Le café de la gare est très apprécié des habitants du quartier depuis des années.</p></article></body></html>"
RUSSIAN = (
    "Эйфелева башня — металлическая башня в центре Парижа, самая узнаваемая его архитектурная "
    "достопримечательность. Названа в честь главного конструктора Гюстава Эйфеля. "
)


pytestmark = pytest.mark.usefixtures("loopback_only")  # tests/adapters/conftest.py


class Site:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.port = 0
        self.app = web.Application()
        self.app.router.add_get("/{name}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] = self.hits.get(name, 0) + 1
        here = f"http://127.0.0.1:{self.port}"
        redirects = {
            "to-private": "http://10.0.0.5/secret",
            "to-other-loopback": f"http://127.0.0.2:{self.port}/page",
            "to-metadata": "http://169.254.169.254/latest/meta-data/",
            "to-metadata-v6": "http://[fd00:ec2::254]/latest/meta-data/",
            "to-metadata-name": "http://metadata.google.internal/computeMetadata/v1/",
            "to-ftp": "ftp://127.0.0.1/file",
            "to-page": "/page",
            "hop2": f"{here}/to-page",
            "loop": "/loop",
        }
        if name in redirects:
            raise web.HTTPFound(redirects[name])
        if name == "page":
            return web.Response(text=ARTICLE, content_type="text/html")
        if name == "plain":
            return web.Response(text="Just plain text.\nTwo lines.", content_type="text/plain")
        if name == "xhtml":
            return web.Response(text=ARTICLE, content_type="application/xhtml+xml")
        if name == "latin1":
            return web.Response(body=CAFE.encode("iso-8859-1"), headers={"Content-Type": "text/html; charset=ISO-8859-1"})
        if name == "meta":
            body = f'<html><head><meta charset="windows-1251"></head><body><article><p>{RUSSIAN}</p></article></body></html>'
            return web.Response(body=body.encode("cp1251"), headers={"Content-Type": "text/html"})
        if name == "detect":
            body = f"<html><body><article><p>{RUSSIAN * 3}</p></article></body></html>"
            return web.Response(body=body.encode("cp1251"), headers={"Content-Type": "text/html"})
        if name == "big":
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            await resp.prepare(request)
            chunk = b"<p>" + b"x" * 65_530 + b"</p>"
            for _ in range(200):  # ~13 MB if nobody stops reading
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        if name == "slow":
            await asyncio.sleep(1.0)
            return web.Response(text=ARTICLE, content_type="text/html")
        if name == "image":
            return web.Response(body=b"\x89PNG\r\n", content_type="image/png")
        if name == "json":
            return web.json_response({"a": 1})
        raise web.HTTPNotFound()


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    runner = web.AppRunner(s.app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    s.port = tcp._server.sockets[0].getsockname()[1]
    try:
        yield s
    finally:
        await runner.cleanup()


def settings(**overrides: Any) -> EvidenceSettings:
    values: dict[str, Any] = {"fetch_allowlist": ["127.0.0.1"], "fetch_timeout_s": 2.0, "fetch_max_redirects": 3}
    values.update(overrides)
    return EvidenceSettings(**values)


@pytest.fixture
async def fetcher() -> AsyncIterator[PageFetcher]:
    f = PageFetcher(settings())
    try:
        yield f
    finally:
        await f.aclose()


def url(site: Site, name: str) -> str:
    return f"http://127.0.0.1:{site.port}/{name}"


# --- fetching ------------------------------------------------------------------------------


async def test_fetches_main_text_and_title(site: Site, fetcher: PageFetcher) -> None:
    page = await fetcher.fetch(url(site, "page"))
    assert page.status == 200 and page.content_type == "text/html" and page.charset == "utf-8"
    assert page.title == "The Eiffel Tower"
    assert "wrought-iron lattice tower" in page.text and "1889 World's Fair" in page.text
    assert "Copyright notice" not in page.text and "Home | About" not in page.text
    assert not page.truncated and page.redirects == []


async def test_plain_text_and_xhtml_are_accepted(site: Site, fetcher: PageFetcher) -> None:
    plain = await fetcher.fetch(url(site, "plain"))
    assert plain.text == "Just plain text.\nTwo lines." and plain.title is None
    xhtml = await fetcher.fetch(url(site, "xhtml"))
    assert "Gustave Eiffel" in xhtml.text


@pytest.mark.parametrize("name", ["image", "json"])
async def test_other_content_types_are_refused(site: Site, fetcher: PageFetcher, name: str) -> None:
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(url(site, name))
    assert info.value.kind == "content_type"


async def test_charset_from_header(site: Site, fetcher: PageFetcher) -> None:
    page = await fetcher.fetch(url(site, "latin1"))
    assert page.charset == "iso8859-1" and "Le café de la gare est très apprécié" in page.text


async def test_charset_from_meta(site: Site, fetcher: PageFetcher) -> None:
    page = await fetcher.fetch(url(site, "meta"))
    assert page.charset == "cp1251" and "Эйфелева башня" in page.text


async def test_charset_detected_when_undeclared(site: Site, fetcher: PageFetcher) -> None:
    page = await fetcher.fetch(url(site, "detect"))
    assert "Эйфелева башня" in page.text and "Гюстава Эйфеля" in page.text


def test_decode_body_order_and_truncated_multibyte_tail() -> None:
    body = '<meta charset="utf-8"><p>naïve</p>'.encode("latin-1")  # meta lies; header is right
    assert decode_body(body, "latin-1") == ('<meta charset="utf-8"><p>naïve</p>', "iso8859-1")
    assert decode_body("ok é".encode()[:-1], "utf-8")[0] == "ok \ufffd"  # cut inside the last character
    assert decode_body("bogus".encode(), "no-such-charset")[0] == "bogus"


async def test_size_cap_stops_reading(site: Site) -> None:
    fetcher = PageFetcher(settings(fetch_max_bytes=100_000))
    try:
        page = await fetcher.fetch(url(site, "big"))
    finally:
        await fetcher.aclose()
    assert page.truncated
    assert len(page.text) <= 100_000


async def test_time_cap(site: Site) -> None:
    fetcher = PageFetcher(settings(fetch_timeout_s=0.2))
    t0 = time.perf_counter()
    try:
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url(site, "slow"))
    finally:
        await fetcher.aclose()
    assert info.value.kind == "timeout" and time.perf_counter() - t0 < 0.8


async def test_http_errors_and_bad_schemes(site: Site, fetcher: PageFetcher) -> None:
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(url(site, "missing"))
    assert info.value.kind == "http_404"
    for bad in ("file:///etc/passwd", "ftp://127.0.0.1/x", url(site, "to-ftp")):
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(bad)
        assert info.value.kind == "scheme"


# --- redirects -----------------------------------------------------------------------------


async def test_redirects_are_followed_and_recorded(site: Site, fetcher: PageFetcher) -> None:
    page = await fetcher.fetch(url(site, "hop2"))
    assert page.url == url(site, "page")
    assert page.redirects == [url(site, "hop2"), url(site, "to-page")]


async def test_redirect_limit(site: Site, fetcher: PageFetcher) -> None:
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(url(site, "loop"))
    assert info.value.kind == "redirects" and site.hits["loop"] == 4  # 1 + fetch_max_redirects


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("to-private", "private"),
        ("to-other-loopback", "loopback"),
        ("to-metadata", "cloud metadata"),
        ("to-metadata-v6", "cloud metadata"),
        ("to-metadata-name", "metadata"),
    ],
)
async def test_redirect_from_allowlisted_server_to_refused_address(site: Site, fetcher: PageFetcher, name, reason) -> None:
    with pytest.raises(SsrfError, match=reason):
        await fetcher.fetch(url(site, name))
    assert site.hits[name] == 1


async def test_direct_private_urls_are_refused_without_connecting(fetcher: PageFetcher) -> None:
    for target in ("http://10.0.0.1/", "http://[::1]:8080/", "http://169.254.169.254/latest/meta-data/", "http://0.0.0.0/"):
        with pytest.raises(SsrfError):
            await fetcher.fetch(target)


# --- DNS rebinding -------------------------------------------------------------------------


def _rebinding(first: str, then: str):
    answers = iter([[first]])

    def answer() -> list[str]:
        return next(answers, [then])

    return answer


async def test_connection_uses_the_vetted_address(site: Site) -> None:
    calls: list[str] = []
    dns = fake_dns({"rebind.test": _rebinding("127.0.0.1", "10.9.9.9")}, calls)
    fetcher = PageFetcher(settings(fetch_allowlist=["127.0.0.1/32"]), guard=SsrfGuard(["127.0.0.1/32"], getaddrinfo=dns))
    try:
        page = await fetcher.fetch(f"http://rebind.test:{site.port}/page")
    finally:
        await fetcher.aclose()
    assert "Gustave Eiffel" in page.text
    assert calls == ["rebind.test"]  # aiohttp connected to the pinned answer, no second lookup


async def test_a_second_dns_answer_is_vetted_again(site: Site) -> None:
    dns = fake_dns({"rebind.test": _rebinding("127.0.0.1", "10.9.9.9")})
    fetcher = PageFetcher(settings(), guard=SsrfGuard(["127.0.0.1/32"], getaddrinfo=dns))
    fetcher.resolver.pin_ttl_s = 0.0  # force aiohttp's own lookup through the resolver
    try:
        with pytest.raises(SsrfError, match="10.9.9.9, which is private"):
            await fetcher.fetch(f"http://rebind.test:{site.port}/page")
    finally:
        await fetcher.aclose()
    assert site.hits.get("page") is None


# --- cache, metrics, helpers ---------------------------------------------------------------


async def test_pages_are_cached(site: Site) -> None:
    fetcher = PageFetcher(settings(), cache=MemoryCache())
    try:
        first = await fetcher.fetch(url(site, "page"))
        second = await fetcher.fetch(url(site, "page"))
    finally:
        await fetcher.aclose()
    assert first == second and site.hits["page"] == 1


async def test_fetch_is_timed_and_failures_can_be_quiet(site: Site, fetcher: PageFetcher, caplog) -> None:
    child = STAGE_LATENCY.labels(stage="fetch")
    count = lambda: next(s.value for m in child.collect() for s in m.samples if s.name.endswith("_count"))  # noqa: E731
    before = count()
    refused = PROVIDER_ERRORS.labels(provider="fetch", kind="ssrf")._value.get()
    assert await fetcher.fetch_or_none(url(site, "to-private")) is None
    assert await fetcher.fetch_or_none(url(site, "page")) is not None
    assert count() == before + 2
    assert PROVIDER_ERRORS.labels(provider="fetch", kind="ssrf")._value.get() == refused + 1
    assert any("ssrf" in r.getMessage() for r in caplog.records)


async def test_fetch_page_one_shot(site: Site) -> None:
    page = await fetch_page(url(site, "plain"), settings())
    assert page.text.startswith("Just plain text")
    with pytest.raises(SsrfError):
        await fetch_page(url(site, "plain"), EvidenceSettings())  # loopback not allowlisted by default
