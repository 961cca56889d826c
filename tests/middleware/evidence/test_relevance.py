"""Relevance ranking: hybrid BM25 + embedding by default, a cross-encoder when configured."""

from __future__ import annotations

import numpy as np
import pytest

from middleware.cache import MemoryCache
from middleware.evidence.passages import embedding_text
from middleware.evidence.relevance import RelevanceRanker, bm25_scores
from middleware.settings import load_settings
from middleware.types import Passage
from tests.support.evidence_doubles import HashEmbedder, KeywordScorer


def _p(i: int, text: str, title: str | None = None) -> Passage:
    return Passage(id=str(i), text=text, provider="web", source=f"https://e.org/{i}", title=title)


CANDIDATES = [
    _p(0, "Paris hosts many museums and a famous tower."),
    _p(1, "The Eiffel Tower was completed in 1889.", "Eiffel Tower"),
    _p(2, "Gustave Eiffel's company built bridges across Europe."),
]
QUESTION = "When was the Eiffel Tower completed?"


def test_bm25_scores_are_normalised() -> None:
    scores = bm25_scores(QUESTION, [p.text for p in CANDIDATES])
    assert scores.max() == pytest.approx(1.0) and int(np.argmax(scores)) == 1
    assert bm25_scores("zzz", ["a b", "c d"]).tolist() == [0.0, 0.0]


async def test_hybrid_keeps_the_top_j_passage_with_its_score() -> None:
    ranker = RelevanceRanker(HashEmbedder())
    (best,) = await ranker.rank(QUESTION, CANDIDATES)
    assert best.id == "1" and 0.0 < best.score <= 1.0
    three = await ranker.rank(QUESTION, CANDIDATES, top_j=3)
    assert [p.id for p in three][0] == "1" and len(three) == 3
    assert three[0].score >= three[1].score >= three[2].score
    assert CANDIDATES[1].score == 0.0  # inputs are not modified


async def test_bm25_only_without_embedder_and_empty_candidates() -> None:
    ranker = RelevanceRanker(top_j=2)
    ranked = await ranker.rank(QUESTION, CANDIDATES)
    assert [p.id for p in ranked][0] == "1" and len(ranked) == 2
    assert await ranker.rank(QUESTION, []) == []


async def test_hybrid_score_is_the_weighted_sum_of_cosine_and_bm25() -> None:
    embedder = HashEmbedder()
    lexical = await RelevanceRanker(embedder, dense_weight=0.0).scores(QUESTION, CANDIDATES)
    dense = await RelevanceRanker(embedder, dense_weight=1.0).scores(QUESTION, CANDIDATES)
    mixed = await RelevanceRanker(embedder, dense_weight=0.25).scores(QUESTION, CANDIDATES)
    assert mixed == pytest.approx(0.25 * dense + 0.75 * lexical)
    assert lexical == pytest.approx(bm25_scores(QUESTION, [embedding_text(c) for c in CANDIDATES]))
    assert not np.allclose(lexical, dense)
    assert ((dense >= 0) & (dense <= 1)).all()


async def test_cross_encoder_decides_when_configured() -> None:
    scorer = KeywordScorer()
    ranker = RelevanceRanker(HashEmbedder(), scorer, top_j=1)
    (best,) = await ranker.rank("Gustave Eiffel company bridges", CANDIDATES)
    assert best.id == "2" and best.score == pytest.approx(1.0)
    assert scorer.pairs[0] == ("Gustave Eiffel company bridges", CANDIDATES[0].text)


async def test_rank_all_and_rerank_timing() -> None:
    ranker = RelevanceRanker(HashEmbedder(), cache=MemoryCache())
    timings: dict[str, float] = {}
    results = await ranker.rank_all(
        [QUESTION, "Which company built bridges?"], [CANDIDATES, CANDIDATES], timings=timings
    )
    assert [[p.id for p in r] for r in results] == [["1"], ["2"]]
    assert timings["rerank"] > 0.0


def test_from_settings_without_a_rerank_model_is_hybrid() -> None:
    settings = load_settings(**{"evidence.top_j": 2, "evidence.relevance_dense_weight": 0.3})
    ranker = RelevanceRanker.from_settings(settings, HashEmbedder())
    assert ranker.scorer is None and ranker.top_j == 2 and ranker.dense_weight == 0.3
    with pytest.raises(ValueError):
        RelevanceRanker(dense_weight=1.5)
