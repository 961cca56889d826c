"""Combining web search providers (``CombinedSource``): URLs normalised, near-identical results
de-duplicated, providers queried concurrently and merged by rank, a broken one counted and
skipped; and the configured providers combined end to end against the local fake APIs."""

from __future__ import annotations

import asyncio
import time

from adapters.search import CombinedSource, build_web_sources, dedupe, normalise_url
from middleware.cache import MemoryCache
from middleware.types import Passage
from tests.adapters.search import test_providers
from tests.adapters.search.test_providers import NAMES, errors, settings_for

fake = test_providers.fake  # the fake provider APIs (a fixture)


class StaticSource:
    def __init__(self, name: str, passages: list[Passage], delay_s: float = 0.0, fail: bool = False):
        self.name, self.passages, self.delay_s, self.fail = name, passages, delay_s, fail

    async def search(self, query: str, k: int) -> list[Passage]:
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("broken source")
        return self.passages[:k]


def _p(provider: str, url: str, text: str) -> Passage:
    return Passage(id=f"{provider}:{url}", text=text, provider=provider, source=url, url=url)


def test_normalise_url() -> None:
    same = [
        "https://www.Example.org/a/b/?utm_source=x&y=2&x=1#frag",
        "http://example.org/a/b?x=1&y=2",
        "https://example.org:443/a/b/?x=1&y=2&fbclid=abc",
    ]
    assert len({normalise_url(u) for u in same}) == 1
    assert normalise_url("https://example.org/a") != normalise_url("https://example.org/b")
    assert normalise_url("https://example.org:8080/a") != normalise_url("https://example.org/a")


def test_dedupe_by_url_and_near_identical_text() -> None:
    kept = dedupe(
        [
            _p("a", "https://example.org/x", "The Eiffel Tower is 330 metres tall."),
            _p("b", "http://www.example.org/x/", "A different snippet of the same page."),
            _p("b", "https://mirror.net/x", "The Eiffel tower is 330 metres tall"),
            _p("c", "https://other.org/y", "Gustave Eiffel's company built the tower."),
        ]
    )
    assert [p.id for p in kept] == ["a:https://example.org/x", "c:https://other.org/y"]


async def test_combined_source_queries_concurrently_and_merges_by_rank() -> None:
    a = StaticSource("a", [_p("a", "https://a.org/1", "alpha one"), _p("a", "https://shared.org/", "shared page a")], 0.3)
    b = StaticSource("b", [_p("b", "https://b.org/1", "beta one is here"), _p("b", "https://shared.org", "zzz")], 0.3)
    broken = StaticSource("broken", [], fail=True)
    combined = CombinedSource([a, b, broken])
    before = errors("broken", "error")
    t0 = time.perf_counter()
    merged = await combined.search("q", 5)
    assert time.perf_counter() - t0 < 0.55
    assert [p.url for p in merged] == ["https://a.org/1", "https://b.org/1", "https://shared.org/"]
    assert errors("broken", "error") == before + 1
    assert len(await CombinedSource([a, b], limit=2).search("q", 5)) == 2


async def test_combined_web_providers_end_to_end(fake) -> None:
    apis, base = fake
    apis.script["brave"] = ["html"]
    [combined] = build_web_sources(settings_for(base, NAMES), cache=MemoryCache())
    try:
        passages = await combined.search("eiffel tower", 5)
    finally:
        await combined.aclose()
    assert isinstance(combined, CombinedSource) and combined.text_threshold == 90.0
    results = [normalise_url(p.url) for p in passages if p.start is None]  # whole results, not spans of a page
    assert len(results) == len(set(results))
    assert results.count(normalise_url("https://en.wikipedia.org/wiki/Eiffel_Tower")) == 1
    spans = [(p.url, p.start) for p in passages if p.start is not None]
    assert len(spans) == len(set(spans)) and len(spans) >= 2  # several intro windows of one article survive
    assert {p.provider for p in passages} >= {"searxng", "tavily", "wikipedia"}  # serper only repeats them
    assert "brave" not in {p.provider for p in passages}
