"""Grounding in the request itself (RAG faithfulness) and the memory-hallucination signal.

Context evidence
    Most chat apps that care about facts put the documents in the request: system and user
    messages, tool/function results, or ``factcheck.context``. :func:`request_passages` cuts
    them with the project's one passage splitter, each passage named by where it came from
    (``source='messages[2] (tool)'``, ``'factcheck.context[0]'``, provider ``'context'``), and
    :class:`ContextSource` searches them (BM25 over the request's passages) like any other
    evidence source; the ranker re-ranks all candidates downstream. The policy (per request
    ``factcheck.context_policy`` or ``evidence.context_policy``) is applied by
    :func:`sources_for_policy`: ``only`` (strict RAG: nothing else is searched), ``first``
    (the context answers a query alone when it covers it, see :class:`ContextFirst`), or
    ``among`` (searched beside the index and the web, the ranker decides).

Memory-hallucination margin (seed 002: "memory hallucination under changing context")
    With ``factcheck.memory_check: true`` the proxy asks the upstream once, when the request
    arrives and beside the main stream, for a closed-book answer to the user's question (the
    same body without the context: see :func:`closed_book_body`). A checked sentence is
    flagged when ``sim_cb > m * sim_ctx``: its best cosine with a sentence of the closed-book
    answer exceeds ``m`` times its best cosine with a sentence of the context evidence.
    Reported on ``SentenceReport.memory``, never a verdict by itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from middleware.evidence.passages import STRIDE, WINDOW, embedding_text, split_passages
from middleware.interfaces import Embedder, EvidenceSource, Upstream
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS, timed
from middleware.pipeline.lexical import BM25, terms
from middleware.segmenter import segment_text
from middleware.types import MemorySignal, Passage, SegmentKind

log = logging.getLogger(__name__)

PROVIDER = "context"
CONTEXT_ROLES = {"system": "system", "developer": "developer", "user": "user", "tool": "tool", "function": "function"}
"""Message roles whose text is context (the assistant's own earlier turns are not evidence)."""
FIRST_MIN_RECALL = 0.5
"""Policy 'first': the context answers a query alone when its best passage holds at least this
IDF-weighted share of the query's terms; otherwise the other sources are searched too."""
MEMORY_CONTEXT_K = 8
"""Memory signal: context passages (beside the sentence's context evidence) whose sentences
are compared with the sentence, found by BM25 for the claim. Bounds the cost per sentence
whatever the size of the context."""
QUESTION_MAX_CHARS = 500
"""A longer user message is taken to hold documents: it is context, and only its questions go
closed-book. A shorter one is the request itself."""


# ---------------------------------------------------------------------------- passages
@dataclass(frozen=True, slots=True)
class ContextText:
    """One piece of the request's context before splitting."""

    source: str
    text: str
    title: str | None = None
    url: str | None = None


class _Message(Protocol):
    role: str

    def text(self) -> str: ...


def message_texts(messages: Sequence[_Message] | Sequence[tuple[str, str]]) -> list[ContextText]:
    """The context-bearing messages, each named by its position: ``messages[2] (tool)``.
    System, developer, tool and function messages always; a user message only when it is
    long enough to hold a document (:data:`QUESTION_MAX_CHARS`): a short one is the request
    itself ("Tell me about Paris."), not evidence. Takes protocol ``Message`` objects or
    (role, text) pairs (the LangChain adapter's)."""
    out = []
    for i, message in enumerate(messages):
        role, text = message if isinstance(message, tuple) else (message.role, message.text())
        if role == "user" and len(text.strip()) <= QUESTION_MAX_CHARS:
            continue
        if role in CONTEXT_ROLES and text.strip():
            out.append(ContextText(f"messages[{i}] ({role})", readable(text) if role in ("tool", "function") else text))
    return out


def document_texts(documents: Sequence[Any]) -> list[ContextText]:
    """``factcheck.context`` documents (``ContextDocument`` or bare strings), named
    ``factcheck.context[i]``; a document's own ``source`` becomes its URL when it is one,
    else its title when it has none."""
    out = []
    for i, doc in enumerate(documents):
        text, title, origin = (doc, None, None) if isinstance(doc, str) else (doc.text, doc.title, doc.source)
        url = origin if origin and re.match(r"https?://", origin) else None
        if origin and url is None and title is None:
            title = origin
        if text.strip():
            out.append(ContextText(f"factcheck.context[{i}]", text, title=title, url=url))
    return out


def context_passages(texts: Iterable[ContextText], window: int = WINDOW, stride: int = STRIDE) -> list[Passage]:
    """Split every context text like an indexed document. Passages made only of questions
    (the user asking, not telling) carry no facts and are left out."""
    passages = []
    for item in texts:
        for passage in split_passages(item.text, item.source, item.title, window, stride, provider=PROVIDER,
                                      url=item.url):
            if not _only_questions(passage.text):
                passages.append(passage)
    return passages


def request_texts(request: Any) -> list[ContextText]:
    """The context-bearing texts of a chat request (``middleware.server.protocol.ChatRequest``)."""
    texts = message_texts(request.messages)
    if request.factcheck is not None:
        texts += document_texts(request.factcheck.context)
    return texts


def request_passages(request: Any, window: int = WINDOW, stride: int = STRIDE) -> list[Passage]:
    """Every context passage of a chat request."""
    return context_passages(request_texts(request), window, stride)


def readable(text: str) -> str:
    """A tool result that is JSON, as markdown list lines the segmenter cuts one per object:
    ``- title: Eiffel Tower; completed: 1889`` (an object's fields stay together, so its name
    and its numbers are in one evidence sentence). Other text is returned unchanged."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict | list):
        return text
    lines: list[str] = []
    _render(data, "", lines)
    return "\n".join(f"- {line}" for line in lines) + "\n" if lines else text


def _render(value: Any, key: str, lines: list[str]) -> None:
    if isinstance(value, dict):
        fields = [f"{_label(k)}: {_scalar(v)}" for k, v in value.items() if _is_scalar(v)]
        if fields:
            lines.append(f"{_label(key) + ' — ' if key else ''}{'; '.join(fields)}")
        for k, v in value.items():
            if not _is_scalar(v):
                _render(v, k, lines)
    elif isinstance(value, list):
        if value and all(_is_scalar(v) for v in value):
            lines.append(f"{_label(key) + ': ' if key else ''}{', '.join(_scalar(v) for v in value)}")
        else:
            for item in value:
                _render(item, key, lines)
    elif value is not None:
        lines.append(f"{_label(key) + ': ' if key else ''}{_scalar(value)}")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _scalar(value: Any) -> str:
    return "null" if value is None else str(value).strip()


def _label(key: str) -> str:
    return key.replace("_", " ").strip()


def _only_questions(text: str) -> bool:
    units = [s.text.strip() for s in segment_text(text) if s.kind is SegmentKind.SENTENCE and s.text.strip()]
    return bool(units) and all(u.rstrip("\"')]*_").endswith("?") for u in units)


def sentences_of(text: str) -> list[str]:
    """The sentence (and table row) texts of ``text``."""
    return [s.text.strip() for s in segment_text(text)
            if s.kind in (SegmentKind.SENTENCE, SegmentKind.TABLE) and s.text.strip()]


# ---------------------------------------------------------------------------- sources
class ContextSource:
    """The request's passages as an ``EvidenceSource``: BM25 over the passages (title
    included), keeping passages that share a term with the query; ``score`` is BM25 divided
    by the best (0..1). Small sets, so no index: built per request in microseconds."""

    name = PROVIDER

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self._bm25 = BM25([terms(embedding_text(p)) for p in self.passages])

    async def search(self, query: str, k: int) -> list[Passage]:
        return self.top(query, k)

    def top(self, query: str, k: int) -> list[Passage]:
        wanted = terms(query)
        scores = self._bm25.scores(wanted) if self.passages and wanted else []
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))[:k]
        best = scores[order[0]] if order else 1.0
        return [self.passages[i].model_copy(update={"score": scores[i] / best}) for i in order]

    def coverage(self, query: str, passage: Passage) -> float:
        """IDF-weighted share of the query's terms that ``passage`` holds (0..1)."""
        wanted = terms(query)
        if not wanted:
            return 0.0
        held = set(terms(embedding_text(passage)))
        weights = {t: self._bm25.idf.get(t, self._bm25.default_idf) for t in set(wanted)}
        return sum(w for t, w in weights.items() if t in held) / (sum(weights.values()) or 1.0)


