"""Web evidence as the engine gets it (``build_web_sources``): the providers merged and
de-duplicated with ``evidence.search_dedup_threshold``, and with ``evidence.fetch_pages`` the
top results' pages fetched through the SSRF guard, cut into passages and ranked with the
snippets. A fake SearxNG and Serper and the result pages are served on 127.0.0.1, which every
test allowlists explicitly; ``loopback_only`` (tests/adapters/conftest.py) fails any other connection."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from adapters.fetch import PageFetcher
from adapters.search import CombinedSource, PageSource, build_web_sources
from middleware.cache import MemoryCache
from middleware.metrics import PROVIDER_ERRORS
from middleware.commands.serve import start_site
from middleware.settings import EvidenceSettings
from middleware.types import Passage

pytestmark = pytest.mark.usefixtures("loopback_only")  # tests/adapters/conftest.py

QUERY = "When was the Eiffel Tower built?"
BUILT = "The Eiffel Tower was built from 1887 to 1889 as the entrance arch of the World's Fair."
ARTICLE = f"""<!DOCTYPE html><html><head><title>Eiffel Tower history</title></head><body>
<nav>Home | Shop | Contact</nav>
<article><h1>Eiffel Tower history</h1>
<p>{BUILT} Gustave Eiffel's company designed the iron lattice structure.</p>
<p>The restaurant on the second floor serves lunch and dinner. Visitors can buy their seats online.</p>
</article><footer>Copyright notice</footer></body></html>"""
# the same article on a mirror, one word changed: near-identical passages (rapidfuzz ratio ~99)
MIRROR = ARTICLE.replace("entrance arch", "entrance gate")


class Web:
    """A fake SearxNG (GET /searxng/search) and Serper (POST /serper/search) answering with
    ``results[name]``, and result pages under /page/{name}; ``hits`` counts page requests."""

    def __init__(self) -> None:
        self.port = 0
        self.hits: Counter[str] = Counter()
        self.results: dict[str, list[dict[str, str]]] = {"searxng": [], "serper": []}
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/searxng/search", self.searxng),
                web.post("/serper/search", self.serper),
                web.get("/page/{name}", self.page),
            ]
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, name: str) -> str:
        return f"{self.base}/page/{name}"

    async def searxng(self, _: web.Request) -> web.Response:
        return web.json_response({"results": self.results["searxng"]})

    async def serper(self, request: web.Request) -> web.Response:
        assert request.headers["X-API-KEY"] == "serper-key"
        organic = [{"link": r["url"], "title": r["title"], "snippet": r["content"]} for r in self.results["serper"]]
        return web.json_response({"organic": organic})

    async def page(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] += 1
        if name in ("article", "article-2"):
            return web.Response(text=ARTICLE, content_type="text/html")
        if name == "mirror":
            return web.Response(text=MIRROR, content_type="text/html")
        if name == "big":  # a valid article followed by ~200 kB of padding
            body = ARTICLE.replace("</footer>", "</footer>" + "<p>" + "padding " * 25_000 + "</p>")
            return web.Response(text=body, content_type="text/html")
        if name in ("slow", "lagging"):
            await asyncio.sleep(1.0 if name == "slow" else 0.3)
            return web.Response(text=ARTICLE, content_type="text/html")
        if name == "image":
            return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
        raise web.HTTPNotFound()


@pytest.fixture
async def site() -> AsyncIterator[Web]:
    w = Web()
    runner, w.port = await start_site(w.app, "127.0.0.1", 0)
    try:
        yield w
    finally:
        await runner.cleanup()


def result(url: str, content: str, title: str = "Eiffel Tower") -> dict[str, str]:
    return {"url": url, "title": title, "content": content}


def settings(w: Web, **overrides: Any) -> EvidenceSettings:
    values: dict[str, Any] = {
        "providers": ["index", "searxng"],
        "searxng_url": f"{w.base}/searxng",
        "serper_url": f"{w.base}/serper/search",
        "serper_api_key": "serper-key",
        "search_timeout_s": 2.0,
        "search_retries": 0,
        "fetch_pages": True,
        "fetch_allowlist": ["127.0.0.1"],  # the fake pages are on loopback, which the guard refuses by default
        "fetch_timeout_s": 2.0,
        "passage_sentences": 2,
        "passage_stride": 2,
    }
    values.update(overrides)
    return EvidenceSettings(**values)


async def search(ev: EvidenceSettings, query: str = QUERY, k: int = 10, cache: MemoryCache | None = None) -> list[Passage]:
    [source] = build_web_sources(ev, cache=cache)
    try:
        return await source.search(query, k)
    finally:
        await source.aclose()


def from_page(p: Passage) -> bool:
    return p.start is not None and ":page:" in p.id


def errors(kind: str) -> float:
    return PROVIDER_ERRORS.labels(provider="fetch", kind=kind)._value.get()


# --- building ------------------------------------------------------------------------------


def test_one_web_source_or_none(site: Web) -> None:
    assert build_web_sources(EvidenceSettings(providers=["index", "context"])) == []
    [plain] = build_web_sources(settings(site, providers=["searxng", "serper"], fetch_pages=False, search_dedup_threshold=75))
    assert isinstance(plain, CombinedSource) and plain.text_threshold == 75
    assert [s.name for s in plain.sources] == ["searxng", "serper"]
    [paged] = build_web_sources(settings(site, fetch_pages_per_query=4))
    assert isinstance(paged, PageSource) and isinstance(paged.results, CombinedSource)
    assert paged.pages == 4 and (paged.window, paged.stride) == (2, 2)


def test_the_composition_root_hands_the_engine_this_source(site: Web) -> None:
    from middleware.composition import providers
    from middleware.composition.pipeline import build_sources
    from middleware.settings import Settings

    config = Settings(evidence=settings(site, providers=["searxng", "wikipedia"]))
    [web_source] = build_sources(config, None, MemoryCache(), providers())
    assert isinstance(web_source, PageSource)
    assert [s.name for s in web_source.results.sources] == ["searxng", "wikipedia"]


# --- fetch_pages ---------------------------------------------------------------------------


async def test_fetch_pages_off_never_fetches(site: Web) -> None:
    site.results["searxng"] = [result(site.url("article"), "The Eiffel Tower is a landmark in Paris.")]
    passages = await search(settings(site, fetch_pages=False))
    assert [p.text for p in passages] == ["The Eiffel Tower is a landmark in Paris."]
    assert site.hits == Counter()


async def test_page_passages_are_ranked_with_the_snippets(site: Web) -> None:
    site.results["searxng"] = [
        result(site.url("article"), "The Eiffel Tower is a landmark in Paris."),
        result("https://example.org/elsewhere", "Paris is the capital of France.", title="Paris"),
    ]
    passages = await search(settings(site, fetch_pages_per_query=1))
    assert site.hits == Counter({"article": 1})  # only the top result's page, once
    page = [p for p in passages if from_page(p)]
    assert page and all(p.url == site.url("article") and p.provider == "searxng" for p in page)
    assert all(p.title == "Eiffel Tower history" for p in page)
    best = passages[0]
    assert from_page(best) and BUILT in best.text  # the page answers the question; its snippet does not
    texts = [p.text for p in passages]
    landmark = texts.index("The Eiffel Tower is a landmark in Paris.")
    restaurant = next(i for i, p in enumerate(passages) if "restaurant" in p.text)
    assert landmark < restaurant  # a relevant snippet outranks an irrelevant page passage
    assert "Paris is the capital of France." in texts


async def test_candidates_are_capped_by_k_or_the_snippet_count(site: Web) -> None:
    site.results["searxng"] = [result(site.url("article"), "The Eiffel Tower is a landmark in Paris.")]
    passages = await search(settings(site), k=2)
    assert len(passages) == 2 and from_page(passages[0])
    assert len(await search(settings(site), k=10)) > 2


@pytest.mark.parametrize(
    ("page", "overrides", "kind"),
    [
        ("big", {"fetch_max_bytes": 20_000}, "too_big"),
        ("slow", {"fetch_timeout_s": 0.2}, "timeout"),
        ("image", {}, "content_type"),
        ("missing", {}, "http_404"),
    ],
)
async def test_a_failed_page_falls_back_to_its_snippet(site: Web, page: str, overrides: dict, kind: str) -> None:
    site.results["searxng"] = [result(site.url(page), "The Eiffel Tower is a landmark in Paris.")]
    before = errors(kind)
    t0 = time.perf_counter()
    passages = await search(settings(site, **overrides))
    assert time.perf_counter() - t0 < 1.0
    assert [p.text for p in passages] == ["The Eiffel Tower is a landmark in Paris."]
    assert site.hits[page] == 1 and errors(kind) == before + 1


async def test_the_size_cap_is_what_refuses_the_big_page(site: Web) -> None:
    site.results["searxng"] = [result(site.url("big"), "The Eiffel Tower is a landmark in Paris.")]
    passages = await search(settings(site, fetch_max_bytes=1_000_000))
    assert any(from_page(p) and BUILT in p.text for p in passages)


async def test_refused_addresses_are_never_contacted(site: Web) -> None:
    snippets = [
        result("http://10.0.0.5/secret", "A private address."),
        result("http://169.254.169.254/latest/meta-data/", "The cloud metadata service."),
        result(f"http://127.0.0.2:{site.port}/page/article", "Loopback, but not the allowlisted address."),
    ]
    site.results["searxng"] = snippets
    before = errors("ssrf")
    passages = await search(settings(site))
    assert [p.text for p in passages] == [s["content"] for s in snippets]
    assert errors("ssrf") == before + 3 and site.hits == Counter()


async def test_loopback_needs_the_allowlist(site: Web) -> None:
    site.results["searxng"] = [result(site.url("article"), "The Eiffel Tower is a landmark in Paris.")]
    passages = await search(settings(site, fetch_allowlist=[]))
    assert [p.text for p in passages] == ["The Eiffel Tower is a landmark in Paris."]
    assert site.hits == Counter()


async def test_one_failed_page_leaves_the_others(site: Web) -> None:
    site.results["searxng"] = [
        result("http://10.0.0.5/secret", "A private address."),
        result(site.url("article"), "The Eiffel Tower is a landmark in Paris."),
    ]
    passages = await search(settings(site))
    assert "A private address." in [p.text for p in passages]
    assert any(from_page(p) and p.url == site.url("article") for p in passages)


async def test_a_crash_while_fetching_one_page_is_logged_not_raised(site: Web, monkeypatch, caplog) -> None:
    fetch = PageFetcher.fetch

    async def crash_on_mirror(self: PageFetcher, url: str) -> Any:
        if url.endswith("/mirror"):
            raise RuntimeError("parser exploded")
        return await fetch(self, url)

    monkeypatch.setattr(PageFetcher, "fetch", crash_on_mirror)
    site.results["searxng"] = [
        result(site.url("mirror"), "A copy of the Eiffel Tower history page."),
        result(site.url("article"), "The Eiffel Tower is a landmark in Paris."),
    ]
    passages = await search(settings(site))
    assert "A copy of the Eiffel Tower history page." in [p.text for p in passages]
    assert {p.url for p in passages if from_page(p)} == {site.url("article")}  # the other page still counts
    assert any(r.exc_info and "parser exploded" in str(r.exc_info[1]) for r in caplog.records)


async def test_a_broken_result_source_gives_no_passages(site: Web, caplog) -> None:
    class Broken:
        name = "broken"

        async def search(self, query: str, k: int) -> list[Passage]:
            raise RuntimeError("no contract")

    source = PageSource(Broken(), PageFetcher(settings(site)))
    try:
        assert await source.search(QUERY, 5) == []
    finally:
        await source.aclose()
    assert any("web page evidence failed" in r.getMessage() for r in caplog.records)


async def test_concurrent_searches_share_a_fetch_and_pages_are_cached(site: Web) -> None:
    site.results["searxng"] = [result(site.url("lagging"), "The Eiffel Tower is a landmark in Paris.")]
    [source] = build_web_sources(settings(site), cache=None)
    try:  # the page takes 0.3 s, so the second search asks for it while the first is fetching it
        first = await asyncio.gather(source.search(QUERY, 5), source.search("Who designed the Eiffel Tower?", 5))
        assert site.hits["lagging"] == 1 and all(any(from_page(p) for p in ps) for ps in first)
        await source.search("Eiffel Tower restaurant", 5)
        assert site.hits["lagging"] == 2  # no cache: a later search fetches again
    finally:
        await source.aclose()
    site.results["searxng"] = [result(site.url("article"), "The Eiffel Tower is a landmark in Paris.")]
    cache = MemoryCache()
    await search(settings(site), cache=cache)
    await search(settings(site), query="Eiffel Tower restaurant", cache=cache)
    assert site.hits["article"] == 1  # with a cache: once, then from the cache


# --- search_dedup_threshold ----------------------------------------------------------------


async def test_dedup_threshold_merges_near_duplicate_results_across_providers(site: Web) -> None:
    site.results["searxng"] = [result("https://a.example/1", "The Eiffel Tower was built from 1887 to 1889 for the World's Fair in Paris.")]
    site.results["serper"] = [
        result("https://b.example/2", "The Eiffel Tower was built between 1887 and 1889 for the World's Fair in Paris."),
        result("https://c.example/3", "Gustave Eiffel's company designed the tower."),
    ]
    ev = {"providers": ["searxng", "serper"], "fetch_pages": False}
    strict = await search(settings(site, search_dedup_threshold=100, **ev))
    loose = await search(settings(site, search_dedup_threshold=85, **ev))
    assert len(strict) == 3
    assert [p.url for p in loose] == ["https://a.example/1", "https://c.example/3"]


async def test_dedup_threshold_applies_to_page_passages(site: Web) -> None:
    site.results["searxng"] = [
        result(site.url("article"), "The Eiffel Tower is a landmark in Paris."),
        result(site.url("mirror"), "A copy of the Eiffel Tower history page."),
    ]
    strict = await search(settings(site, search_dedup_threshold=100))
    loose = await search(settings(site, search_dedup_threshold=90))
    pages = lambda ps: Counter(p.url for p in ps if from_page(p))  # noqa: E731
    assert set(pages(strict)) == {site.url("article"), site.url("mirror")}
    assert set(pages(loose)) == {site.url("article")}  # the mirror's passages repeat the article's
    assert sum(pages(strict).values()) > sum(pages(loose).values())


async def test_a_page_keeps_all_its_passages_under_one_url(site: Web) -> None:
    site.results["searxng"] = [result(site.url("article"), "The Eiffel Tower is a landmark in Paris.")]
    passages = await search(settings(site, search_dedup_threshold=100))
    assert len([p for p in passages if from_page(p)]) >= 2


async def test_a_cancelled_search_leaves_the_fetch_to_others_until_closed(site: Web) -> None:
    site.results["searxng"] = [result(site.url("slow"), "The Eiffel Tower is a landmark in Paris.")]
    [source] = build_web_sources(settings(site))
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(source.search(QUERY, 5), 0.3)  # the sentence budget ran out
        [fetch] = source._inflight.values()
        assert not fetch.done()  # shielded: still fetching for the next search (and the cache)
    finally:
        t0 = time.perf_counter()
        await source.aclose()
    assert fetch.cancelled() and not source._inflight and time.perf_counter() - t0 < 0.5
