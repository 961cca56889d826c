"""The request's context passages as an evidence source, and the context policy.

:class:`ContextSource` searches a request's passages (BM25 over them, see
:mod:`middleware.evidence.request_passages`) like any other evidence source; the ranker
re-ranks all candidates downstream. The policy (per request ``factcheck.context_policy`` or
``evidence.context_policy``) is applied by :func:`sources_for_policy`: ``only`` (strict RAG:
nothing else is searched), ``first`` (the context answers a query alone when it covers it,
see :class:`ContextFirst`), or ``among`` (searched beside the index and the web, the ranker
decides).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from middleware.evidence.lexical import BM25, terms
from middleware.evidence.passages import embedding_text, passage_id
from middleware.evidence.request_passages import PROVIDER
from middleware.interfaces import EvidenceSource
from middleware.types import Passage

log = logging.getLogger(__name__)

FIRST_MIN_RECALL = 0.5
"""Policy 'first': the context answers a query alone when its best passage holds at least this
IDF-weighted share of the query's terms; otherwise the other sources are searched too."""


class ContextSource:
    """The request's passages as an ``EvidenceSource``: BM25 over the passages (title
    included), keeping passages that share a term with the query; ``score`` is BM25 divided
    by the best (0..1). Small sets, so no index: built per request in microseconds."""

    name = PROVIDER

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self._bm25 = BM25([terms(embedding_text(p)) for p in self.passages])
        self.sections = sections(self.passages)
        """The request's documents whole again (:func:`sections`)."""
        self.chars = sum(len(p.text) for p in self.sections)
        self._sections_bm25: BM25 | None = None

    def whole(self, query: str) -> list[Passage]:
        """Every section, the most relevant to ``query`` first (BM25, ``score`` as in
        :meth:`top`; sections sharing no term with it last, in request order)."""
        if self._sections_bm25 is None:
            self._sections_bm25 = BM25([terms(embedding_text(p)) for p in self.sections])
        return _ranked(self._sections_bm25, self.sections, query)

    async def search(self, query: str, k: int) -> list[Passage]:
        return self.top(query, k)

    def top(self, query: str, k: int) -> list[Passage]:
        return _ranked(self._bm25, self.passages, query, k)

    def coverage(self, query: str, passage: Passage) -> float:
        """IDF-weighted share of the query's terms that ``passage`` holds (0..1)."""
        wanted = terms(query)
        if not wanted:
            return 0.0
        held = set(terms(embedding_text(passage)))
        weights = {t: self._bm25.idf.get(t, self._bm25.default_idf) for t in set(wanted)}
        return sum(w for t, w in weights.items() if t in held) / (sum(weights.values()) or 1.0)


def _ranked(bm25: BM25, passages: Sequence[Passage], query: str, k: int | None = None) -> list[Passage]:
    """``passages`` by BM25 against ``query``, best first (ties in order), ``score`` divided by
    the best: with ``k``, the first ``k`` that share a term with it; without, all of them."""
    wanted = terms(query)
    scores = bm25.scores(wanted) if passages and wanted else [0.0] * len(passages)
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    if k is not None:
        order = [i for i in order if scores[i] > 0][:k]
    best = max(scores, default=0.0) or 1.0
    return [passages[i].model_copy(update={"score": scores[i] / best}) for i in order]


def sections(passages: Sequence[Passage]) -> list[Passage]:
    """The runs the passages of each source tile, merged back into one passage each: a
    document's section between headings (the splitter's windows overlap and never cross a
    heading), in source order. ``text`` is the source's text over the run, rebuilt from the
    passages' own offsets; ids are stable like any passage's."""
    by_source: dict[str, list[Passage]] = {}
    for passage in passages:
        by_source.setdefault(passage.source, []).append(passage)
    out: list[Passage] = []
    for source, members in by_source.items():
        if any(p.start is None or p.end is None for p in members):  # not cut from a text here: as they are
            out.extend(members)
            continue
        members.sort(key=lambda p: (p.start, p.end))
        run: list[Passage] = []
        for passage in [*members, None]:
            if passage is not None and (not run or passage.start <= _end(run)):
                run.append(passage)
                continue
            out.append(_merged(source, run))
            run = [passage] if passage is not None else []
    return out


def _end(run: Sequence[Passage]) -> int:
    return max(p.end or 0 for p in run)


def _merged(source: str, run: Sequence[Passage]) -> Passage:
    start, end = run[0].start or 0, _end(run)
    chars = [" "] * (end - start)
    for passage in run:
        at = (passage.start or 0) - start
        chars[at : at + len(passage.text)] = passage.text
    text = "".join(chars)
    first = run[0]
    return first.model_copy(update={"id": passage_id(source, start, end, text), "text": text, "start": start,
                                    "end": end, "score": 0.0})


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


def sources_for_policy(context: ContextSource | None, others: Sequence[EvidenceSource],
                       policy: str) -> list[EvidenceSource]:
    """The sources one check searches: with the request's ``context`` (its passages, indexed
    once per request by its checks), 'only' → the context alone, 'first' →
    :class:`ContextFirst`, 'among' → the others and the context side by side. Without
    context passages, 'only' searches nothing (strict RAG: the request's context, even when
    empty, is the only evidence), the others search ``others``."""
    if context is None or not context.passages:
        return [] if policy == "only" else list(others)
    if policy == "only":
        return [context]
    if policy == "first":
        return [ContextFirst(context, others)]
    if policy != "among":
        raise ValueError(f"unknown context policy {policy!r}; expected only, first or among")
    return [*others, context]