class ContextFirst:
    """Policy 'first': search the context; when its best passage covers the query
    (:data:`FIRST_MIN_RECALL`), that is the answer and nothing else is searched (no index or
    web latency); otherwise the other sources too, the context's hits ahead of theirs."""

    name = "context-first"

    def __init__(self, context: ContextSource, others: Sequence[EvidenceSource],
                 min_recall: float = FIRST_MIN_RECALL) -> None:
        self.context = context
        self.others = list(others)
        self.min_recall = min_recall

    async def search(self, query: str, k: int) -> list[Passage]:
        hits = self.context.top(query, k)
        if not self.others or (hits and self.context.coverage(query, hits[0]) >= self.min_recall):
            return hits
        results = await asyncio.gather(*(s.search(query, k) for s in self.others), return_exceptions=True)
        for source, result in zip(self.others, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("evidence source %s failed: %s", getattr(source, "name", "?"), type(result).__name__)
            else:
                hits.extend(result)
        return hits


_SOURCES_CACHED = 64
_sources: OrderedDict[int, tuple[Sequence[Passage], ContextSource]] = OrderedDict()
_sources_lock = threading.Lock()


def context_source(passages: Sequence[Passage]) -> ContextSource:
    """The ``ContextSource`` of a request's passages, built once per request (not once per
    checked sentence: a large context takes tens of milliseconds to index) and cached by
    the identity of the list, which every check of the request shares."""
    with _sources_lock:
        hit = _sources.get(id(passages))
        if hit is not None and hit[0] is passages:
            _sources.move_to_end(id(passages))
            return hit[1]
    source = ContextSource(passages)
    with _sources_lock:
        _sources[id(passages)] = (passages, source)  # the list is held: its id is not reused meanwhile
        while len(_sources) > _SOURCES_CACHED:
            _sources.popitem(last=False)
    return source


def sources_for_policy(passages: Sequence[Passage], others: Sequence[EvidenceSource],
                       policy: str) -> list[EvidenceSource]:
    """The sources one check searches: with context, 'only' → the context alone, 'first' →
    :class:`ContextFirst`, 'among' → the others and the context side by side. Without
    context passages, 'only' searches nothing (strict RAG: the request's context, even when
    empty, is the only evidence), the others search ``others``."""
    if not passages:
        return [] if policy == "only" else list(others)
    context = context_source(passages)
    if policy == "only":
        return [context]
    if policy == "first":
        return [ContextFirst(context, others)]
    if policy != "among":
        raise ValueError(f"unknown context policy {policy!r}; expected only, first or among")
    return [*others, context]


# ---------------------------------------------------------------------------- memory check
_CLOSED_BOOK_DROP = frozenset({
    "messages", "stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
    "functions", "function_call", "parallel_tool_calls", "response_format", "logprobs", "top_logprobs", "audio",
    "modalities", "prediction", "store",
})


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
    """The closed-book upstream call of one request, started at once. ``answer()`` gives
    its text, or None when it failed (logged; never an error in the stream). Its tokens
    (prompt + completion) and time go to ``MEMORY_CHECK_TOKENS`` / ``MEMORY_CHECK_LATENCY``."""

    def __init__(self, upstream: Upstream, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        self.usage: dict[str, int] = {}
        self.seconds: float | None = None
        self._task = asyncio.create_task(self._ask(upstream, body, dict(headers)), name="closed-book")

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

    @property
    def done(self) -> bool:
        return self._task.done()

    async def answer(self) -> str | None:
        return await asyncio.shield(self._task)

    def cancel(self) -> None:
        self._task.cancel()


class MemoryCheck:
    """Per-request state of the margin signal: the closed-book call, the margin ``m``, how
    long a sentence's check may wait for the closed-book answer (``wait_s`` from the start
    of its check), and embeddings shared by the request's sentences."""

    def __init__(self, closed_book: ClosedBook, margin: float, wait_s: float) -> None:
        self.closed_book = closed_book
        self.margin = margin
        self.wait_s = wait_s
        self._answer_vectors: asyncio.Task[np.ndarray | None] | None = None
        self._vectors: dict[str, np.ndarray] = {}

    @classmethod
    def start(cls, upstream: Upstream, forward: Mapping[str, Any], headers: Mapping[str, str], question: str, *,
              max_tokens: int, margin: float, wait_s: float) -> MemoryCheck:
        body = closed_book_body(forward, closed_book_question(question), max_tokens)
        return cls(ClosedBook(upstream, body, headers), margin, wait_s)

    def close(self) -> None:
        """The request is over: stop the closed-book call if it still runs."""
        self.closed_book.cancel()
        if self._answer_vectors is not None:
            self._answer_vectors.cancel()

    async def signal(self, claim: str, evidence: Sequence[Passage], context: Sequence[Passage],
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
        text = await self.closed_book.answer()
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


def context_sentences(claim: str, evidence: Sequence[Passage], context: Sequence[Passage],
                      k: int = MEMORY_CONTEXT_K) -> list[str]:
    """The context sentences a claim is compared with: those of its context evidence and of
    the ``k`` context passages BM25 finds for it (deduplicated, in order)."""
    chosen = [p for p in evidence if p.provider == PROVIDER]
    if context:
        chosen += ContextSource(context).top(claim, k)
    return list(dict.fromkeys(s for p in chosen for s in sentences_of(p.text)))
