"""A user's knowledge base as a LangChain retriever over PostgreSQL's full-text search (plain
SQL through psycopg), for the tests that run the retriever provider against a real engine:
``FACTCHECK_TEST_POSTGRES_URL``, set by ``.ci/run`` from ``.ci/postgres.sh``.

One table of chunks (source, title, body) with a generated ``tsvector`` column and a GIN index;
a query matches any of its words (the OR of ``plainto_tsquery``'s lexemes: a verification
question shares only some words with the passage answering it), best ``ts_rank_cd`` first."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path

import psycopg
import pytest
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from psycopg import sql

from middleware.evidence.passages import document_passages

URL_ENV = "FACTCHECK_TEST_POSTGRES_URL"

_SEARCH = """
SELECT id, source, title, body, ts_rank_cd(tsv, q) AS rank
FROM pg_sleep(%(delay)s) AS pause, {table}, to_tsquery('english', replace(plainto_tsquery('english', %(query)s)::text, '&', '|')) AS q
WHERE tsv @@ q
ORDER BY rank DESC, id
LIMIT %(k)s
"""


def postgres_url() -> str:
    """The server ``.ci/postgres.sh`` started; skips when it is not set, except under CI, where it must be."""
    url = os.environ.get(URL_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{URL_ENV} is not set: .ci/run sets it from .ci/postgres.sh")
    pytest.skip(f"no PostgreSQL: export {URL_ENV}=\"$(bash .ci/postgres.sh)\"")


class PostgresFtsRetriever(BaseRetriever):
    """Sync only: LangChain runs it in its executor when asked asynchronously. ``delay_s`` makes
    the server sleep before answering (a slow store)."""

    dsn: str
    table: str
    k: int = 4
    delay_s: float = 0.0
    queries: list[str] = []

    def _statement(self) -> sql.Composed:
        return sql.SQL(_SEARCH).format(table=sql.Identifier(self.table))

    def _params(self, query: str) -> dict[str, object]:
        self.queries.append(query)
        return {"query": query, "k": self.k, "delay": self.delay_s}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(self._statement(), self._params(query)).fetchall()
        return [_document(row) for row in rows]


class AsyncPostgresFtsRetriever(PostgresFtsRetriever):
    """With a native async path (psycopg's async connection): cancelling the search cancels the query."""

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        async with await psycopg.AsyncConnection.connect(self.dsn) as conn:
            cursor = await conn.execute(self._statement(), self._params(query))
            rows = await cursor.fetchall()
        return [_document(row) for row in rows]


def _document(row: tuple) -> Document:
    chunk_id, source, title, body, rank = row
    return Document(page_content=body, id=str(chunk_id), metadata={"source": source, "title": title, "rank": rank})


def make_retriever(dsn: str, table: str, k: int = 4, delay_s: float = 0.0, native_async: bool = True) -> BaseRetriever:
    """The factory the tests name in ``evidence.retriever``."""
    cls = AsyncPostgresFtsRetriever if native_async else PostgresFtsRetriever
    return cls(dsn=dsn, table=table, k=k, delay_s=delay_s)


def load_chunks(dsn: str, table: str, files: Iterable[Path]) -> int:
    """(Re)create ``table`` and fill it with the files' passages (the project's own splitter);
    the number of rows."""
    rows = [(p.source, p.title, p.text) for path in files
            for p in document_passages(path.read_text(encoding="utf-8"), str(path))]
    name = sql.Identifier(table)
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        conn.execute(sql.SQL(
            "CREATE TABLE {} (id serial PRIMARY KEY, source text NOT NULL, title text, body text NOT NULL, "
            "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(title, '') || ' ' || body)) STORED)"
        ).format(name))
        conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (tsv)").format(name))
        with conn.cursor() as cursor:
            cursor.executemany(sql.SQL("INSERT INTO {} (source, title, body) VALUES (%s, %s, %s)").format(name), rows)
    return len(rows)


async def running_sleeps(dsn: str) -> int:
    """Queries of this database still running ``pg_sleep`` (a cancelled search's query should not be)."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cursor = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                    "AND query LIKE '%%pg_sleep(%%' AND pid <> pg_backend_pid()")
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def until_no_sleeps(dsn: str, within_s: float = 2.0) -> int:
    """``running_sleeps``, polled until it reaches 0 or ``within_s`` passes."""
    deadline = asyncio.get_running_loop().time() + within_s
    while (count := await running_sleeps(dsn)) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return count
