"""Web search providers against a local fake server answering in each provider's documented
response shape, plus garbage, HTML, timeouts, 429-then-200 and 5xx; their cache, metrics and
shared session. (Building them from settings: test_registry.py; combining them: test_combined.py.)"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from adapters.search import CombinedSource, WebProvider, build_providers
from adapters.search.wikipedia import sentence_windows
from middleware.cache import MemoryCache
from middleware.metrics import PROVIDER_ERRORS, STAGE_LATENCY
from middleware.settings import EvidenceSettings
from middleware.types import Passage

NAMES = ["searxng", "brave", "tavily", "serper", "wikipedia"]
KEYS = {"brave": "brave-key", "tavily": "tvly-key", "serper": "serper-key"}
EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889."
)
WIKI_EXTRACTS = {
    9232: (
        "Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
        "It is named after the engineer Gustave Eiffel. It was built from 1887 to 1889. "
        "Locally nicknamed \"La dame de fer\", it was constructed as the centrepiece of the 1889 World's Fair. "
        "It is 330 metres tall.\nThe tower has three levels for visitors.",
    ),
    10777: ("Gustave Eiffel", "Gustave Eiffel was a French civil engineer. His company built the Eiffel Tower."),
    55555: ("Eiffel (band)", ""),  # no extract: falls back to the search snippet
}


# --- the fake provider APIs ---------------------------------------------------------------


class FakeApis:
    """One aiohttp app serving all five APIs. ``script[name]`` lists behaviours consumed one
    per request (default ``ok``); ``requests[name]`` records what each request carried."""

    def __init__(self) -> None:
        self.script: dict[str, list[str]] = defaultdict(list)
        self.requests: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.delay_s = 0.6  # longer than the 0.2 s timeouts used with "slow"
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/searxng/search", self._handler("searxng", self.searxng)),
                web.get("/brave/res/v1/web/search", self._handler("brave", self.brave)),
                web.post("/tavily/search", self._handler("tavily", self.tavily)),
                web.post("/serper/search", self._handler("serper", self.serper)),
                web.get("/wikipedia/w/api.php", self._handler("wikipedia", self.wikipedia)),
            ]
        )

    def _handler(self, name: str, ok):
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.json() if request.method == "POST" else None
            self.requests[name].append({"query": dict(request.query), "headers": dict(request.headers), "json": body})
            behaviour = self.script[name].pop(0) if self.script[name] else "ok"
            if behaviour == "slow":
                await asyncio.sleep(self.delay_s)
            if behaviour == "garbage":
                return web.Response(body=b"\x00\x01 not json {", content_type="application/json")
            if behaviour == "html":
                return web.Response(text="<!DOCTYPE html><html><body>Too many requests</body></html>", content_type="text/html")
            if behaviour == "429":
                return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": "0"})
            if behaviour == "503":
                return web.Response(text="unavailable", status=503)
            if behaviour == "shape":
                return web.json_response({"web": {"results": "nope"}} if name == "brave" else {"unexpected": True})
            return await ok(request, body)

        return handle

    async def searxng(self, request: web.Request, _: Any) -> web.Response:
        assert request.query["format"] == "json"
        return web.json_response(
            {
                "query": request.query["q"],
                "number_of_results": 3,
                "results": [
                    {"url": "https://en.wikipedia.org/wiki/Eiffel_Tower", "title": "Eiffel Tower - Wikipedia",
                     "content": EIFFEL, "engine": "wikipedia", "engines": ["wikipedia", "google"], "score": 4.0,
                     "category": "general", "parsed_url": ["https", "en.wikipedia.org", "/wiki/Eiffel_Tower", "", "", ""]},
                    {"url": "https://www.toureiffel.paris/en", "title": "Official website",
                     "content": "Discover the <b>Eiffel</b> Tower &amp; its history.", "engine": "duckduckgo", "score": 1.0},
                    {"url": "https://example.org/no-text", "title": "Empty", "content": "", "engine": "bing"},
                ],
                "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": [],
            }
        )

    async def brave(self, request: web.Request, _: Any) -> web.Response:
        if request.headers.get("X-Subscription-Token") != KEYS["brave"]:
            return web.json_response({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}, status=422)
        results = [
            {"type": "search_result", "title": "Eiffel Tower - Wikipedia", "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
             "description": "The <strong>Eiffel Tower</strong> is a wrought-iron lattice tower in Paris.",
             "extra_snippets": ["It was completed in 1889.", "It is 330 m tall."],
             "meta_url": {"scheme": "https", "netloc": "en.wikipedia.org", "hostname": "en.wikipedia.org"}},
            {"type": "search_result", "title": "Tour Eiffel", "url": "https://www.toureiffel.paris/en",
             "description": "Official site of the <strong>Eiffel Tower</strong>.", "page_age": "2024-01-01T00:00:00"},
        ]
        count = int(request.query.get("count", "20"))
        return web.json_response(
            {"type": "search", "query": {"original": request.query["q"]}, "mixed": {"type": "mixed", "main": []},
             "web": {"type": "search", "results": results[:count], "family_friendly": True}}
        )

    async def tavily(self, _: web.Request, body: Any) -> web.Response:
        if body.get("api_key") != KEYS["tavily"]:
            return web.json_response({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401)
        return web.json_response(
            {"query": body["query"], "follow_up_questions": None, "answer": None, "images": [],
             "results": [
                 {"title": "Eiffel Tower - Wikipedia", "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                  "content": EIFFEL, "score": 0.98, "raw_content": None},
                 {"title": "History", "url": "https://www.toureiffel.paris/en/the-monument/history",
                  "content": "The tower was built for the 1889 World's Fair.", "score": 0.9, "raw_content": None},
             ][: body.get("max_results", 5)],
             "response_time": 1.2}
        )

    async def serper(self, request: web.Request, body: Any) -> web.Response:
        if request.headers.get("X-API-KEY") != KEYS["serper"]:
            return web.json_response({"message": "Unauthorized.", "statusCode": 403}, status=403)
        return web.json_response(
            {"searchParameters": {"q": body["q"], "type": "search", "engine": "google"},
             "knowledgeGraph": {"title": "Eiffel Tower", "type": "Tower"},
             "organic": [
                 {"title": "Eiffel Tower - Wikipedia", "link": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                  "snippet": EIFFEL, "position": 1},
                 {"title": "Tour Eiffel", "link": "https://www.toureiffel.paris/en", "snippet": "Official website.",
                  "sitelinks": [{"title": "Tickets", "link": "https://www.toureiffel.paris/en/tickets"}], "position": 2},
             ],
             "relatedSearches": [{"query": "eiffel tower height"}]}
        )

    async def wikipedia(self, request: web.Request, _: Any) -> web.Response:
        q = request.query
        assert q["action"] == "query" and q["format"] == "json" and q["formatversion"] == "2"
        if q.get("list") == "search":
            hits = [
                {"ns": 0, "title": title, "pageid": pageid, "size": 1000, "wordcount": 100,
                 "snippet": f'The <span class="searchmatch">{title}</span> snippet', "timestamp": "2024-01-01T00:00:00Z"}
                for pageid, (title, _) in WIKI_EXTRACTS.items()
            ][: int(q["srlimit"])]
            return web.json_response(
                {"batchcomplete": True, "continue": {"sroffset": 3, "continue": "-||"},
                 "query": {"searchinfo": {"totalhits": 1234}, "search": hits}}
            )
        assert q["prop"] == "extracts|info" and q["explaintext"] == "1" and q["exintro"] == "1"
        pages = []
        for pageid in map(int, q["pageids"].split("|")):
            title, extract = WIKI_EXTRACTS[pageid]
            page = {"pageid": pageid, "ns": 0, "title": title, "contentmodel": "wikitext", "pagelanguage": "en",
                    "fullurl": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}", "length": 1000}
            if extract:
                page["extract"] = extract
            pages.append(page)
        return web.json_response({"batchcomplete": True, "query": {"pages": pages}})


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApis, str]]:
    apis = FakeApis()
    runner = web.AppRunner(apis.app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield apis, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def settings_for(base: str, providers: list[str], **overrides: Any) -> EvidenceSettings:
    values: dict[str, Any] = {
        "providers": providers,
        "searxng_url": f"{base}/searxng",
        "brave_url": f"{base}/brave/res/v1/web/search",
        "tavily_url": f"{base}/tavily/search",
        "serper_url": f"{base}/serper/search",
        "wikipedia_url": f"{base}/wikipedia/w/api.php",
        "brave_api_key": KEYS["brave"],
        "tavily_api_key": KEYS["tavily"],
        "serper_api_key": KEYS["serper"],
        "search_timeout_s": 0.5,
        "search_retries": 2,
        "search_backoff_s": 0.01,
        "search_backoff_max_s": 0.05,
    }
    values.update(overrides)
    return EvidenceSettings(**values)


async def one(base: str, name: str, **overrides: Any) -> WebProvider:
    [provider] = build_providers(settings_for(base, [name], **overrides))
    return provider


def errors(name: str, kind: str) -> float:
    return PROVIDER_ERRORS.labels(provider=name, kind=kind)._value.get()


# --- documented shapes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
async def test_provider_turns_documented_answer_into_passages(fake, name: str) -> None:
    apis, base = fake
    provider = await one(base, name)
    try:
        passages = await provider.search("  Eiffel   Tower height ", 5)
    finally:
        await provider.aclose()
    assert passages, f"{name} returned nothing"
    for p in passages:
        assert p.provider == name and p.id.startswith(f"{name}:")
        assert p.url and p.source == p.url and p.title and p.text
        assert "<" not in p.text and "&amp;" not in p.text
    assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)
    assert passages[0].url == "https://en.wikipedia.org/wiki/Eiffel_Tower"
    assert len({p.id for p in passages}) == len(passages)
    sent = apis.requests[name][0]
    query = {"searxng": sent["query"].get("q"), "brave": sent["query"].get("q"), "wikipedia": sent["query"].get("srsearch"),
             "tavily": (sent["json"] or {}).get("query"), "serper": (sent["json"] or {}).get("q")}[name]
    assert query == "Eiffel Tower height"


async def test_snippet_text_is_cleaned_and_empty_results_skipped(fake) -> None:
    _, base = fake
    searx = await one(base, "searxng")
    brave = await one(base, "brave")
    try:
        s = await searx.search("eiffel", 10)
        b = await brave.search("eiffel", 10)
    finally:
        await searx.aclose()
    assert [p.text for p in s][1] == "Discover the Eiffel Tower & its history."
    assert all(p.url != "https://example.org/no-text" for p in s)
    assert b[0].text == "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889. It is 330 m tall."


async def test_k_limits_results_and_is_sent_to_the_api(fake) -> None:
    apis, base = fake
    providers = build_providers(settings_for(base, ["brave", "tavily", "serper"]))
    try:
        for provider in providers:
            assert len(await provider.search("eiffel", 1)) == 1
    finally:
        await providers[0].aclose()
    assert apis.requests["brave"][0]["query"]["count"] == "1"
    assert apis.requests["tavily"][0]["json"]["max_results"] == 1
    assert apis.requests["tavily"][0]["headers"]["Authorization"] == f"Bearer {KEYS['tavily']}"
    assert apis.requests["serper"][0]["json"]["num"] == 1


async def test_wikipedia_passages_are_intro_windows_round_robin_over_pages(fake) -> None:
    _, base = fake
    provider = await one(base, "wikipedia", wikipedia_pages=3)
    try:
        passages = await provider.search("eiffel", 10)
    finally:
        await provider.aclose()
    titles = [p.title for p in passages]
    assert titles[:3] == ["Eiffel Tower", "Gustave Eiffel", "Eiffel (band)"]
    extract = WIKI_EXTRACTS[9232][1]
    tower = [p for p in passages if p.title == "Eiffel Tower"]
    assert len(tower) == 3  # 5 sentences in the first paragraph -> 4 + 1, then the second paragraph
    for p in tower:
        assert extract[p.start : p.end] == p.text
    assert tower[0].text.count(". ") == 3
    band = next(p for p in passages if p.title == "Eiffel (band)")
    assert band.text == "The Eiffel (band) snippet" and band.url == "https://en.wikipedia.org/wiki/Eiffel_(band)"


def test_sentence_windows_keep_paragraphs_apart() -> None:
    text = "A one. B two! C three? D four. E five.\nF six."
    assert [text[s:e] for s, e in sentence_windows(text)] == ["A one. B two! C three? D four.", "E five.", "F six."]


# --- bad answers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("behaviour", "kind"), [("garbage", "bad_json"), ("html", "html"), ("shape", "bad_shape")])
async def test_bad_answer_is_a_logged_provider_error_and_no_results(fake, caplog, name, behaviour, kind) -> None:
    apis, base = fake
    apis.script[name] = [behaviour]
    provider = await one(base, name)
    before = errors(name, kind)
    try:
        assert await provider.search("eiffel", 5) == []
    finally:
        await provider.aclose()
    assert errors(name, kind) == before + 1
    assert any(name in r.getMessage() and kind in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", NAMES)
async def test_timeout_yields_no_results_within_the_budget(fake, name: str) -> None:
    apis, base = fake
    apis.script[name] = ["slow"]
    provider = await one(base, name, search_timeouts_s={name: 0.2})
    before = errors(name, "timeout")
    t0 = time.perf_counter()
    try:
        assert await provider.search("eiffel", 5) == []
    finally:
        await provider.aclose()
    assert time.perf_counter() - t0 < 1.0
    assert errors(name, "timeout") == before + 1


@pytest.mark.parametrize("name", NAMES)
async def test_429_then_200_is_retried(fake, name: str) -> None:
    apis, base = fake
    apis.script[name] = ["429"]
    provider = await one(base, name)
    try:
        assert await provider.search("eiffel", 5)
    finally:
        await provider.aclose()
    assert len(apis.requests[name]) == (3 if name == "wikipedia" else 2)  # wikipedia: 2 calls + 1 retry


async def test_persistent_5xx_gives_up_after_the_retries(fake) -> None:
    apis, base = fake
    apis.script["serper"] = ["503"] * 5
    provider = await one(base, "serper", search_retries=2)
    before = errors("serper", "http_5xx")
    try:
        assert await provider.search("eiffel", 5) == []
    finally:
        await provider.aclose()
    assert len(apis.requests["serper"]) == 3
    assert errors("serper", "http_5xx") == before + 1


async def test_unreachable_provider_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = await one(f"http://127.0.0.1:{port}", "searxng", search_retries=1)
    before = errors("searxng", "connection")
    try:
        assert await provider.search("eiffel", 5) == []
    finally:
        await provider.aclose()
    assert errors("searxng", "connection") == before + 1


async def test_wrong_key_is_a_client_error_without_retries(fake) -> None:
    apis, base = fake
    provider = await one(base, "brave", brave_api_key="wrong")
    try:
        assert await provider.search("eiffel", 5) == []
    finally:
        await provider.aclose()
    assert len(apis.requests["brave"]) == 1


async def test_empty_query_sends_nothing(fake) -> None:
    apis, base = fake
    provider = await one(base, "searxng")
    assert await provider.search("   ", 5) == [] and await provider.search("x", 0) == []
    await provider.aclose()
    assert not apis.requests["searxng"]


# --- cache, metrics, session ---------------------------------------------------------------


async def test_results_are_cached_per_provider_query_and_k(fake) -> None:
    apis, base = fake
    cache = MemoryCache()
    [provider] = build_providers(settings_for(base, ["tavily"]), cache=cache)
    try:
        first = await provider.search("eiffel tower", 2)
        again = await provider.search("eiffel  tower", 2)
        await provider.search("eiffel tower", 1)
    finally:
        await provider.aclose()
    assert first == again and isinstance(again[0], Passage)
    assert len(apis.requests["tavily"]) == 2


async def test_failures_are_not_cached(fake) -> None:
    apis, base = fake
    apis.script["serper"] = ["html"]
    [provider] = build_providers(settings_for(base, ["serper"]), cache=MemoryCache())
    try:
        assert await provider.search("eiffel", 3) == []
        assert await provider.search("eiffel", 3)
    finally:
        await provider.aclose()


async def test_searches_are_timed_into_the_search_stage(fake) -> None:
    _, base = fake
    provider = await one(base, "searxng")
    histogram = STAGE_LATENCY.labels(stage="search")
    before = _histogram_count(histogram)
    try:
        await provider.search("eiffel", 3)
    finally:
        await provider.aclose()
    assert _histogram_count(histogram) == before + 1


def _histogram_count(child) -> float:
    return next(s.value for m in child.collect() for s in m.samples if s.name.endswith("_count"))


async def test_providers_share_one_closable_session(fake) -> None:
    _, base = fake
    providers = build_providers(settings_for(base, NAMES))
    assert len({id(p.http) for p in providers}) == 1
    await providers[0].search("eiffel", 1)
    session = providers[0].http.session
    await providers[1].search("eiffel", 1)
    assert providers[1].http.session is session
    await CombinedSource(providers).aclose()
    assert session.closed
    assert await providers[2].search("eiffel", 1)  # a closed client reopens on use
    await providers[2].aclose()
