"""FAVA tags and suggested edits from a verdict, in message offsets.

The verifier works on the decontextualised claim; its spans are mapped back to the original
sentence (``Decontextualised.to_original``) and then shifted by the sentence's offset in the
message. A span whose original text differs from the verifier's slot text (it touched a
resolved pronoun) gets a tag but no edit: replacing a pronoun by a name is not minimal."""

from __future__ import annotations

import re
from collections.abc import Sequence

from middleware.pipeline.decontext import Decontextualised
from middleware.pipeline.slots import ENTITY_LABELS, analyse
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.types import Edit, Passage, Sentence, Tag

_INVENTABLE = ENTITY_LABELS - {"NORP", "LANGUAGE"}


def _to_message(sentence: Sentence, dec: Decontextualised, span: tuple[int, int]) -> tuple[int, int]:
    start, end = dec.to_original(span)
    return sentence.start + start, sentence.start + end


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
        start, end = _to_message(sentence, dec, mismatch.span)
        original = sentence.text[start - sentence.start : end - sentence.start]
        passage = evidence[mismatch.evidence_index] if 0 <= mismatch.evidence_index < len(evidence) else None
        evidence_id = passage.id if passage else verdict.evidence_id
        tags.append(Tag(type=mismatch.tag, start=start, end=end, text=original,
                        replacement=mismatch.replacement, evidence_id=evidence_id))
        if mismatch.replacement and original == mismatch.text and original != mismatch.replacement:
            edits.append(Edit(start=start, end=end, original=original, replacement=mismatch.replacement,
                              tag=mismatch.tag, evidence_id=evidence_id,
                              evidence=verdict.evidence_sentence or (passage.text if passage else None)))
    if not tags:
        tags.append(_whole(sentence, "contradictory", verdict.evidence_id))
    return tags, edits


def invented_entities(dec: Decontextualised, evidence: Sequence[Passage]) -> list[tuple[int, int]]:
    """Named entities of the claim that no evidence passage mentions at all (claim offsets)."""
    haystack = " ".join(p.text for p in evidence).lower()
    spans = []
    for slot in analyse(dec.text).slots:
        if slot.kind != "entity" or slot.label not in _INVENTABLE:
            continue
        words = [w for w in re.findall(r"\w+", slot.text.lower()) if len(w) > 2 and w not in {"the", "and"}]
        if words and not any(w in haystack for w in words):
            spans.append((slot.start, slot.end))
    return spans


def extrapolation_tags(
    sentence: Sentence, dec: Decontextualised, evidence: Sequence[Passage]
) -> list[Tag]:
    """``invented`` for entities nothing anywhere mentions, else ``unverifiable``."""
    invented = invented_entities(dec, evidence)
    if invented:
        tags = []
        for span in invented:
            start, end = _to_message(sentence, dec, span)
            tags.append(Tag(type="invented", start=start, end=end, text=sentence.text[start - sentence.start : end - sentence.start]))
        return tags
    return [_whole(sentence, "unverifiable")]


def subjective_tag(sentence: Sentence) -> Tag:
    return _whole(sentence, "subjective")
