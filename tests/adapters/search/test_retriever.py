"""The user's LangChain retriever as an evidence source (``evidence.providers: [..., retriever]``):
Documents become passages with source and title from metadata; the same guarantees as the index
and the web providers (tests/middleware/evidence/test_index.py, test_providers.py): timed into
the search stage, never raising, a timeout within the budget, cancelled with its check, results
cached per query and k and failures not, bad documents dropped and counted; built from settings
by the composition root. Against a real PostgreSQL: tests/adapters/search/test_retriever_postgres.py."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from langchain_core.documents import Document

from adapters.search import ConfigError, RetrieverSource, build_providers
from middleware.cache import MemoryCache
from middleware.metrics import PROVIDER_ERRORS, STAGE_LATENCY
from middleware.settings import EvidenceSettings, Settings
from tests.support.retriever_doubles import AsyncListRetriever, InvokeOnly, ListRetriever

FUJI = "Mount Fuji is 3,776 metres high. It is the highest mountain in Japan."
FACTORY = "tests.support.retriever_doubles:make_retriever"


def source_over(retriever, *, timeout_s: float = 3.0, cache: MemoryCache | None = None) -> RetrieverSource:
    return RetrieverSource(retriever, origin="test", timeout_s=timeout_s, cache=cache)


def fuji(**metadata) -> Document:
    return Document(page_content=FUJI, metadata={"source": "kb/fuji.md", "title": "Mount Fuji", **metadata})


def errors(kind: str) -> float:
    return PROVIDER_ERRORS.labels(provider="retriever", kind=kind)._value.get()


def settings_for(factory: str = FACTORY, **kwargs) -> Settings:
    return Settings(evidence=EvidenceSettings(
        providers=["retriever"], retriever={"factory": factory, "kwargs": kwargs},
        search_timeouts_s={"retriever": 1.5}, cache_ttl_s=60.0,
    ))


# --- documents to passages -----------------------------------------------------------------


async def test_documents_become_passages_with_source_and_title_from_metadata() -> None:
    documents = [
        fuji(),
        Document(page_content="  The Nile is 6,650 km long. ", id="nile-1",
                 metadata={"source": "https://example.org/nile", "title": "Nile", "start_index": 40}),
        Document(page_content="Lake Baikal is the deepest lake.", metadata={"url": "https://example.org/baikal"}),
    ]
    passages = await source_over(AsyncListRetriever(documents=documents)).search("highest mountain", 5)
    first, nile, baikal = passages
    assert (first.text, first.provider, first.source, first.title, first.url) == (
        FUJI, "retriever", "kb/fuji.md", "Mount Fuji", None)
    assert (nile.id, nile.source, nile.url, nile.title) == (
        "retriever:nile-1", "https://example.org/nile", "https://example.org/nile", "Nile")
    assert (nile.text, nile.start, nile.end) == ("The Nile is 6,650 km long.", 42, 42 + len(nile.text))
    assert (baikal.source, baikal.url, baikal.title) == ("test", "https://example.org/baikal", None)
    assert [p.score for p in passages] == [1.0, 0.5, 1 / 3]  # the retriever's order, as a rank prior
    assert len({p.id for p in passages}) == 3


async def test_the_first_k_documents_are_kept() -> None:
    documents = [Document(page_content=f"Fact number {i}.", metadata={"source": f"s{i}"}) for i in range(6)]
    passages = await source_over(AsyncListRetriever(documents=documents)).search("fact", 2)
    assert [p.source for p in passages] == ["s0", "s1"]


async def test_bad_documents_are_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    documents = [
        Document(page_content="   "),
        {"page_content": "a dict is no Document"},
        "a bare string",
        None,
        fuji(title=42, source=7),  # metadata of the wrong types: ignored, the passage kept
    ]
    before = errors("bad_document")
    with caplog.at_level(logging.WARNING):
        [kept] = await source_over(AsyncListRetriever(documents=documents)).search("Fuji", 5)
    assert (kept.text, kept.source, kept.title) == (FUJI, "test", None)
    assert errors("bad_document") == before + 4
    assert "dropped 4 of 5 documents" in caplog.text


async def test_an_answer_that_is_no_list_is_a_bad_shape_error() -> None:
    class Odd(AsyncListRetriever):
        async def _aget_relevant_documents(self, query, *, run_manager):
            return "not documents"

    before = errors("bad_shape")
    assert await source_over(Odd()).search("Fuji", 3) == []
    assert errors("bad_shape") == before + 1


# --- how it is called ----------------------------------------------------------------------


async def test_a_native_async_retriever_runs_on_the_event_loop() -> None:
    retriever = AsyncListRetriever(documents=[fuji()])
    assert await source_over(retriever).search("Fuji", 3)
    assert retriever.threads == [threading.get_ident()]


@pytest.mark.parametrize("retriever", [ListRetriever(documents=[fuji()]), InvokeOnly([fuji()])],
                         ids=["sync-BaseRetriever", "invoke-only"])
async def test_a_sync_retriever_runs_in_a_worker_thread(retriever) -> None:
    assert [p.title for p in await source_over(retriever).search("Fuji", 3)] == ["Mount Fuji"]
    assert len(retriever.threads) == 1 and retriever.threads[0] != threading.get_ident()


def test_an_object_that_cannot_be_invoked_is_refused() -> None:
    with pytest.raises(ConfigError, match="neither ainvoke nor invoke"):
        source_over(object())


async def test_searches_are_timed_into_the_search_stage() -> None:
    histogram = STAGE_LATENCY.labels(stage="search")
    before = _histogram_count(histogram)
    await source_over(AsyncListRetriever(documents=[fuji()])).search("Fuji", 3)
    assert _histogram_count(histogram) == before + 1


def _histogram_count(child) -> float:
    return next(s.value for m in child.collect() for s in m.samples if s.name.endswith("_count"))


# --- failures, timeout, budget -------------------------------------------------------------


@pytest.mark.parametrize("retriever_class", [AsyncListRetriever, ListRetriever])
async def test_a_failing_retriever_is_logged_never_raised(retriever_class, caplog: pytest.LogCaptureFixture) -> None:
    before = errors("error")
    with caplog.at_level(logging.ERROR):
        assert await source_over(retriever_class(documents=[fuji()], fail=1)).search("Fuji", 3) == []
    assert errors("error") == before + 1
    assert "vector store unreachable" in caplog.text


@pytest.mark.parametrize("retriever_class", [AsyncListRetriever, ListRetriever])
async def test_timeout_yields_no_results_within_the_budget(retriever_class) -> None:
    retriever = retriever_class(documents=[fuji()], delay_s=0.6)
    before = errors("timeout")
    t0 = time.perf_counter()
    assert await source_over(retriever, timeout_s=0.2).search("Fuji", 3) == []
    assert time.perf_counter() - t0 < 0.5
    assert errors("timeout") == before + 1
    if retriever_class is AsyncListRetriever:
        assert retriever.cancelled == 1  # the native call itself was stopped


async def test_a_cancelled_check_cancels_the_retrievers_call() -> None:
    """The sentence budget cancels a check's searches: the retriever's own call ends with it."""
    retriever = AsyncListRetriever(documents=[fuji()], delay_s=5.0)
    search = asyncio.create_task(source_over(retriever).search("Fuji", 3))
    await asyncio.sleep(0.05)
    search.cancel()
    with pytest.raises(asyncio.CancelledError):
        await search
    assert retriever.cancelled == 1


# --- cache ---------------------------------------------------------------------------------


async def test_results_are_cached_per_query_and_k() -> None:
    retriever = AsyncListRetriever(documents=[fuji()])
    source = source_over(retriever, cache=MemoryCache())
    first = await source.search("highest mountain", 2)
    again = await source.search("highest   mountain", 2)
    await source.search("highest mountain", 1)
    assert first == again and first[0].title == "Mount Fuji"
    assert retriever.queries == ["highest mountain", "highest mountain"]


async def test_failures_are_not_cached() -> None:
    retriever = AsyncListRetriever(documents=[fuji()], fail=1)
    source = source_over(retriever, cache=MemoryCache())
    assert await source.search("Fuji", 3) == []
    assert await source.search("Fuji", 3)
    assert len(retriever.queries) == 2


async def test_another_retriever_configuration_never_reads_these_entries() -> None:
    cache = MemoryCache()
    one = RetrieverSource.from_settings(settings_for(texts=["Mount Fuji is 3,776 metres high."]), cache=cache)
    other = RetrieverSource.from_settings(settings_for(texts=["Mount Fuji is 3,000 metres high."]), cache=cache)
    assert [p.text for p in await one.search("Fuji", 3)] == ["Mount Fuji is 3,776 metres high."]
    assert [p.text for p in await other.search("Fuji", 3)] == ["Mount Fuji is 3,000 metres high."]


# --- settings and the composition root -----------------------------------------------------


async def test_the_factory_is_imported_and_called_with_its_kwargs() -> None:
    source = RetrieverSource.from_settings(settings_for(texts=[FUJI], source="wiki", native_async=False))
    assert isinstance(source.retriever, ListRetriever) and source.timeout_s == 1.5
    [passage] = await source.search("Fuji", 3)
    assert (passage.source, passage.title) == ("wiki/0", "Doc 0")


def test_the_factory_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from middleware.settings import load_settings

    monkeypatch.setenv("FACTCHECK_EVIDENCE__PROVIDERS", '["retriever"]')
    monkeypatch.setenv("FACTCHECK_EVIDENCE__RETRIEVER__FACTORY", FACTORY)
    monkeypatch.setenv("FACTCHECK_EVIDENCE__RETRIEVER__KWARGS", '{"texts": ["From the environment."]}')
    source = RetrieverSource.from_settings(load_settings())
    assert [d.page_content for d in source.retriever.documents] == ["From the environment."]


@pytest.mark.parametrize(("factory", "message"), [
    ("tests.support.no_such_module:make", "cannot import 'tests.support.no_such_module'"),
    ("tests.support.retriever_doubles:nothing_here", "has no 'nothing_here'"),
    ("tests.support.retriever_doubles:DEFAULT_SOURCE", "is not callable"),
    ("tests.support.retriever_doubles:broken_factory", "index missing"),
    ("tests.support.retriever_doubles:not_a_retriever", "neither ainvoke nor invoke"),
])
def test_a_retriever_that_cannot_be_built_fails_at_start_up(factory: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        RetrieverSource.from_settings(settings_for(factory))
    assert info.value.provider == "retriever" and info.value.env_var == "FACTCHECK_EVIDENCE__RETRIEVER__FACTORY"


def test_the_retriever_provider_without_its_settings_fails_at_start_up() -> None:
    with pytest.raises(ConfigError, match="evidence.retriever is not"):
        RetrieverSource.from_settings(Settings(evidence=EvidenceSettings(providers=["retriever"])))
    with pytest.raises(ValueError, match="retriever.factory"):
        EvidenceSettings(retriever={"factory": "no colon"})


def test_the_composition_root_hands_the_engine_the_retriever_beside_the_web() -> None:
    from middleware.composition import providers
    from middleware.composition.pipeline import build_sources

    assert build_providers(EvidenceSettings(providers=["retriever", "context"])) == []
    config = settings_for(texts=[FUJI])
    [alone] = build_sources(config, None, MemoryCache(), providers())
    assert isinstance(alone, RetrieverSource) and alone.cache is not None
    config.evidence.providers = ["retriever", "wikipedia"]
    assert [s.name for s in build_sources(config, None, MemoryCache(), providers())] == ["retriever", "web"]
