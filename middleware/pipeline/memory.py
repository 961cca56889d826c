"""The memory-hallucination margin signal (seed 002: "memory hallucination under changing context").

With ``factcheck.memory_check: true`` the proxy asks the upstream once, when the request
arrives and beside the main stream, for a closed-book answer to the user's question (the same
body without the context: see :func:`closed_book_body`). A checked sentence is flagged when
``sim_cb > m * sim_ctx``: its best cosine with a sentence of the closed-book answer exceeds
``m`` times its best cosine with a sentence of the context evidence. Reported on
``SentenceReport.memory``, never a verdict by itself. The closed-book call is the request's
(:class:`ClosedBook`, started by the serving layer, on the relay's event loop: it is I/O);
:class:`MemoryCheck` is the checker's side, given the answer when it comes (in a check worker,
over its channel).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from middleware.evidence.context_source import PROVIDER, ContextSource
from middleware.evidence.request_passages import QUESTION_MAX_CHARS
from middleware.interfaces import Embedder, Upstream
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS, timed
from middleware.segmenter import segment_text
from middleware.types import MemorySignal, Passage, SegmentKind

log = logging.getLogger(__name__)

MEMORY_CONTEXT_K = 8
"""Memory signal: context passages (beside the sentence's context evidence) whose sentences
are compared with the sentence, found by BM25 for the claim. Bounds the cost per sentence
whatever the size of the context."""

MEMORY_WAIT_SHARE = 0.5
"""Share of the sentence budget a check may spend (from its start) waiting for the closed-book answer."""

_CLOSED_BOOK_DROP = frozenset({
    "messages", "stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
    "functions", "function_call", "parallel_tool_calls", "response_format", "logprobs", "top_logprobs", "audio",
    "modalities", "prediction", "store",
})


def sentences_of(text: str) -> list[str]:
    """The sentence (and table row) texts of ``text``."""
    return [s.text.strip() for s in segment_text(text)
            if s.kind in (SegmentKind.SENTENCE, SegmentKind.TABLE) and s.text.strip()]


def closed_book_question(text: str) -> str:
    """What to ask closed-book: the user's message, or, when it is long enough to hold
    documents, its questions (sentences ending in '?'), else its shortest of first and
    last paragraph (where an instruction usually sits)."""
    text = text.strip()
    if len(text) <= QUESTION_MAX_CHARS:
        return text
    questions = [s for s in sentences_of(text) if s.rstrip("\"')]*_").endswith("?")]
    if questions:
        return " ".join(questions)
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return min((paragraphs[0], paragraphs[-1]), key=len)[:QUESTION_MAX_CHARS]


def closed_book_body(forward: Mapping[str, Any], question: str, max_tokens: int) -> dict[str, Any]:
    """The main request's body without its context: the user's question alone (no system,
    tool or earlier messages, no tools), not streamed, ``max_tokens`` long. Sampling fields
    and the model are kept, so it is the same model answering from memory."""
    body = {key: value for key, value in forward.items() if key not in _CLOSED_BOOK_DROP}
    body["messages"] = [{"role": "user", "content": question}]
    body["stream"] = False
    body["max_completion_tokens" if "max_completion_tokens" in forward else "max_tokens"] = max_tokens
    return body


class ClosedBook:
    """The closed-book upstream call of one request, started at once. ``task`` resolves to
    its text, or None when it failed (logged; never an error in the stream). Its tokens
    (prompt + completion) and time go to ``MEMORY_CHECK_TOKENS`` / ``MEMORY_CHECK_LATENCY``."""

    def __init__(self, upstream: Upstream, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        self.usage: dict[str, int] = {}
        self.seconds: float | None = None
        self.task = asyncio.create_task(self._ask(upstream, body, dict(headers)), name="closed-book")

    @classmethod
    def start(cls, upstream: Upstream, forward: Mapping[str, Any], headers: Mapping[str, str], question: str,
              max_tokens: int) -> ClosedBook:
        """Ask ``question`` closed-book, with the model and sampling of the client's body ``forward``."""
        return cls(upstream, closed_book_body(forward, closed_book_question(question), max_tokens), headers)

    async def _ask(self, upstream: Upstream, body: dict[str, Any], headers: dict[str, str]) -> str | None:
        t0 = time.perf_counter()
        try:
            _, completion = await upstream.complete(body, headers)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the memory signal is optional: no signal, no error
            log.warning("closed-book call for the memory check failed: %s", exc)
            return None
        finally:
            self.seconds = time.perf_counter() - t0
        MEMORY_CHECK_LATENCY.observe(self.seconds)
        usage = completion.get("usage") if isinstance(completion, dict) else None
        if isinstance(usage, dict):
            self.usage = {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
            MEMORY_CHECK_TOKENS.inc(sum(self.usage.values()))
        try:
            content = completion["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str) or not content.strip():
            log.warning("closed-book call for the memory check returned no text")
            return None
        return content


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
