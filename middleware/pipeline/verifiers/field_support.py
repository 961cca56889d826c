"""Support read from structured data, the mirror of ``field_polarity`` (``fields.py``): a claim
that names yes/no fields of the evidence's record and states each as the record does
("It does not take reservations but offers takeout." against ``Restaurants Reservations: no;
Restaurants Take Out: yes``) is supported, where those fields are all it says.

The bundled NLI model reads such lists as bags of words (it entails "offers outdoor seating"
from "Outdoor Seating: no"), so its support for a field is worth as little as its
contradiction; the learned decision left such sentences extrapolatory at P(attributable)
0.2-0.45. A sentence qualifies only where:

- it names at least one yes/no field in agreement and none against (a field named against
  the record is ``field_polarity``'s contradiction);
- it states no number, date or quantity (hours and ratings are the NLI model's and the slots
  verifier's to judge);
- every content word is accounted for: the agreeing fields' labels (and their parents'),
  the words of the record's other short fields (name, address, categories; a value field's
  label only where its value is said too: "free WiFi" for ``WiFi: free``, not "does not offer
  WiFi"), or words that only say the business has something (:data:`FRAME`);
- a negation in it belongs to a ``no`` field it names.

A review's text is no field: what customers wrote stays the NLI model's to judge.
Measured on RAGTruth's data-to-text train answers (docs/verdicts.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from middleware.evidence.lexical import terms
from middleware.pipeline.lexicon import NEGATORS
from middleware.pipeline.slots import analyse
from middleware.pipeline.verifiers.fields import Field, named_fields
from middleware.types import Passage

FRAME = frozenset(terms(
    "offer provide available availability option service amenity feature include accept take have "
    "suitable allow both customer guest patron visitor diner restaurant business establishment place spot venue "
    "dine dining"
))  # fmt: skip
"""Words that only say the business has something ("offers", "available", "options"); the
field says what."""
_LINE = re.compile(r"^- (?:([^\n—]{1,60}) — )?(.*)$", re.MULTILINE)
_HYPHENATED = re.compile(r"\b[A-Za-z]+(?:-[A-Za-z]+)+\b")
"""Words joined by a hyphen ("Wi-Fi", "take-out"), read as one ("WiFi", "takeout") like the labels."""
_SHORT_WORDS = 25
"""A field value of more words than this (or with a sentence break) is free text, a review."""


@dataclass(frozen=True)
class RecordField:
    """One short ``label: value`` field of a record line (not yes/no)."""

    label: str
    value: str


def record_fields(evidence: Sequence[Passage]) -> list[RecordField]:
    """The short fields of the evidence's record lines other than yes/no ones."""
    out = []
    for passage in evidence:
        for line in _LINE.finditer(passage.text):
            for part in line.group(2).split("; "):
                label, sep, value = part.partition(": ")
                value = value.strip()
                if (sep and value not in ("yes", "no") and len(value.split()) <= _SHORT_WORDS
                        and not re.search(r"[.!?]\s", value)):  # fmt: skip
                    out.append(RecordField(label.strip(), value))
    return out


def supporting_fields(claim: str, evidence: Sequence[Passage]) -> list[Field]:
    """The yes/no fields that support the claim whole (see the module's conditions), or []."""
    if analyse(claim).of_kind("number", "date", "quantity"):
        return []
    named = named_fields(claim, evidence)
    if any(against for _, _, against in named):
        return []  # stated against the record
    agreeing = [(field, span) for field, span, _ in named]
    said = set(terms(_HYPHENATED.sub(lambda m: m.group().replace("-", ""), claim)))
    if not agreeing or (_negates(claim) and all(f.value for f, _ in agreeing)):
        return []
    cover = set(FRAME)
    for field, span in agreeing:
        cover.update(terms(field.label), terms(claim[span[0] : span[1]]), terms(field.parent or ""))
    for item in record_fields(evidence):
        value = set(terms(item.value))
        cover |= value
        if value and value <= said:
            cover.update(terms(item.label))
    left = said - cover
    if any(max((fuzz.ratio(word, c) for c in cover), default=0) < 85 for word in left):
        return []
    return [field for field, _ in agreeing]


def _negates(claim: str) -> bool:
    return any(t.dep_ == "neg" or t.lower_ in NEGATORS for t in analyse(claim).doc)
