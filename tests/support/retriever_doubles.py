"""LangChain retrievers for the retriever provider's tests: one answering a fixed list of
documents (natively async or sync only, optionally slow or failing), the factory that
``evidence.retriever.factory`` names in the tests, and LangChain's own in-memory vector store
over files with a project embedder behind LangChain's ``Embeddings``."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from middleware.evidence.passages import document_passages


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


class EmbedderEmbeddings(Embeddings):
    """LangChain's ``Embeddings`` over one of the project's embedders (``embed_sync`` to store
    documents, the async ``embed`` to ask): the README's MiniLM wrapper, for any embedder."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_sync(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.embedder.embed([text]))[0].tolist()


def vector_store_retriever(embedder: Any, files: list[Path], k: int = 4) -> BaseRetriever:
    """LangChain's ``InMemoryVectorStore`` over the files' passages (the project's splitter), as a retriever."""
    documents = [Document(page_content=p.text, metadata={"source": p.source, "title": p.title})
                 for path in files for p in document_passages(path.read_text(encoding="utf-8"), str(path))]
    store = InMemoryVectorStore(EmbedderEmbeddings(embedder))
    store.add_documents(documents)
    return store.as_retriever(search_kwargs={"k": k})
