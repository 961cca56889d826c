"""The engine's small interfaces. Adapters and backends implement these; the engine never
imports an adapter. The composition root (``middleware.composition``) builds the adapters and
hands them to the engine's builders as ``Providers``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from middleware.sse import SSEEvent

if TYPE_CHECKING:
    from middleware.cache import Cache
    from middleware.settings import Settings
from middleware.types import CheckContext, Mode, Passage, Sentence, SentenceReport, StreamSummary


class RequestChecks(Protocol):
    """A checker's part of one request (``Checker.open``): what the request's checks share,
    read once (the parsed question, the request's passages and their index, the memory
    probe). ``middleware.checking.CheckSession`` holds it. ``check`` must be
    cancellation-safe: the stream cancels it on disconnect or when its budget runs out."""

    async def check(self, sentence: Sentence, previous: Sequence[str]) -> SentenceReport: ...

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary: ...

    def close(self) -> None: ...


class Checker(Protocol):
    """Process-wide: opens each request's checks. ``closed_book``: the memory check's
    closed-book answer (None when the request did not ask for it), an upstream call the
    serving layer owns; the checker only reads it."""

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> RequestChecks: ...


@runtime_checkable
class Embedder(Protocol):
    """Sentence embeddings; rows are L2-normalised float32."""

    dim: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class PairScorer(Protocol):
    """A cross-encoder over (first, second) text pairs: NLI (premise=evidence,
    hypothesis=claim) or relevance (query, passage). ``labels`` names the output columns."""

    labels: list[str]

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


@runtime_checkable
class EvidenceSource(Protocol):
    """Anything that returns passages for a query: the local index, a web provider, the
    request's own context. Must not raise for provider failures: log and return []."""

    name: str

    async def search(self, query: str, k: int) -> list[Passage]: ...


class UpstreamStream(Protocol):
    """An open streamed upstream response, read once: as SSE events or as raw bytes."""

    def events(self) -> AsyncIterator[SSEEvent]: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...


@runtime_checkable
class Upstream(Protocol):
    """The LLM behind the proxy, speaking the API ``upstream.api`` names (its bodies and
    answers are that API's). Failures raise ``UpstreamError``."""

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream: ...

    async def complete(
        self, body: dict[str, Any], client_headers: Mapping[str, str]
    ) -> tuple[bytes, dict[str, Any]]: ...

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]: ...

    async def close(self) -> None: ...


@runtime_checkable
class MultiApiUpstream(Upstream, Protocol):
    """An upstream that can be spoken to in another API than ``upstream.api`` (chat,
    responses, messages): the same server, another path and body."""

    def speaking(self, api: str) -> Upstream: ...


@runtime_checkable
class ChatModel(Protocol):
    """An OpenAI-compatible chat endpoint for the LLM backends: returns ``n`` completions' texts."""

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int = 1,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> list[str]: ...


class ChatModelFactory(Protocol):
    """Builds the LLM backends' chat client from settings (``pipeline.llm``)."""

    def __call__(self, settings: Settings) -> ChatModel: ...


class WebSourcesFactory(Protocol):
    """Builds the web evidence ``evidence.providers`` names (search providers, page fetching)."""

    def __call__(self, settings: Settings, *, cache: Cache | None = None) -> list[EvidenceSource]: ...


class RetrieverSourceFactory(Protocol):
    """Builds the evidence source over the user's retriever (``evidence.retriever``)."""

    def __call__(self, settings: Settings, *, cache: Cache | None = None) -> EvidenceSource: ...


class MissingProvider(RuntimeError):
    """A configured backend needs something from the outside world that was not provided."""


@dataclass(frozen=True, slots=True)
class Providers:
    """What the outside world supplies to the engine's builders. ``middleware.composition``
    fills it with the adapters; tests and embedders may pass their own, or nothing when no LLM
    backend and no web provider is configured."""

    chat_model: ChatModelFactory | None = None
    web_sources: WebSourcesFactory | None = None
    retriever_source: RetrieverSourceFactory | None = None

    def chat(self, settings: Settings) -> ChatModel:
        if self.chat_model is None:
            raise MissingProvider("an LLM backend is configured but no chat client was provided: build the "
                                  "pipeline through middleware.composition, or pass chat=")
        return self.chat_model(settings)

    def web(self, settings: Settings, cache: Cache | None) -> list[EvidenceSource]:
        if self.web_sources is None:
            raise MissingProvider("web evidence providers are configured but no web search was provided: build "
                                  "the pipeline through middleware.composition")
        return self.web_sources(settings, cache=cache)

    def retriever(self, settings: Settings, cache: Cache | None) -> EvidenceSource:
        if self.retriever_source is None:
            raise MissingProvider("the 'retriever' evidence provider is configured but no retriever source was "
                                  "provided: build the pipeline through middleware.composition")
        return self.retriever_source(settings, cache=cache)
