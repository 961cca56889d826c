"""The engine's small interfaces. Adapters and backends implement these; the engine never
imports an adapter. The composition root (``middleware.factory``) builds them by name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from middleware.sse import SSEEvent
from middleware.types import CheckContext, MemorySignal, Passage, Sentence, SentenceReport


@runtime_checkable
class Checker(Protocol):
    """Checks one sentence. Must be cancellation-safe: the stream cancels it on disconnect
    or when the per-sentence budget runs out."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport: ...


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
class MemoryProbe(Protocol):
    """A request's memory-hallucination signal (``middleware.pipeline.memory.MemoryCheck``):
    per checked sentence, whether it is closer to the model's closed-book answer than to the
    request's context. ``close`` is called once the request is over."""

    async def signal(
        self, claim: str, evidence: Sequence[Passage], context: Sequence[Passage], embedder: Embedder | None,
        started: float, timings: dict[str, float] | None = None,
    ) -> MemorySignal | None: ...

    def close(self) -> None: ...


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
    """The LLM behind the proxy (OpenAI-compatible). Failures raise ``UpstreamError``."""

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream: ...

    async def complete(
        self, body: dict[str, Any], client_headers: Mapping[str, str]
    ) -> tuple[bytes, dict[str, Any]]: ...

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]: ...

    async def close(self) -> None: ...
