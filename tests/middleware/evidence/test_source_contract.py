"""What every evidence source searched per question promises the pipeline, run alike on the
local index and on the user's LangChain retriever (LangChain's own InMemoryVectorStore over the
same files, the same embedder behind LangChain's ``Embeddings``): passages naming their provider,
source and title, at most k of them; the search timed into the ``search`` stage; a failing
backend (the embedding service down) logged, counted and answered with [], never raised; hits the
relevance ranker ranks. (The retriever's own timeout, cache and bad documents:
tests/adapters/search/test_retriever.py; against PostgreSQL: test_retriever_postgres.py.)"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from adapters.search import RetrieverSource
from middleware.evidence.index import LocalIndex
from middleware.evidence.relevance import RelevanceRanker
from middleware.evidence.source import LocalIndexSource
from middleware.interfaces import EvidenceSource
from middleware.metrics import PROVIDER_ERRORS, STAGE_LATENCY
from tests.support.evidence_doubles import FailingEmbedder, HashEmbedder, write_corpus
from tests.support.retriever_doubles import vector_store_retriever

KELVIN = "Who named the kelvin scale?"
MakeSource = Callable[[HashEmbedder], EvidenceSource]


@pytest.fixture(params=["index", "retriever"])
def make_source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeSource]:
    """Builds the source named by the parameter over the test corpus, with the given embedder."""
    corpus = write_corpus(tmp_path / "corpus")
    with ExitStack() as open_indexes:

        def build(embedder: HashEmbedder) -> EvidenceSource:
            if request.param == "index":
                local = open_indexes.enter_context(LocalIndex(tmp_path / f"index-{embedder.name}", embedder))
                local.update([corpus])
                return LocalIndexSource(local)
            files = [corpus / "notes" / "kelvin.md", corpus / "danube.txt"]
            return RetrieverSource(vector_store_retriever(embedder, files), origin="kb", timeout_s=3.0)

        yield build


async def test_passages_name_their_provider_source_and_title(make_source: MakeSource) -> None:
    source = make_source(HashEmbedder())
    hits = await source.search(KELVIN, 2)
    assert 0 < len(hits) <= 2 and {p.provider for p in hits} == {source.name}
    kelvin = next(p for p in hits if p.source.endswith("kelvin.md"))
    assert kelvin.title == "Kelvin scale" and "Kelvin" in kelvin.text


async def test_the_search_is_timed_into_the_search_stage(make_source: MakeSource) -> None:
    source = make_source(HashEmbedder())
    before = _count("search")
    await source.search(KELVIN, 2)
    assert _count("search") == before + 1


async def test_a_failing_backend_is_logged_counted_and_never_raised(
    make_source: MakeSource, caplog: pytest.LogCaptureFixture
) -> None:
    source = make_source(FailingEmbedder(name="failing"))
    before = _errors(source.name)
    with caplog.at_level(logging.ERROR):
        assert await source.search(KELVIN, 3) == []
    assert "embedding service down" in caplog.text
    assert _errors(source.name) == before + 1


async def test_the_ranker_ranks_what_the_source_found(make_source: MakeSource) -> None:
    embedder = HashEmbedder()
    source = make_source(embedder)
    [best] = await RelevanceRanker(embedder, top_j=1).rank(KELVIN, await source.search(KELVIN, 3))
    assert best.source.endswith("kelvin.md") and best.provider == source.name


def _count(stage: str) -> float:
    return next((s.value for m in STAGE_LATENCY.collect() for s in m.samples
                 if s.name.endswith("_count") and s.labels.get("stage") == stage), 0.0)


def _errors(provider: str) -> float:
    return sum(s.value for m in PROVIDER_ERRORS.collect() for s in m.samples
               if s.name.endswith("_total") and s.labels.get("provider") == provider)
