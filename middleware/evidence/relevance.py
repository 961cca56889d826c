"""Relevance: which candidate passages answer a verification question (RARR keeps the top
J = 1 per question). Candidates come from any source (index, web, request context), so the
score is computed over the candidates themselves:

- hybrid (default): ``w * cosine(question, passage) + (1 - w) * BM25 / max BM25`` over the
  candidate set (cosine clipped at 0; BM25 only when there is no embedder);
- cross-encoder: a relevance ``PairScorer`` on (question, passage) when
  ``runtime.rerank_model`` names one (hub id, local checkpoint or ONNX export).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from middleware.cache import Cache, cached_embeddings, embedder_name
from middleware.evidence.passages import embedding_text
from middleware.interfaces import Embedder, PairScorer
from middleware.metrics import timed
from middleware.evidence.lexical import BM25, terms
from middleware.settings import Settings
from middleware.types import Passage

RELEVANCE_LABEL = "relevance"


class RelevanceRanker:
    """Ranks candidates for a question and keeps the best ``top_j``; each kept passage's
    ``score`` is its relevance. Time goes to the ``rerank`` stage."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        scorer: PairScorer | None = None,
        *,
        top_j: int = 1,
        dense_weight: float = 0.5,
        cache: Cache | None = None,
    ) -> None:
        if not 0.0 <= dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be within [0, 1], got {dense_weight}")
        self.embedder = embedder
        self.scorer = scorer
        self.top_j = top_j
        self.dense_weight = dense_weight
        self.cache = cache
        self._model = embedder_name(embedder)

    @classmethod
    def from_settings(
        cls, settings: Settings, embedder: Embedder | None, cache: Cache | None = None
    ) -> RelevanceRanker:
        """The ranker the settings describe; loads the cross-encoder if one is configured."""
        scorer = None
        if settings.runtime.rerank_model:
            from middleware.runtime import load_pair_scorer

            scorer = load_pair_scorer(settings.runtime.rerank_model, "rerank", settings.runtime)
        return cls(
            embedder,
            scorer,
            top_j=settings.evidence.top_j,
            dense_weight=settings.evidence.relevance_dense_weight,
            cache=cache,
        )

    async def rank(
        self,
        question: str,
        candidates: Sequence[Passage],
        top_j: int | None = None,
        timings: dict[str, float] | None = None,
    ) -> list[Passage]:
        """The ``top_j`` (default: the ranker's) most relevant candidates, best first."""
        if not candidates:
            return []
        with timed("rerank", timings):
            scores = await self.scores(question, candidates)
        order = np.argsort(-scores, kind="stable")[: self.top_j if top_j is None else top_j]
        return [candidates[i].model_copy(update={"score": float(scores[i])}) for i in order]

    async def rank_all(
        self,
        questions: Sequence[str],
        candidates: Sequence[Sequence[Passage]],
        top_j: int | None = None,
        timings: dict[str, float] | None = None,
    ) -> list[list[Passage]]:
        """``rank`` for each question and its own candidates, concurrently."""
        return list(
            await asyncio.gather(*(self.rank(q, c, top_j, timings) for q, c in zip(questions, candidates, strict=True)))
        )

    async def scores(self, question: str, candidates: Sequence[Passage]) -> np.ndarray:
        """Relevance of every candidate, in candidate order."""
        if self.scorer is not None:
            return await self._cross_scores(question, candidates)
        return await self._hybrid_scores(question, candidates)

    async def _cross_scores(self, question: str, candidates: Sequence[Passage]) -> np.ndarray:
        assert self.scorer is not None
        probs = np.asarray(await self.scorer.score([(question, p.text) for p in candidates]), dtype=np.float32)
        labels = list(self.scorer.labels)
        column = labels.index(RELEVANCE_LABEL) if RELEVANCE_LABEL in labels else probs.shape[1] - 1
        return probs[:, column]

    async def _hybrid_scores(self, question: str, candidates: Sequence[Passage]) -> np.ndarray:
        lexical = bm25_scores(question, [embedding_text(p) for p in candidates])
        if self.embedder is None:
            return lexical
        texts = [question] + [embedding_text(p) for p in candidates]
        vectors = await cached_embeddings(self.cache, self._model, texts, self.embedder.embed)
        cosine = np.clip(vectors[1:] @ vectors[0], 0.0, 1.0)
        return self.dense_weight * cosine + (1.0 - self.dense_weight) * lexical


def bm25_scores(question: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 of each text for the question over the set of texts, divided by the best (0..1)."""
    scores = np.asarray(BM25([terms(t) for t in texts]).scores(terms(question)), dtype=np.float32)
    best = float(scores.max()) if len(scores) else 0.0
    return scores / best if best > 0 else scores
