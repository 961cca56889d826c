"""Evidence from the result pages themselves (RARR): the top results of a web search are
fetched, their main text is cut into passages and those passages are ranked together with the
search snippets.

For one query: the wrapped source (the combined web providers) answers with snippets; the
pages of the first ``pages`` distinct result URLs are fetched concurrently by
:class:`~adapters.fetch.PageFetcher` (SSRF guard, size and time caps, trafilatura, page
cache); each page is cut by the project's passage splitter
(:func:`middleware.evidence.passages.document_passages`); snippets and page passages are ranked by
BM25 relevance to the query (:func:`middleware.evidence.relevance.bm25_scores`) and
de-duplicated (:func:`~adapters.search.combined.dedupe`). The engine's ``RelevanceRanker``
then re-ranks what every source returned (embeddings or a cross-encoder), so the lexical
ranking here only chooses which candidates reach it.

A page that cannot be used (refused by the guard, timed out, not HTML or text, over the size
cap, empty, or a crash while reading it) leaves its snippet as the evidence: the answer is
never worse than the snippets, and :meth:`PageSource.search` never raises.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import numpy as np

from adapters.fetch import Page, PageFetcher
from adapters.search.combined import dedupe
from middleware.evidence.passages import STRIDE, WINDOW, embedding_text, document_passages
from middleware.evidence.relevance import bm25_scores
from middleware.interfaces import EvidenceSource
from middleware.metrics import PROVIDER_ERRORS
from middleware.types import Passage

log = logging.getLogger(__name__)


class PageSource:
    """Wraps a web ``results`` source: its snippets plus passages of the pages of its top
    ``pages`` results, ranked against the query. Returns at most ``max(k, len(snippets))``
    candidates, so page passages compete with the snippets for the same slots; when no page
    could be used it returns the snippets unchanged.

    Concurrent searches that need the same URL share one fetch."""

    name = "web"

    def __init__(
        self,
        results: EvidenceSource,
        fetcher: PageFetcher,
        *,
        pages: int = 3,
        window: int = WINDOW,
        stride: int = STRIDE,
        text_threshold: float = 90.0,
    ):
        if pages < 1:
            raise ValueError(f"pages must be positive, got {pages}")
        self.results = results
        self.fetcher = fetcher
        self.pages = pages
        self.window = window
        self.stride = stride
        self.text_threshold = text_threshold
        self._inflight: dict[str, asyncio.Task[Page | None]] = {}

    async def search(self, query: str, k: int) -> list[Passage]:
        snippets: list[Passage] = []
        try:
            snippets = await self.results.search(query, k)
            firsts = {p.url: p for p in reversed(snippets) if p.url}  # the best-ranked snippet of each URL
            urls = list(dict.fromkeys(p.url for p in snippets if p.url))[: self.pages]
            pages = await asyncio.gather(*(self._page(url) for url in urls))
            fetched = [(firsts[url], page) for url, page in zip(urls, pages, strict=True) if page is not None]
            if not fetched:
                return snippets
            return await asyncio.to_thread(self._rank, query, snippets, fetched, max(k, len(snippets)))
        except Exception:  # noqa: BLE001 - an evidence source must never break the stream
            log.exception("web page evidence failed for %r; using the search snippets", query[:80])
            PROVIDER_ERRORS.labels(provider=self.name, kind="error").inc()
            return snippets

    async def aclose(self) -> None:
        """Stop the fetches still running, close the fetcher's session and the wrapped source."""
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.fetcher.aclose()
        close = getattr(self.results, "aclose", None)
        if close is not None:
            await close()

    async def _page(self, url: str) -> Page | None:
        task = self._inflight.get(url)
        if task is None:
            task = asyncio.create_task(self._fetch(url))
            self._inflight[url] = task
            task.add_done_callback(lambda _: self._inflight.pop(url, None))
        # shielded: a cancelled search leaves the fetch running for the others (and the cache)
        return await asyncio.shield(task)

    async def _fetch(self, url: str) -> Page | None:
        try:
            page = await self.fetcher.fetch_or_none(url)  # logs and counts FetchError
        except Exception:  # noqa: BLE001 - anything else a page throws at us falls back too
            log.exception("fetch of %s crashed; using its snippet", url)
            PROVIDER_ERRORS.labels(provider="fetch", kind="error").inc()
            return None
        if page is None:
            return None
        if page.truncated:
            PROVIDER_ERRORS.labels(provider="fetch", kind="too_big").inc()
            log.warning("page %s is larger than evidence.fetch_max_bytes; using its snippet", url)
            return None
        return page if page.text.strip() else None

    def _rank(
        self, query: str, snippets: list[Passage], fetched: Sequence[tuple[Passage, Page]], n: int
    ) -> list[Passage]:
        """Snippets and page passages by BM25 to the query, de-duplicated, the best ``n``
        (CPU work: runs in a thread)."""
        candidates = snippets + [p for snippet, page in fetched for p in self._passages(snippet, page)]
        scores = bm25_scores(query, [embedding_text(p) for p in candidates])
        ranked = [candidates[i] for i in np.argsort(-scores, kind="stable")]
        return dedupe(ranked, self.text_threshold)[:n]

    def _passages(self, snippet: Passage, page: Page) -> list[Passage]:
        """The page's passages, attributed to the provider that found it and carrying its
        result's rank prior as score."""
        passages = document_passages(
            page.text, page.url, window=self.window, stride=self.stride,
            provider=snippet.provider, url=page.url, default_title=page.title or snippet.title,
        )
        return [p.model_copy(update={"id": f"{snippet.provider}:page:{p.id}", "score": snippet.score}) for p in passages]
