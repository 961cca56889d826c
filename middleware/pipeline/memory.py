"""The memory-hallucination margin signal (seed 002: "memory hallucination under changing context").

With ``factcheck.memory_check: true`` the proxy asks the upstream once, when the request
arrives and beside the main stream, for a closed-book answer to the user's question (the same
body without the context: see ``closed_book.closed_book_body``). A checked sentence is flagged
when ``sim_cb > m * sim_ctx``: its best cosine with a sentence of the closed-book answer
exceeds ``m`` times its best cosine with a sentence of the context evidence. Reported on
``SentenceReport.memory``, never a verdict by itself. The closed-book call is the request's
(``closed_book.ClosedBook``, started by the serving layer, on the relay's event loop: it is
I/O); :class:`MemoryCheck` is the checker's side, given the answer when it comes (in a check
worker, over its channel).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import numpy as np

from middleware.evidence.context_source import ContextSource
from middleware.evidence.request_passages import PROVIDER
from middleware.interfaces import Embedder
from middleware.metrics import timed
from middleware.pipeline.closed_book import sentences_of
from middleware.types import MemorySignal, Passage

log = logging.getLogger(__name__)

MEMORY_CONTEXT_K = 8
"""Memory signal: context passages (beside the sentence's context evidence) whose sentences
are compared with the sentence, found by BM25 for the claim. Bounds the cost per sentence
whatever the size of the context."""

MEMORY_WAIT_SHARE = 0.5
"""Share of the sentence budget a check may spend (from its start) waiting for the closed-book answer."""

class MemoryCheck:
    """Per-request state of the margin signal, held by the request's checks: the closed-book
    answer (a future the request's ``ClosedBook`` call fills), the margin ``m``, how long a
    sentence's check may wait for the answer (``wait_s`` from the start of its check), and
    embeddings shared by the request's sentences."""

    def __init__(self, answer: asyncio.Future[str | None], margin: float, wait_s: float) -> None:
        self.answer = answer
        self.margin = margin
        self.wait_s = wait_s
        self._answer_vectors: asyncio.Task[np.ndarray | None] | None = None
        self._vectors: dict[str, np.ndarray] = {}

    def close(self) -> None:
        """The request is over: stop embedding its answer if that still runs."""
        if self._answer_vectors is not None:
            self._answer_vectors.cancel()

    async def signal(self, claim: str, evidence: Sequence[Passage], context: ContextSource | None,
                     embedder: Embedder | None, started: float, timings: dict[str, float] | None = None
                     ) -> MemorySignal | None:
        """The sentence's margin signal, or None when there is no embedder, the closed-book
        call failed, or its answer is not ready ``wait_s`` after the check ``started``
        (``time.perf_counter()``)."""
        if embedder is None:
            return None
        with timed("memory", timings):
            answer = await self._answer(embedder, self.wait_s - (time.perf_counter() - started))
            if answer is None or not len(answer):
                return None
            units = context_sentences(claim, evidence, context)
            vectors = await self._embed(embedder, [claim, *units])
            sim_cb = float(np.max(answer @ vectors[0]))
            sim_ctx = float(np.max(vectors[1:] @ vectors[0])) if units else 0.0
        return MemorySignal(flagged=sim_cb > self.margin * sim_ctx, closed_book_similarity=round(sim_cb, 4),
                            context_similarity=round(sim_ctx, 4), margin=self.margin)

    async def _answer(self, embedder: Embedder, timeout: float) -> np.ndarray | None:
        """The closed-book answer's sentence vectors (embedded once per request)."""
        if self._answer_vectors is None:
            self._answer_vectors = asyncio.ensure_future(self._embed_answer(embedder))
        if not self._answer_vectors.done():
            await asyncio.wait([self._answer_vectors], timeout=max(timeout, 0.0))
        if not self._answer_vectors.done() or self._answer_vectors.cancelled():
            return None
        return self._answer_vectors.result()

    async def _embed_answer(self, embedder: Embedder) -> np.ndarray | None:
        text = await asyncio.shield(self.answer)
        sentences = sentences_of(text) if text else []
        if not sentences:
            return None
        try:
            return await embedder.embed(sentences)
        except Exception as exc:  # noqa: BLE001 - no signal rather than a failed check
            log.warning("embedding the closed-book answer failed: %s", type(exc).__name__)
            return None

    async def _embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            for text, vector in zip(new, await embedder.embed(new), strict=True):
                self._vectors[text] = np.asarray(vector, dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])


def context_sentences(claim: str, evidence: Sequence[Passage], context: ContextSource | None,
                      k: int = MEMORY_CONTEXT_K) -> list[str]:
    """The context sentences a claim is compared with: those of its context evidence and of
    the ``k`` context passages BM25 finds for it in the request's ``context`` (deduplicated,
    in order)."""
    chosen = [p for p in evidence if p.provider == PROVIDER]
    if context is not None:
        chosen += context.top(claim, k)
    return list(dict.fromkeys(s for p in chosen for s in sentences_of(p.text)))
