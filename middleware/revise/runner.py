"""Revise a whole text against given evidence, sentence by sentence, with no search: what
``factcheck edit`` and ``factcheck eval-edit`` run. Each sentence is verified, edited when
the verdict allows, and the edits are shifted to text offsets."""

from __future__ import annotations

from dataclasses import dataclass, field

from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.verifiers.base import Verifier
from middleware.pipeline import fava
from middleware.pipeline.editing import Editor, EditResult
from middleware.types import Edit, Passage, Tag, Verdict

_SENTENCE_TAGS = {"contradictory": "contradictory", "extrapolatory": "unverifiable"}


@dataclass(frozen=True)
class SentenceRevision:
    start: int
    end: int
    verdict: Verdict
    result: EditResult


@dataclass
class TextRevision:
    original: str
    text: str
    edits: list[Edit] = field(default_factory=list)  # text offsets
    sentences: list[SentenceRevision] = field(default_factory=list)

    def tags(self) -> list[Tag]:
        """Whole-sentence FAVA tags for sentences left unedited: contradicted ones are
        ``contradictory``, unsupported ones ``unverifiable``."""
        out = []
        for s in self.sentences:
            kind = _SENTENCE_TAGS.get(s.verdict.label)
            if kind and not s.result.changed:
                out.append(Tag(type=kind, start=s.start, end=s.end, text=self.original[s.start : s.end]))  # type: ignore[arg-type]
        return out

    def fava(self) -> str:
        return fava.render(self.original, self.edits, self.tags())

    def to_json(self, evidence: list[Passage]) -> dict[str, object]:
        """The ``factcheck edit`` output record (stable interface)."""
        index = {p.id: i for i, p in enumerate(evidence)}
        edits = [
            {
                "start": e.start, "end": e.end, "original": e.original, "replacement": e.replacement,
                "tag": e.tag, "evidence_index": index.get(e.evidence_id) if e.evidence_id is not None else None,
            }
            for e in self.edits
        ]  # fmt: skip
        return {"text": self.text, "edits": edits, "fava": self.fava()}


async def revise(
    text: str, evidence: list[Passage], verifier: Verifier, editor: Editor, context: str | None = None
) -> TextRevision:
    """Verify and edit each sentence of ``text``; earlier sentences are context for later ones."""
    spans = split_sentences(text) or ((0, len(text)),)
    out, pieces, at = TextRevision(original=text, text=text), [], 0
    for start, end in spans:
        sentence = text[start:end]
        before = " ".join(part for part in (context, text[:start].strip()) if part) or None
        verdict = await verifier.verify(sentence, evidence, before)
        result = await editor.edit(sentence, verdict, evidence, before)
        out.sentences.append(SentenceRevision(start, end, verdict, result))
        out.edits += [e.model_copy(update={"start": e.start + start, "end": e.end + start}) for e in result.edits]
        pieces += [text[at:start], result.text]
        at = end
    out.text = "".join(pieces) + text[at:]
    return out
