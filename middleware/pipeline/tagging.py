"""FAVA tags and suggested edits from a verdict, in message offsets.

Verdict spans arrive in the sentence's own offsets (``stages.verify_claim`` maps them back
from the decontextualised claim) and are shifted by the sentence's offset in the message.
A span over a resolved pronoun gets a tag but no edit: replacing "he" by a name is not a
minimal correction."""

from __future__ import annotations

import re
from collections.abc import Sequence

from middleware.pipeline.decontext import Decontextualised
from middleware.pipeline.slots import ENTITY_LABELS, analyse
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.types import Edit, Passage, Sentence, Tag

_INVENTABLE = ENTITY_LABELS - {"NORP", "LANGUAGE"}


def _to_message(sentence: Sentence, span: tuple[int, int]) -> tuple[int, int]:
    return sentence.start + span[0], sentence.start + span[1]


def _touches_rewrite(dec: Decontextualised, span: tuple[int, int]) -> bool:
    return any(r.start < span[1] and span[0] < r.end for r in dec.replacements)


def _whole(sentence: Sentence, type_: str, evidence_id: str | None = None) -> Tag:
    return Tag(type=type_, start=sentence.start, end=sentence.end, text=sentence.text, evidence_id=evidence_id)


def contradiction_tags(
    sentence: Sentence, dec: Decontextualised, verdict: DetailedVerdict, evidence: Sequence[Passage]
) -> tuple[list[Tag], list[Edit]]:
    """Entity/relation tags with the evidence's replacement as suggested edit, or one
    whole-sentence ``contradictory`` tag when no single slot explains the contradiction."""
    tags: list[Tag] = []
    edits: list[Edit] = []
    for mismatch in verdict.mismatches:
        start, end = _to_message(sentence, mismatch.span)
        original = mismatch.text
        passage = evidence[mismatch.evidence_index] if 0 <= mismatch.evidence_index < len(evidence) else None
        evidence_id = passage.id if passage else verdict.evidence_id
        tags.append(Tag(type=mismatch.tag, start=start, end=end, text=original,
                        replacement=mismatch.replacement, evidence_id=evidence_id))
        if mismatch.replacement and original != mismatch.replacement and not _touches_rewrite(dec, mismatch.span):
            edits.append(Edit(start=start, end=end, original=original, replacement=mismatch.replacement,
                              tag=mismatch.tag, evidence_id=evidence_id,
                              evidence=verdict.evidence_sentence or (passage.text if passage else None)))
    if not tags:
        tags.append(_whole(sentence, "contradictory", verdict.evidence_id))
    return tags, edits


def unmentioned_entities(dec: Decontextualised, evidence: Sequence[Passage]) -> list[tuple[int, str]]:
    """Named entities of the claim (start offset in the claim, text) that no passage in
    ``evidence`` mentions at all."""
    found = []
    for slot in analyse(dec.text).slots:
        if slot.kind == "entity" and slot.label in _INVENTABLE and not mentioned(slot.text, evidence):
            found.append((slot.start, slot.text))
    return found


def mentioned(name: str, passages: Sequence[Passage]) -> bool:
    """Whether any passage contains every content word of ``name``."""
    words = [w for w in re.findall(r"\w+", name.lower()) if len(w) > 2 and w not in {"the", "and"}]
    return bool(words) and any(all(w in p.text.lower() for w in words) for p in passages)


def extrapolation_tags(
    sentence: Sentence, dec: Decontextualised, invented: Sequence[tuple[int, str]]
) -> list[Tag]:
    """``invented`` for the given entities (ones no source mentions anywhere), else one
    whole-sentence ``unverifiable`` tag."""
    if not invented:
        return [_whole(sentence, "unverifiable")]
    tags = []
    for claim_start, text in invented:
        start, end = _to_message(sentence, dec.to_original((claim_start, claim_start + len(text))))
        tags.append(Tag(type="invented", start=start, end=end, text=sentence.text[start - sentence.start : end - sentence.start]))
    return tags


def subjective_tag(sentence: Sentence) -> Tag:
    return _whole(sentence, "subjective")
