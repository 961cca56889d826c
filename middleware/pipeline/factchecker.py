"""The fact-checking pipeline behind the proxy: one ``check`` per sentence.

check-worthiness → decontextualisation → verification questions (CQGen) → search every
evidence source per question → rank, keep top-J per question → verify the claim against the
kept passages → FAVA tags and suggested edits → (correct mode) minimal edit → report.
``summarize`` builds the message's attribution report (≤ M snippets, each supporting or
contradicting a sentence) and auto-AIS from the reports.

CPU-bound parsing runs in a worker thread so the event loop keeps streaming other answers.
What the checks need from the request itself (the user's question, parsed; the request's
passages, indexed; the memory check's state) is read once per request, when the request's
checks are opened (``FactChecker.open`` → :class:`PipelineRequest`), and shared by every
sentence's check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


from middleware.evidence.context_source import ContextSource, sources_for_policy
from middleware.evidence.request_passages import INLINE_CONTEXT_CHARS, PROVIDER as CONTEXT
from middleware.interfaces import Embedder, EvidenceSource
from middleware.metrics import timed
from middleware.pipeline.attribution import attribution_report, unique_passages
from middleware.pipeline.checkworthy import skipped_verdict
from middleware.pipeline.cqgen import QuestionGenerator
from middleware.pipeline.excerpts import bounded_report
from middleware.pipeline.decontext import (
    MAX_PREVIOUS,
    Decontextualised,
    Decontextualiser,
    PreparedQuestion,
    prepare_question,
)
from middleware.pipeline.memory import MemoryCheck
from middleware.pipeline.slots import analyse_async
from middleware.pipeline.stages import generate_questions, prepare_claim, verify_claim
from middleware.pipeline.tagging import (
    contradiction_tags,
    extrapolation_tags,
    mentioned,
    subjective_tag,
    unmentioned_entities,
)
from middleware.pipeline.verifiers.base import DetailedVerdict, Verifier
from middleware.pipeline.editing import Editor
from middleware.pipeline.fava import render as render_fava
from middleware.types import CheckContext, Edit, Mode, Passage, Question, Revision, Sentence, SentenceReport, StreamSummary, Tag

log = logging.getLogger(__name__)

INLINE_QUESTION_CHARS = 2000
"""A user question up to this size is read on the event loop (a few milliseconds); a longer
one, a prompt with documents, in a worker thread."""
DOCUMENTS_MIN_CHARS = 300
"""A request context this large holds documents, not only a line of system prompt ("You are a
helpful assistant."): its answer's instructions and judgements are checked against it."""
SHOWN_PASSAGES = 4
"""Evidence passages a report lists, at most (the deciding one among them): a request context
read whole may be many documents, each verified against but not all worth quoting."""


class Ranker(Protocol):
    """Query–passage relevance: the ``top_j`` most relevant passages, best first."""

    async def rank(self, query: str, passages: list[Passage], top_j: int) -> list[Passage]: ...


class QuipScorer(Protocol):
    def quip_score(self, text: str) -> float | None: ...


@dataclass
class PipelineParts:
    sources: list[EvidenceSource]
    questions: QuestionGenerator
    decontext: Decontextualiser
    verifier: Verifier
    ranker: Ranker
    embedder: Embedder | None = None
    editor: Editor | None = None
    portrait: QuipScorer | None = None
    top_k: int = 5
    top_j: int = 1
    report_size: int = 5
    context_policy: str = "among"
    context_whole_chars: int = 20_000
    """A request context up to this size is read whole for every claim (see ``FactChecker.evidence``)."""
    memory_margin: float = 1.4
    memory_wait_s: float = 0.75
    """How long (from its start) a check may wait for the closed-book answer of the memory check."""


@dataclass(frozen=True, slots=True)
class RequestReading:
    """What every check of a request reads from the request itself, read once."""

    question: PreparedQuestion | None
    context: ContextSource | None


def read_request(context: CheckContext) -> RequestReading:
    """The user's question parsed and the request's passages indexed for search."""
    question = prepare_question(context.user_message) if context.user_message else None
    passages = ContextSource(context.request_passages) if context.request_passages else None
    return RequestReading(question, passages)


class PipelineRequest:
    """The pipeline's part of one request (a ``RequestChecks``): the request read once (in a
    worker thread when it is long, so the answer's first sentences need not wait for all of
    it), its evidence sources under its context policy, and its memory check."""

    def __init__(self, checker: FactChecker, context: CheckContext,
                 closed_book: asyncio.Future[str | None] | None) -> None:
        self.checker = checker
        self.context = context
        self.reading: RequestReading | asyncio.Future[RequestReading] = self._read(context)
        parts = checker.parts
        self.memory = (MemoryCheck(closed_book, parts.memory_margin, parts.memory_wait_s)
                       if closed_book is not None else None)

    @staticmethod
    def _read(context: CheckContext) -> RequestReading | asyncio.Future[RequestReading]:
        size = len(context.user_message or "")
        if size <= INLINE_QUESTION_CHARS and sum(len(p.text) for p in context.request_passages) <= INLINE_CONTEXT_CHARS:
            return read_request(context)
        reading = asyncio.ensure_future(asyncio.to_thread(read_request, context))
        reading.add_done_callback(_retrieve)
        return reading

    async def read(self, timings: dict[str, float]) -> RequestReading:
        """The request as read once; a check that must wait for the reading times the wait as
        its ``prepare`` stage (a wait does not cancel the reading)."""
        if not isinstance(self.reading, asyncio.Future):
            return self.reading
        if not self.reading.done():
            with timed("prepare", timings):
                await asyncio.shield(self.reading)
        return self.reading.result()

    async def check(self, sentence: Sentence, previous: Sequence[str]) -> SentenceReport:
        return await self.checker.check(sentence, self.context.model_copy(update={"previous": list(previous)}), self)

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        return await self.checker.summarize(reports, mode)

    def sources(self, reading: RequestReading) -> list[EvidenceSource]:
        policy = self.context.options.get("context_policy") or self.checker.parts.context_policy
        return sources_for_policy(reading.context, self.checker.parts.sources, str(policy))

    def close(self) -> None:
        if isinstance(self.reading, asyncio.Future):
            self.reading.cancel()
        if self.memory is not None:
            self.memory.close()


class FactChecker:
    def __init__(self, parts: PipelineParts) -> None:
        self.parts = parts

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> PipelineRequest:
        """The request's checks: it is read now, once for all of them."""
        return PipelineRequest(self, context, closed_book)

    # ------------------------------------------------------------------ check
    async def check(self, sentence: Sentence, context: CheckContext, request: PipelineRequest) -> SentenceReport:
        """One sentence of ``request`` (``context``: the request's, with the sentences before it)."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        text = _without_code(sentence)
        # the parse is the costly part; later stages (decontextualisation reads the sentences before) hit the cache
        await analyse_async([text, *context.previous[-MAX_PREVIOUS:]])
        reading = await request.read(timings)
        sources = request.sources(reading)
        documents = reading.context is not None and reading.context.chars >= DOCUMENTS_MIN_CHARS
        claim = await prepare_claim(text, context, self.parts.decontext, timings, reading.question, documents)
        if not claim.worthiness.checkworthy:
            # Value judgements and hedged opinions ("I think ...") hold no universal truth: FAVA 'subjective'.
            opinion = claim.worthiness.subjective or claim.worthiness.reason == "hedged"
            tags = [subjective_tag(sentence)] if opinion else []
            return self._report(sentence, skipped_verdict(claim.worthiness), timings, tags=tags)
        questions = await generate_questions(self.parts.questions, claim, context.user_message, timings)
        evidence = await self.evidence(claim.text, questions, reading.context, sources, timings)
        # verified as written against the request's documents read whole: their windows name what
        # the sentence's "it" stands for, and a rewrite only adds the risk of a wrong antecedent
        # (docs/verdicts.md: end to end, every set scored higher without it)
        verified = claim.as_written() if _documents_only(evidence, reading.context, self.parts) else claim
        verdict = await verify_claim(self.parts.verifier, verified, evidence, None, timings)
        tags, edits = await self._tags(sentence, verified.decontext, verdict, evidence, sources)
        corrected = revision = None
        if context.mode is Mode.CORRECT and verdict.label == "contradictory":
            corrected, edits, revision = await self._correct(sentence, verdict, evidence, context, timings)
        quip = self.parts.portrait.quip_score(sentence.text) if self.parts.portrait is not None else None
        memory = None
        if request.memory is not None:  # the client asked for the memory-hallucination signal
            memory = await request.memory.signal(claim.text, evidence, reading.context, self.parts.embedder,
                                                 started, timings)
        report = self._report(sentence, verdict, timings, tags=tags, edits=edits, questions=questions,
                              evidence=shown_evidence(evidence, verdict, SHOWN_PASSAGES), corrected=corrected, quip=quip)
        return bounded_report(report.model_copy(update={"memory": memory, "revision": revision}), verdict, evidence)

    async def evidence(
        self, claim: str, questions: list[Question], context: ContextSource | None,
        sources: Sequence[EvidenceSource], timings: dict[str, float],
    ) -> list[Passage]:  # fmt: skip
        """What the claim is verified against. A request that brings its own documents, up to
        ``context_whole_chars``, has them read whole (each document's sections, the verifier
        windows them), with what the other sources find beside them: one passage per question
        lost what the answer's sentence drew from a passage no question ranked first (on
        RAGTruth's and the battery's answers, the verifier reading the whole context was
        several points of balanced accuracy above it; docs/verdicts.md). A larger context, or
        none, is searched per question (RARR)."""
        if context is None or not _reads_whole(context, self.parts):
            return await self._research(claim, questions, sources, timings)
        others = [s for s in sources if s is not context]
        found = await self._research(claim, questions, others, timings) if others else []
        return [*context.whole(claim), *(p for p in found if p.provider != context.name)]

    async def _research(
        self, claim: str, questions: list[Question], sources: Sequence[EvidenceSource], timings: dict[str, float]
    ) -> list[Passage]:
        """Search every source for every question (and the claim), keep top-J per query."""
        queries = list(dict.fromkeys([q.text for q in questions] + [claim]))
        with timed("search", timings):
            found = await asyncio.gather(*(self._search(sources, q) for q in queries))
        with timed("rerank", timings):
            ranked = await asyncio.gather(
                *(self.parts.ranker.rank(q, hits, self.parts.top_j) for q, hits in zip(queries, found, strict=True))
            )
        return unique_passages(ranked)

    async def _search(self, sources: Sequence[EvidenceSource], query: str) -> list[Passage]:
        results = await asyncio.gather(*(s.search(query, self.parts.top_k) for s in sources), return_exceptions=True)
        hits: list[Passage] = []
        for source, result in zip(sources, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("evidence source %s failed: %s", getattr(source, "name", "?"), type(result).__name__)
                continue
            hits.extend(result)
        return hits

    async def _tags(
        self,
        sentence: Sentence,
        dec: Decontextualised,
        verdict: DetailedVerdict,
        evidence: list[Passage],
        sources: Sequence[EvidenceSource],
    ) -> tuple[list[Tag], list[Edit]]:
        if verdict.label == "contradictory":
            return contradiction_tags(sentence, dec, verdict, evidence)
        if verdict.label == "extrapolatory":
            return extrapolation_tags(sentence, dec, await self._invented(dec, evidence, sources)), []
        return [], []

    async def _invented(
        self, dec: Decontextualised, evidence: list[Passage], sources: Sequence[EvidenceSource]
    ) -> list[tuple[int, str]]:
        """Entities of the claim that no source knows at all: absent from the evidence
        found for the claim, and still absent when searched for by name (FAVA 'invented').
        An entity the corpus does know is only unverified here, not invented."""
        missing = unmentioned_entities(dec, evidence)
        if not missing:
            return []
        found = await asyncio.gather(*(self._search(sources, text) for _, text in missing))
        return [(start, text) for (start, text), hits in zip(missing, found, strict=True) if not mentioned(text, hits)]

    async def _correct(
        self,
        sentence: Sentence,
        verdict: DetailedVerdict,
        evidence: list[Passage],
        context: CheckContext,
        timings: dict[str, float],
    ) -> tuple[str | None, list[Edit], Revision]:
        """Edit the sentence (correct mode): the corrected text, the applied edits in message
        offsets, and the decision. A sentence the editor does not fix, or whose edit the gate
        refuses, is flagged and left as written, with no edits: only applied changes are edits."""
        if self.parts.editor is None:
            return None, [], Revision(status="flagged", reason="no editor is configured")
        earlier = "\n".join([*([context.user_message] if context.user_message else []), *context.previous[-3:]])
        with timed("edit", timings):
            result = await self.parts.editor.edit(sentence.text, verdict, evidence, earlier or None)
        if not result.changed or not result.edits:
            revision = result.revision or Revision(status="flagged", reason=result.rejected or "no edit was found")
            return None, [], revision
        revision = result.revision or Revision(
            status="applied", reason="applied by the editor (no edit gate configured)", suggested=result.text, evidence_id=result.evidence_id,
            evidence_sentence=result.edits[0].evidence,
        )  # fmt: skip
        shifted = [
            e.model_copy(update={"start": e.start + sentence.start, "end": e.end + sentence.start}) for e in result.edits
        ]
        return result.text, shifted, revision

    @staticmethod
    def _report(sentence: Sentence, verdict, timings, *, tags=(), edits=(), questions=(), evidence=(),
                corrected=None, quip=None) -> SentenceReport:
        with timed("report", timings):
            fava = render_fava(sentence.text, list(edits), list(tags), offset=sentence.start) if tags else None
            return SentenceReport(
                index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
                verdict=verdict, tags=list(tags), questions=list(questions), evidence=list(evidence),
                edits=list(edits), corrected_text=corrected, quip=quip, fava=fava, timings_ms=timings,
            )

    # ------------------------------------------------------------------ summary
    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        """Verdict counts, the attribution report (the passages that decided a sentence's
        verdict, each linked to its sentences, chosen to cover the claims' questions) and
        auto-AIS, read from the reports: nothing is searched or verified again."""
        attribution = attribution_report(reports, self.parts.report_size)
        return StreamSummary.of_reports(reports, mode, attribution_report=attribution.passages,
                                        attribution_links=attribution.links, alignment=attribution.alignment,
                                        attr_auto=attribution.attr_auto)


def _documents_only(evidence: Sequence[Passage], context: ContextSource | None, parts: PipelineParts) -> bool:
    """The claim is verified against the request's documents read whole and nothing else."""
    return (context is not None and _reads_whole(context, parts) and bool(evidence)
            and all(p.provider == CONTEXT for p in evidence))


def _reads_whole(context: ContextSource, parts: PipelineParts) -> bool:
    """The request's documents are read whole for every claim (``context_whole_chars``)."""
    return bool(context.sections) and context.chars <= parts.context_whole_chars


def shown_evidence(evidence: Sequence[Passage], verdict: DetailedVerdict, limit: int) -> list[Passage]:
    """The passages a report lists: the first ``limit`` of what the claim was verified
    against (best first), leaving out request sections that share no word with it (read, not
    quoted), and the one that decided its verdict wherever it stands."""
    index = verdict.evidence_index
    deciding = evidence[index] if index is not None and 0 <= index < len(evidence) else None
    if deciding is not None and deciding.id != verdict.evidence_id:
        deciding = None
    shown = [p for p in evidence if p is deciding or p.provider != CONTEXT or p.score > 0][:limit]
    if deciding is not None and deciding not in shown:
        shown = [*shown[: limit - 1], deciding]
    return shown


def _retrieve(task: asyncio.Future[RequestReading]) -> None:
    """A reading that failed with no check left to await it is not an unretrieved error."""
    if not task.cancelled():
        task.exception()


def _without_code(sentence: Sentence) -> str:
    """The sentence with inline code blanked out (same length, so offsets hold)."""
    text = sentence.text
    for start, end in sentence.code_spans:
        a, b = start - sentence.start, end - sentence.start
        text = text[:a] + " " * (b - a) + text[b:]
    return text
