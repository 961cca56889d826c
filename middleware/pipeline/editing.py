"""The editor interface and its result.

An editor revises one sentence that a verifier judged against evidence, so that it agrees
with the evidence while changing as little as possible (RARR's "editing for attribution").
Edits carry offsets into the sentence; the orchestrator shifts them to message offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from middleware.evidence.lexical import BM25, terms
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.types import Edit, Passage, Revision, TagType, Verdict


@dataclass(frozen=True)
class EditResult:
    """What an editor did to one sentence.

    ``text`` is the edited sentence (the original when nothing changed); ``edits`` are in
    sentence offsets; ``tag`` is the FAVA type of the revision (the first edit's);
    ``evidence_index``/``evidence_id`` name the passage that grounds it; ``rejected`` says
    why the sentence was left unchanged (a guard, no disagreement, no improving edit);
    ``verdict`` is the edited sentence's verdict when the editor re-verified it;
    ``revision`` is the edit gate's decision (correct mode), applied or flagged."""

    original: str
    text: str
    edits: list[Edit] = field(default_factory=list)
    tag: TagType | None = None
    evidence_index: int | None = None
    evidence_id: str | None = None
    rejected: str | None = None
    backend: str | None = None
    verdict: Verdict | None = None
    revision: Revision | None = None

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def __iter__(self) -> Iterator[object]:
        """Unpacks as ``(text, edits)`` for callers that need only those."""
        return iter((self.text, self.edits))

    @classmethod
    def unchanged(cls, sentence: str, reason: str, backend: str | None = None) -> EditResult:
        return cls(original=sentence, text=sentence, rejected=reason, backend=backend)

    @classmethod
    def flagged(cls, sentence: str, revision: Revision, backend: str | None = None) -> EditResult:
        """The sentence left as written because of ``revision`` (the gate's decision)."""
        return cls(original=sentence, text=sentence, rejected=revision.reason, backend=backend, revision=revision)


@runtime_checkable
class Editor(Protocol):
    """Revises a sentence to agree with the evidence. ``verdict`` is the verifier's verdict
    on the sentence (a ``DetailedVerdict`` lets the slots editor use its mismatches);
    ``context`` is earlier text the sentence depends on."""

    name: str

    async def edit(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None = None,
    ) -> EditResult: ...


def ranked_evidence(claim: str, verdict: Verdict, evidence: list[Passage], limit: int) -> list[int]:
    """Up to ``limit`` passage indices: the verdict's deciding passage first, then by
    lexical relevance to the claim."""
    if not evidence:
        return []
    recall = BM25([terms(p.text) for p in evidence]).recall(terms(claim))
    order = sorted(range(len(evidence)), key=lambda i: recall[i], reverse=True)
    first = getattr(verdict, "evidence_index", None)
    if isinstance(first, int) and 0 <= first < len(evidence):
        order = [first, *(i for i in order if i != first)]
    return order[:limit]
