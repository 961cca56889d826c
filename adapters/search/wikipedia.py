"""Wikipedia (any MediaWiki with TextExtracts): ``list=search`` finds the top pages, then
``prop=extracts`` (plain-text intro) with ``prop=info&inprop=url`` gives their text and URL.
Each intro becomes passages of up to four sentences (per paragraph), taken round-robin over
the pages so every top page contributes its lead first; a page without an extract falls back
to its search snippet."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from adapters.search.base import WebProvider, clean_text, result_list
from adapters.search.errors import ProviderError
from middleware.text.evidence_sentences import split_sentences
from middleware.types import Passage

SENTENCES_PER_PASSAGE = 4
MAX_EXTRACTS = 20  # exlimit's largest value for intro extracts


class WikipediaSource(WebProvider):
    name = "wikipedia"

    def __init__(self, api_url: str, pages: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.api_url = api_url
        self.pages = pages

    async def _search(self, query: str, k: int) -> list[Passage]:
        hits = await self._find_pages(query, min(self.pages, k, MAX_EXTRACTS))
        if not hits:
            return []
        pages = await self._extracts([h["pageid"] for h in hits])
        per_page = [self._page_passages(rank, hit, pages.get(hit["pageid"], {})) for rank, hit in enumerate(hits)]
        ordered = [p for group in zip_longest(*per_page) for p in group if p is not None][:k]
        for rank, p in enumerate(ordered):
            p.score = 1.0 / (1 + rank)  # the rank prior follows the round-robin order
        return ordered

    async def _find_pages(self, query: str, n: int) -> list[dict[str, Any]]:
        data = await self._query(list="search", srsearch=query, srlimit=str(n), srprop="snippet")
        hits = result_list(data, "query", "search")
        return [h for h in hits if isinstance(h.get("pageid"), int)][:n]

    async def _extracts(self, pageids: list[int]) -> dict[int, dict[str, Any]]:
        data = await self._query(
            prop="extracts|info", inprop="url", exintro="1", explaintext="1",
            exlimit=str(len(pageids)), pageids="|".join(map(str, pageids)),
        )
        return {p["pageid"]: p for p in result_list(data, "query", "pages") if isinstance(p.get("pageid"), int)}

    async def _query(self, **params: str) -> Any:
        data = await self.http.request_json(
            "GET",
            self.api_url,
            params={"action": "query", "format": "json", "formatversion": "2", **params},
            headers={"Accept": "application/json"},
        )
        if isinstance(data, dict) and "error" in data:
            error = data["error"]
            info = error.get("info") if isinstance(error, dict) else error
            raise ProviderError("api_error", f"MediaWiki error: {info}")
        return data

    def _page_passages(self, rank: int, hit: dict[str, Any], page: dict[str, Any]) -> list[Passage]:
        title = page.get("title") or hit.get("title")
        url = page.get("fullurl") or _page_url(self.api_url, title)
        extract = page.get("extract") if isinstance(page.get("extract"), str) else ""
        passages = []
        for i, (start, end) in enumerate(sentence_windows(extract)):
            p = self.passage(rank, url, title, extract[start:end], suffix=f":{i}", start=start, end=end)
            if p is not None:
                passages.append(p)
        if not passages:
            fallback = self.passage(rank, url, title, hit.get("snippet"), suffix=":snippet")
            passages = [fallback] if fallback is not None else []
        return passages


def sentence_windows(text: str, size: int = SENTENCES_PER_PASSAGE) -> list[tuple[int, int]]:
    """Character spans of consecutive groups of up to ``size`` sentences (the evidence
    sentence splitter's), never crossing a paragraph (line) break."""
    spans: list[tuple[int, int]] = []
    group: list[tuple[int, int]] = []
    for start, end in split_sentences(text):
        if group and (len(group) == size or "\n" in text[group[-1][1] : start]):
            spans.append((group[0][0], group[-1][1]))
            group = []
        group.append((start, end))
    if group:
        spans.append((group[0][0], group[-1][1]))
    return spans


def _page_url(api_url: str, title: Any) -> str | None:
    if not isinstance(title, str) or not title:
        return None
    base = api_url.split("/w/api.php")[0] if "/w/api.php" in api_url else api_url.rsplit("/", 1)[0]
    return f"{base}/wiki/{clean_text(title).replace(' ', '_')}"
