"""The local index as an ``EvidenceSource``."""

from __future__ import annotations

import asyncio
import logging

from middleware.cache import Cache, cached_embeddings, embedder_name
from middleware.evidence.index import IndexEmbedder, LocalIndex
from middleware.metrics import PROVIDER_ERRORS, timed
from middleware.settings import Settings
from middleware.types import Passage

log = logging.getLogger(__name__)


class LocalIndexSource:
    """``EvidenceSource`` over a :class:`LocalIndex`. The query is embedded through the
    embedder's async path (the shared micro-batcher) and the embeddings cache, where the
    ranker finds it again (it scores the same query against the hits); the SQL and the matrix
    product run in one worker thread call. Never raises a failure into the stream: logs it
    and returns []."""

    name = "index"

    def __init__(self, index: LocalIndex, cache: Cache | None = None) -> None:
        self.index = index
        self.cache = cache

    @classmethod
    def from_settings(cls, settings: Settings, embedder: IndexEmbedder | None,
                      cache: Cache | None = None) -> LocalIndexSource:
        return cls(LocalIndex.from_settings(settings.evidence.index_dir, embedder, settings.evidence), cache)

    async def search(self, query: str, k: int) -> list[Passage]:
        try:
            with timed("search"):
                vector = None
                embedder = self.index.embedder
                if embedder is not None:  # unused by an index without vectors, but the ranker wants it anyway
                    vector = (await cached_embeddings(self.cache, embedder_name(embedder), [query], embedder.embed))[0]
                return await asyncio.to_thread(self.index.search, query, k, vector)
        except Exception as exc:  # noqa: BLE001 - the stream must never see a provider failure
            PROVIDER_ERRORS.labels(provider=self.name, kind=type(exc).__name__).inc()
            log.error("local index search failed for %r: %r", query[:80], exc)
            return []

    async def aclose(self) -> None:
        self.index.close()
