"""LangChain retrievers for the retriever provider's tests: one answering a fixed list of
documents (natively async or sync only, optionally slow or failing), and the factory that
``evidence.retriever.factory`` names in the tests."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


class ListRetriever(BaseRetriever):
    """Answers every query with ``documents`` after ``delay_s``; ``fail`` raises that many times
    first. Records each query and the thread that answered it; ``cancelled`` counts native
    async calls cancelled mid-way."""

    documents: list[Any] = []
    delay_s: float = 0.0
    fail: int = 0
    queries: list[str] = []
    threads: list[int] = []
    cancelled: int = 0

    def _answer(self, query: str) -> list[Any]:
        self.queries.append(query)
        self.threads.append(threading.get_ident())
        if self.fail:
            self.fail -= 1
            raise ConnectionError("vector store unreachable")
        return list(self.documents)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Any]:
        time.sleep(self.delay_s)
        return self._answer(query)


class AsyncListRetriever(ListRetriever):
    """:class:`ListRetriever` with a native async path (as pgvector's or Qdrant's retrievers have)."""

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Any]:
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self._answer(query)


class InvokeOnly:
    """Not a LangChain retriever: only a blocking ``invoke`` (a hand-written client)."""

    def __init__(self, documents: list[Any]) -> None:
        self.documents = documents
        self.threads: list[int] = []

    def invoke(self, query: str) -> list[Any]:
        self.threads.append(threading.get_ident())
        return list(self.documents)


DEFAULT_SOURCE = "kb"


def make_retriever(texts: list[str], source: str = DEFAULT_SOURCE, native_async: bool = True) -> ListRetriever:
    """The factory the tests name in ``evidence.retriever``: one document per text, titled by its number."""
    documents = [Document(page_content=t, metadata={"source": f"{source}/{i}", "title": f"Doc {i}"})
                 for i, t in enumerate(texts)]
    return (AsyncListRetriever if native_async else ListRetriever)(documents=documents)


def not_a_retriever() -> object:
    return object()


def broken_factory(**_: Any) -> ListRetriever:
    raise RuntimeError("index missing")
