"""Structured data read field by field: a claim against the ``label: value`` fields of its
evidence (a tool's JSON or a record pasted as context, rendered by
``evidence.request_passages.readable``: ``- attributes — Outdoor Seating: no; WiFi: free``).

The bundled NLI model reads such lists as bags of words: it entails "The restaurant offers
outdoor seating." from "Outdoor Seating: no" (P 0.94; "Outdoor Seating: False" 0.96, a
sentence "There is no outdoor seating." contradicts both the claim and its negation). A
yes/no field is a fact stated plainly, so it is read here instead:

- ``field_polarity``: the claim names a yes/no field (every word of its label, written
  together or apart: "take out" / "takeout") and says the opposite: affirms a field that is
  ``no``, or negates ("no", "not", "without", ...) one that is ``yes``.
- ``field_value``: the claim gives a number to a numeric field's noun ("4.5 stars", "a
  4.5-star rating", "rated 4.5 out of 5") and no field of that noun holds it (nor their mean,
  for "an average of ..."): "business stars: 4.0" against "an average rating of 4.5 stars".
  The record's own field (its label has no other specific word: "business stars", not
  "review stars") is the replacement, unless the claim speaks of one review ("a reviewer
  gave it four stars") or of the nested field ("an average of 4.5-star reviews"): then the
  finding has none and is flagged, not rewritten.

A ``field_polarity`` finding carries a replacement only where the claim gives the field a
value the record writes, as an adjective of its name: "free Wi-Fi" against "WiFi: no" ->
"no Wi-Fi" (the record's own word), unless "no" would also deny what the name is listed
with ("free WiFi, takeout, and outdoor seating") or follow an article ("a free WiFi
connection"). Otherwise it names the field, which is flagged, not rewritten: no value swap
says "The restaurant offers outdoor seating" the other way.

A finding is a located contradiction (``Mismatch`` of kind ``negation``), reported with the
field as the evidence sentence. It stands whatever the combiner says (the combiner reads the
same NLI model that misreads the field); measured on RAGTruth's data-to-text answers
(docs/verdicts.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz
from spacy.tokens import Token

from middleware.pipeline.lexicon import NEGATORS
from middleware.pipeline.quantities import parse_number
from middleware.pipeline.slots import analyse
from middleware.pipeline.verifiers.base import Mismatch, passages_from_texts
from middleware.pipeline.verifiers.hours import is_part_of, swaps_hours
from middleware.types import Passage

FIELD_RULES = {
    "field_polarity": "a yes/no field of the evidence's structured data that the claim names and states the "
    "opposite of",
    "field_value": "a number the claim gives a numeric field of the evidence's structured data (a rating) "
    "that no such field holds",
    "field_support": "yes/no fields of the evidence's structured data that the claim names and states as the record "
    "does, where they are all it says (field_support.py)",
}
_FIELD = re.compile(r"(?:^|[;—\n]|^- )\s*([A-Za-z][A-Za-z ]{1,60}?):\s*(yes|no)\s*(?=;|$|\n)", re.MULTILINE)
_PARENT = re.compile(r"^- ([^\n—:;]{1,60}) — ", re.MULTILINE)
"""A nested object's line: ``- Business Parking — garage: no`` (the parent's label before the dash)."""
_NEGATING = frozenset({"det", "neg", "advmod", "preconj", "dep"})
"""How a negation word attaches to what it negates ("no WiFi": det; "not available": neg)."""
_GENERIC = frozenset({"restaurants", "restaurant", "business", "good", "for", "has", "is", "accepts", "the", "a"})
"""Label words a claim may leave out ("Restaurants Take Out" is said "takeout"; "Good For
Kids" "kid-friendly" is not matched, which costs recall, not precision)."""
_CONTAINERS = frozenset({"attributes", "attribute", "properties", "details", "info", "information", "data", "fields",
                         "features", "options", "extras"})
"""Parent objects that only group fields: a field under them stands on its own name."""
_CLAUSE = re.compile(r"[;:.!?]|\b(?:but|while|whereas|although|though|however|yet)\b", re.IGNORECASE)


_ANY_FIELD = re.compile(r"(?:^|;)\s*[A-Za-z][\w ]{0,60}:\s")


def is_record(text: str) -> bool:
    """A line of structured data as ``readable`` renders it: two or more ``label: value``
    fields separated by semicolons."""
    return ";" in text and len(_ANY_FIELD.findall(text)) >= 2


def holds_record(evidence: Sequence[Passage]) -> bool:
    """Whether any passage of the evidence is structured data (``is_record``)."""
    return any(is_record(passage.text) for passage in evidence)


@dataclass(frozen=True)
class Field:
    """One yes/no field of a passage: its label (and its parent object's, where nested),
    value and offsets in the passage."""

    label: str
    parent: str | None
    value: bool
    passage_index: int
    start: int
    end: int


def yes_no_fields(evidence: Sequence[Passage]) -> list[Field]:
    """Every ``label: yes`` / ``label: no`` field of the evidence."""
    out = []
    for index, passage in enumerate(evidence):
        parents = [(m.start(), m.end(), m.group(1).strip()) for m in _PARENT.finditer(passage.text)]
        for match in _FIELD.finditer(passage.text):
            line_start = passage.text.rfind("\n", 0, match.start(1)) + 1
            parent = next((name for start, end, name in parents if start == line_start and end <= match.start(1)), None)
            out.append(Field(match.group(1).strip(), parent, match.group(2) == "yes", index, match.start(1),
                             match.end(2)))  # fmt: skip
    return out


def _named_at(claim: str, label: str) -> tuple[int, int] | None:
    """Where the claim names the field (its label's specific words, together or apart), or None."""
    words = [w for w in re.findall(r"[A-Za-z]+", label) if w.lower() not in _GENERIC]
    if not words or len("".join(words)) < 4:
        return None
    # a label word written in humps is said apart too: "WiFi" ~ "Wi-Fi"
    humps = [r"[\s-]?".join(re.escape(h) for h in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", w)) or re.escape(w)
             for w in words]  # fmt: skip
    pattern = r"\b" + r"[\s-]*".join(humps) + r"\b"
    match = re.search(pattern, claim, re.IGNORECASE)
    return (match.start(), match.end()) if match else None


def _clause(claim: str, span: tuple[int, int]) -> tuple[int, int]:
    """The stretch around ``span`` between the nearest boundaries (a semicolon, a full stop,
    "but", "while", ...), where the claim's parent object must be named."""
    start = max((m.end() for m in _CLAUSE.finditer(claim, 0, span[0])), default=0)
    after = _CLAUSE.search(claim, span[1])
    return start, after.start() if after else len(claim)


def _negated(claim: str, span: tuple[int, int]) -> bool:
    """The field's name is negated in the claim's parse: a negation ("not", "no",
    "without", ...) on the way from the name up to its own verb, that verb included. "does
    not offer valet, garage, or street parking" negates every item; "outdoor seating is not
    available" too; "While it does not offer WiFi, street parking is available" does not
    negate street parking (its verb is "is")."""
    doc = analyse(claim).doc
    inside = [t for t in doc if t.idx < span[1] and t.idx + len(t) > span[0]]
    if not inside:
        return False
    token = inside[-1]
    while True:
        if any(c.dep_ == "neg" or (c.lower_ in NEGATORS and c.dep_ in _NEGATING) for c in token.children):
            return True
        if token.lower_ == "without" or token.lemma_ == "lack":  # "without WiFi", "the lack of take-out"
            return True
        if _clause_head(token) or token.head.i == token.i:
            return token.head.lower_ == "without"  # "without being trendy"
        token = token.head


def _clause_head(token: Token) -> bool:
    """A verb that heads its own clause; a participle used as a modifier or a list item
    ("no valet or validated parking") is not one."""
    if token.pos_ not in ("VERB", "AUX"):
        return False
    return not (token.tag_ == "VBN" and token.dep_ in ("amod", "compound", "conj", "acl"))


def _parent_named(claim: str, span: tuple[int, int], parent: str | None) -> bool:
    """A nested field (``Business Parking — street: no``) counts only where the claim's
    clause names its parent too ("street parking"; "ambiance" for "Ambience", spelled
    either way): a bare "street" is an address."""
    if parent is None:
        return True
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", parent)
             if w.lower() not in _GENERIC | _CONTAINERS and len(w) > 3]  # fmt: skip
    if not words:
        return True
    start, end = _clause(claim, span)
    said = [w.lower() for w in re.findall(r"[A-Za-z]+", claim[start:end])]
    return any(fuzz.ratio(w, s) >= 85 for w in words for s in said)


def named_fields(claim: str, evidence: Sequence[Passage]) -> list[tuple[Field, tuple[int, int], bool]]:
    """Each yes/no field the claim names (its parent too, where nested), where, and whether
    the claim states it against the record (``field_polarity``) or as the record does
    (``field_support``)."""
    out = []
    for field in yes_no_fields(evidence):
        span = _named_at(claim, field.label)
        if span is not None and _parent_named(claim, span, field.parent):
            out.append((field, span, _negated(claim, span) == field.value))
    return out


def field_mismatches(claim: str, evidence: Sequence[Passage]) -> list[Mismatch]:
    """The yes/no fields the claim states the opposite of (``field_polarity``): the field's
    name with the field as written, or (``value_swap``) the claim's value of it with the
    record's ("free Wi-Fi" -> "no Wi-Fi")."""
    out = []
    for field, span, against in named_fields(claim, evidence):
        if not against:
            continue
        stated = evidence[field.passage_index].text[field.start : field.end]
        swap = value_swap(claim, field, span)
        span, replacement = swap or (span, stated)
        out.append(Mismatch(kind="negation", span=span, text=claim[span[0] : span[1]], replacement=replacement,
                            evidence_index=field.passage_index, evidence_span=(field.start, field.end),
                            rule="field_polarity"))  # fmt: skip
    return out


_GIVEN_VALUE = re.compile(r"(?<![\w-])(?:free|complimentary)\s+$", re.IGNORECASE)
"""A value a claim gives a yes/no field as an adjective of its name ("free Wi-Fi")."""
_ARTICLE = re.compile(r"\b(?:a|an|the|this|that|its|their|our|his|her)\s+$", re.IGNORECASE)


def value_swap(claim: str, field: Field, span: tuple[int, int]) -> tuple[tuple[int, int], str] | None:
    """The record's value in place of the one the claim gives the field it names at ``span``
    (the claim against a ``no`` field): "free Wi-Fi" -> "no Wi-Fi", as (span, replacement).
    None where the claim gives no such value, where an article stands before it ("a free
    WiFi connection" -> "a no ..."), or where the name heads a list ("free WiFi, takeout and
    outdoor seating": "no" would deny the whole list)."""
    given = _GIVEN_VALUE.search(claim, 0, span[0])
    if field.value or given is None or _ARTICLE.search(claim, 0, given.start()):
        return None
    doc = analyse(claim).doc
    named = [t for t in doc if span[0] <= t.idx < span[1]]
    if not named or any(c.dep_ == "conj" for t in named for c in t.children):
        return None
    return (given.start(), span[1]), "no " + claim[span[0] : span[1]]


def swaps_field_polarity(original: str, edits: Sequence[tuple[int, int, str]], record: str) -> bool:
    """Every edit (start, end, replacement; offsets into ``original``) is the record's value
    put in place of the one the sentence gives a yes/no field the record states otherwise
    (``value_swap``), checked against the record line itself."""
    if not edits or not is_record(record):
        return False
    evidence = passages_from_texts([record])
    proposed = [swap for field, span, against in named_fields(original, evidence)
                if against and (swap := value_swap(original, field, span)) is not None]  # fmt: skip
    return all(any(is_part_of(original, edit, span, new) for span, new in proposed) for edit in edits)


_NUMERIC_FIELD = re.compile(r"(?:^|[;—]|^- )\s*([A-Za-z][A-Za-z ]{1,60}?):\s*(-?\d+(?:\.\d+)?)\s*(?=;|$|\n)", re.MULTILINE)
_SYNONYMS = {"stars": ("stars?", "rating", "rated"), "star": ("stars?", "rating", "rated")}
"""Words a claim gives a field's number with, by the field's noun: a star field's number is
written "4.5 stars", "a 4.5-star rating", "rated 4.5", "a rating of 4.5"."""
_VALUE = (r"(?P<value>\d+(?:\.\d+)?(?:\s+and\s+a\s+half)?|(?:one|two|three|four|five|six|seven|eight|nine|ten)"
          r"(?:\s+and\s+a\s+half)?)")  # fmt: skip
_APPROXIMATE = re.compile(r"(?:about|around|nearly|almost|over|above|under|below|roughly|approximately|at least|"
                          r"more than|less than|close to|up to)\s+$", re.IGNORECASE)  # fmt: skip
_ONE_REVIEW = re.compile(r"\b(?:a|one|another|(?:a\s+)?(?:second|third|fourth|fifth)|single|the\s+(?:latest|last|"
                         r"first|most recent))\s+(?:\w+\s+)?(?:review|reviewer|customer|patron|visitor|guest|diner)s?\b",
                         re.IGNORECASE)  # fmt: skip
_AVERAGE = re.compile(r"\b(?:average|mean)\b", re.IGNORECASE)


@dataclass(frozen=True)
class NumericField:
    """One numeric field of a passage: its label, value and the value's offsets."""

    label: str
    value: float
    passage_index: int
    start: int
    end: int

    @property
    def noun(self) -> str:
        return self.label.split()[-1].lower()

    @property
    def own(self) -> bool:
        """The record's own field ("business stars"), not a nested one's ("review stars")."""
        return all(w.lower() in _GENERIC for w in self.label.split()[:-1])


def numeric_fields(evidence: Sequence[Passage]) -> list[NumericField]:
    """Every ``label: <number>`` field of the evidence's structured data."""
    out = []
    for index, passage in enumerate(evidence):
        for match in _NUMERIC_FIELD.finditer(passage.text):
            out.append(NumericField(match.group(1).strip(), float(match.group(2)), index, match.start(2), match.end(2)))
    return out


def _given_numbers(claim: str, noun: str) -> list[tuple[int, int, float]]:
    """The numbers the claim gives ``noun`` (and its synonyms): "4.5 stars", "4.5-star",
    "4.0 out of 5 stars", "rated 4.5", "a rating of 4.5"; approximate ones ("nearly 4.5
    stars") are left out."""
    words = "|".join(_SYNONYMS.get(noun, (re.escape(noun),)))
    patterns = (
        rf"\b{_VALUE}(?:\s+out\s+of\s+\d+(?:\.\d+)?)?[\s-]+(?:{words})\b",
        rf"\b(?:{words})(?:\s+(?:rating|score))?(?:\s+(?:of|is|was|at))?\s*:?\s+{_VALUE}\b",
    )
    out = {}
    for pattern in patterns:
        for match in re.finditer(pattern, claim, re.IGNORECASE):
            if _APPROXIMATE.search(claim, 0, match.start("value")):
                continue
            parsed = parse_number(match.group("value"))
            if parsed is not None:
                out[match.start("value")] = (match.start("value"), match.end("value"), parsed[0])
    return sorted(out.values())


@dataclass(frozen=True)
class GivenNumber:
    """A number the claim gives a numeric field's noun, and whether a field of that noun holds it."""

    start: int
    end: int
    value: float
    fields: tuple[NumericField, ...]
    held: bool


def given_numbers(claim: str, evidence: Sequence[Passage]) -> list[GivenNumber]:
    """Each number the claim gives a numeric field's noun ("4.5 stars" where the data has
    "business stars: 4.0"), held where a field of that noun has it (or, for "an average of
    ...", the mean of a nested field's values); a number on another scale ("a perfect 10"
    of a five-star field) is left out."""
    by_noun: dict[str, list[NumericField]] = {}
    for field in numeric_fields(evidence):
        by_noun.setdefault(field.noun, []).append(field)
    out = []
    for noun, fields in by_noun.items():
        values = {f.value for f in fields}
        if _AVERAGE.search(claim):  # "an average of 4.5-star reviews": the mean of a nested field
            for label in {f.label for f in fields}:
                group = [f.value for f in fields if f.label == label]
                values.add(sum(group) / len(group))
        for start, end, value in _given_numbers(claim, noun):
            if value < 2 * max(values):
                held = any(abs(value - v) < 0.05 for v in values)
                out.append(GivenNumber(start, end, value, tuple(fields), held))
    return out


def _of_nested(claim: str, given: GivenNumber) -> bool:
    """The number is given to a nested field ("an average of 4.5-star reviews": the reviews'
    stars, not the record's): a word of a nested field's label follows it (within three words)."""
    after = re.findall(r"[A-Za-z]+", claim[given.end :])[:3]
    nested = {w.lower() for f in given.fields if not f.own for w in f.label.split()[:-1] if w.lower() not in _GENERIC}
    return any(word.lower().startswith(n) for word in after for n in nested)


def field_value_mismatches(
    claim: str, evidence: Sequence[Passage], given: Sequence[GivenNumber] | None = None
) -> list[Mismatch]:
    """The numbers the claim gives a numeric field's noun that no field of that noun holds
    (``field_value``); ``given``: the claim's ``given_numbers`` where the caller has read them."""
    out = []
    for given in given_numbers(claim, evidence) if given is None else given:
        if given.held:
            continue
        own = [f for f in given.fields if f.own]
        source = own[0] if len(own) == 1 and not _ONE_REVIEW.search(claim) and not _of_nested(claim, given) else None
        stated = evidence[source.passage_index].text[source.start : source.end] if source else None
        anchor = source or given.fields[0]
        out.append(Mismatch(kind="number", span=(given.start, given.end), text=claim[given.start : given.end],
                            replacement=stated, evidence_index=anchor.passage_index,
                            evidence_span=(anchor.start, anchor.end), rule="field_value"))  # fmt: skip
    return out


def swaps_field_value(original: str, edits: Sequence[tuple[int, int, str]], record: str) -> bool:
    """Every edit (start, end, replacement; offsets into ``original``) puts a record's own
    numeric field value (as the record writes it) in place of a number the sentence gives
    that field's noun and no field of the record holds: the correction ``field_value``
    proposes, checked against the record line itself."""
    if not edits or not is_record(record):
        return False
    wrong = {(g.start, g.end): g for g in given_numbers(original, passages_from_texts([record])) if not g.held}
    for edit in edits:
        given = next((g for (start, end), g in wrong.items() if start <= edit[0] <= edit[1] <= end), None)
        own = [f for f in given.fields if f.own] if given is not None else []
        if given is None or len(own) != 1:
            return False
        if not is_part_of(original, edit, (given.start, given.end), record[own[0].start : own[0].end]):
            return False
    return True


def swaps_field(original: str, edits: Sequence[tuple[int, int, str]], record: str) -> bool:
    """A swap of a record's value the structured data states (``swaps_field_value``, a
    number; ``swaps_field_polarity``, a yes/no field's "no"), or of an opening time for the
    one the record's schedule gives those days (``hours``)."""
    return (swaps_field_value(original, edits, record) or swaps_field_polarity(original, edits, record)
            or swaps_hours(original, edits, record))  # fmt: skip
