"""The retriever provider against a real engine: a LangChain retriever over PostgreSQL's
full-text search (tests/support/postgres_retriever.py) holding the demo corpus, on the server
``.ci/postgres.sh`` starts (``FACTCHECK_TEST_POSTGRES_URL``; skipped without it, except in CI).
Built from settings as a deployment would; natively async and sync-only; its timeout cancels
the query on the server; the pipeline checks a sentence of the demo answers with it as its only
evidence."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest

from adapters.search import RetrieverSource
from middleware.cache import MemoryCache
from middleware.metrics import PROVIDER_ERRORS
from middleware.settings import EvidenceSettings, Settings
from tests.support.postgres_retriever import load_chunks, postgres_url, until_no_sleeps

pytestmark = pytest.mark.postgres

FACTORY = "tests.support.postgres_retriever:make_retriever"
CORPUS = Path(str(files("middleware.evidence") / "demo_corpus"))


@pytest.fixture(scope="module")
def knowledge_base() -> Iterator[tuple[str, str]]:
    """(dsn, table): the demo corpus's passages in a table of their own, dropped afterwards."""
    import psycopg

    dsn, table = postgres_url(), f"kb_{uuid.uuid4().hex[:12]}"
    assert load_chunks(dsn, table, sorted(CORPUS.rglob("*.md"))) > 100
    yield dsn, table
    with psycopg.connect(dsn) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')


def settings_for(dsn: str, table: str, timeout_s: float = 5.0, **kwargs) -> Settings:
    return Settings(evidence=EvidenceSettings(
        providers=["retriever"], retriever={"factory": FACTORY, "kwargs": {"dsn": dsn, "table": table, **kwargs}},
        search_timeouts_s={"retriever": timeout_s},
    ))


@pytest.mark.parametrize("native_async", [True, False], ids=["async", "sync"])
async def test_questions_find_the_corpus_passages_in_postgres(knowledge_base, native_async: bool) -> None:
    source = RetrieverSource.from_settings(settings_for(*knowledge_base, native_async=native_async),
                                           cache=MemoryCache())
    passages = await source.search("Who led the British expedition of the first ascent of Mount Everest?", 4)
    assert passages and all(p.provider == "retriever" for p in passages)
    sources = [Path(p.source).name for p in passages]
    assert "edmund-hillary.md" in sources, sources
    hillary = passages[sources.index("edmund-hillary.md")]
    assert hillary.title == "Edmund Hillary" and "John Hunt" in hillary.text
    assert hillary.id.startswith("retriever:") and hillary.url is None

    again = await source.search("Who led the British expedition of the first ascent of  Mount Everest?", 4)
    assert again == passages and len(source.retriever.queries) == 1  # the second answer came from the cache


async def test_a_slow_query_times_out_and_is_cancelled_on_the_server(knowledge_base) -> None:
    dsn, table = knowledge_base
    source = RetrieverSource.from_settings(settings_for(dsn, table, timeout_s=0.3, delay_s=3.0))
    before = PROVIDER_ERRORS.labels(provider="retriever", kind="timeout")._value.get()
    t0 = time.perf_counter()
    assert await source.search("Mount Everest height", 4) == []
    assert time.perf_counter() - t0 < 1.5
    assert PROVIDER_ERRORS.labels(provider="retriever", kind="timeout")._value.get() == before + 1
    assert await until_no_sleeps(dsn) == 0  # psycopg cancelled the statement with the task


@pytest.mark.slow
async def test_the_pipeline_flags_a_demo_answers_error_from_postgres_evidence(knowledge_base, tmp_path: Path) -> None:
    """The demo answer's planted error (Curie's second Nobel Prize "in 1915": 1911) is contradicted
    by a passage the retriever found, and the true sentence before it is attributable to them."""
    from middleware.chat.checked_stream import check_answer
    from middleware.composition import command_line_runner
    from middleware.settings import load_settings
    from middleware.types import CheckContext

    dsn, table = knowledge_base
    settings = load_settings(**{
        "evidence.providers": ["retriever"], "evidence.index_dir": str(tmp_path),
        "evidence.retriever": {"factory": FACTORY, "kwargs": {"dsn": dsn, "table": table}},
    })
    text = ("In 1898 she and her husband Pierre Curie discovered the elements polonium and radium. "
            "She received a second Nobel Prize, in Chemistry, in 1915.")
    context = CheckContext(user_message="Who was Marie Curie and what did she discover?")
    answer = await check_answer(command_line_runner(settings), text, context)
    assert [r.verdict.label for r in answer.reports] == ["attributable", "contradictory"], answer.reports
    assert all(r.evidence and {p.provider for p in r.evidence} == {"retriever"} for r in answer.reports)
    assert "1911" in (answer.reports[1].verdict.evidence_sentence or "")
    assert any(Path(p.source).name == "marie-curie.md" and p.title == "Marie Curie" for p in answer.reports[1].evidence)
