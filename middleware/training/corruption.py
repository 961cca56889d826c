"""PURR-style corruption of sentences, for the verifier's synthetic pairs and the editor's
data. A corrupted sentence is contradicted by its original; the editor's training data uses
the original span as the edit target.

- ``corrupt_sentence``: one entity, number or date swapped for another of the same type;
- ``swap_roles``: two entities of the same type trade places ('Wellington defeated Napoleon'
  -> 'Napoleon defeated Wellington');
- ``flip_relation``: a verb, preposition or comparative becomes its opposite ('flows into'
  -> 'flows out of', 'won' -> 'lost', 'larger' -> 'smaller', 'before' -> 'after');
- ``negate``: a negation is added after the main auxiliary ('was built' -> 'was not built');
- ``corrupt``: one of the above at random; ``shorten_sentence``: one optional modifier
  dropped (prepositional phrase, appositive, relative clause ...), so the result is still
  entailed by the original.

Each returns a ``Corruption`` (offsets into the sentence).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

from spacy.tokens import Doc, Span

from middleware.pipeline.slots import ENTITY_LABELS, NUMBER_LABELS
from middleware.text.nlp import get_nlp

Kind = Literal["entity", "number", "date", "any"]

DATE_LABELS = frozenset({"DATE", "TIME"})
"""Dates and times are corrupted alike (the slots verifier compares DATE spans only)."""
_KIND_LABELS: dict[str, frozenset[str]] = {"entity": ENTITY_LABELS, "number": NUMBER_LABELS, "date": DATE_LABELS}

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_RE = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
_YEAR_RE = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")

_DROPPABLE_DEPS = frozenset({"prep", "appos", "relcl", "acl", "advcl", "npadvmod", "amod"})
_ADJUNCT_PREPS = frozenset({"in", "on", "at", "during", "with", "after", "before", "since", "near", "for"})
_NON_INTERSECTIVE = frozenset(
    {
        "former",
        "alleged",
        "fake",
        "false",
        "possible",
        "potential",
        "so-called",
        "only",
        "sole",
        "last",
        "first",
        "next",
        "previous",
        "main",
        "major",
        "minor",
        "few",
        "many",
        "several",
        "other",
        "same",
        "own",
        "future",
        "supposed",
        "apparent",
    }
)
_SCOPE_WORDS = frozenset({"first", "last", "only", "never", "no", "none", "all", "every", "each", "most", "least"})
_CONDITION_MARKERS = frozenset({"if", "unless", "until", "although", "though", "whether"})


class Corruption(NamedTuple):
    """A corrupted sentence and the span that changed (character offsets into each text)."""

    text: str
    original: str
    replacement: str
    label: str  # spaCy entity label of the swapped span
    start: int  # offset of the span in the original sentence


def entity_pool(docs: Sequence[Doc | Span]) -> dict[str, list[str]]:
    """Distinct entity strings by spaCy label, for same-type swaps across documents."""
    pool: dict[str, set[str]] = {}
    for doc in docs:
        for ent in doc.ents:
            if ent.label_ in ENTITY_LABELS and ent.text[:1].isupper():
                pool.setdefault(ent.label_, set()).add(ent.text)
    return {label: sorted(names) for label, names in pool.items()}


def corrupt_sentence(
    doc_or_text: Doc | Span | str,
    kind: Kind,
    rng: random.Random,
    pool: Mapping[str, Sequence[str]] | None = None,
) -> Corruption | None:
    """Swap one ``kind`` span of the sentence for another value of the same type.

    Entities come from ``pool`` (label -> names) or from other entities of the same label in
    the sentence; numbers and dates are perturbed arithmetically (a year moves by 1-30 years, a
    month becomes another month, a count changes by a factor). Returns None when the sentence
    has no span of that kind or no distinct replacement exists.
    """
    doc = _as_doc(doc_or_text)
    kinds = ["entity", "number", "date"] if kind == "any" else [kind]
    rng.shuffle(kinds)
    for current in kinds:
        ents = [e for e in doc.ents if e.label_ in _KIND_LABELS[current]]
        rng.shuffle(ents)
        for ent in ents:
            replacement = _replacement(ent, current, rng, pool)
            if replacement and replacement.strip().lower() != ent.text.strip().lower():
                text = doc.text
                start = ent.start_char - doc[0].idx if isinstance(doc, Span) else ent.start_char
                new = text[:start] + replacement + text[start + len(ent.text) :]
                return Corruption(new, ent.text, replacement, ent.label_, start)
    return None


def shorten_sentence(doc_or_text: Doc | Span | str, rng: random.Random, min_tokens: int = 5) -> str | None:
    """Drop one optional modifier subtree so the result stays entailed by the sentence.
    Sentences with negation are left alone (dropping a modifier under negation can flip
    entailment), as are conditional clauses."""
    doc = _as_doc(doc_or_text)
    if any(t.dep_ == "neg" or t.tag_ in {"JJS", "RBS"} or t.lower_ in _SCOPE_WORDS for t in doc):
        return None  # a dropped modifier under negation or a superlative can flip entailment
    candidates = [t for t in doc if t.dep_ in _DROPPABLE_DEPS and t.head.dep_ != "neg"]
    rng.shuffle(candidates)
    for token in candidates:
        subtree = list(token.subtree)
        if any(t.lower_ in _CONDITION_MARKERS for t in subtree) or any(t.dep_ == "ROOT" for t in subtree):
            continue
        if token.dep_ == "prep" and token.head.pos_ not in {"NOUN", "PROPN"} and token.lower_ not in _ADJUNCT_PREPS:
            continue
        if token.dep_ == "amod" and (
            len(subtree) > 1 or token.tag_ != "JJ" or token.ent_type_ or token.lower_ in _NON_INTERSECTIVE
        ):
            continue  # "first", "strongest", "more", "former", "alleged" ... change what is asserted
        lo, hi = subtree[0].i, subtree[-1].i + 1
        offset = doc[0].i
        kept = [t for t in doc if not lo <= t.i < hi]
        if len(kept) < min_tokens or len(kept) == len(doc):
            continue
        text = "".join(t.text_with_ws for t in kept)
        text = re.sub(r"\s+([,.;:])", r"\1", text)
        text = re.sub(r",\s*([,.;:])", r"\1", text).strip(" ,;")
        if text and text[0].islower() and lo - offset == 0:
            text = text[0].upper() + text[1:]
        if text and text != doc.text.strip():
            return text
    return None


def _as_doc(doc_or_text: Doc | Span | str) -> Doc | Span:
    return get_nlp()(doc_or_text) if isinstance(doc_or_text, str) else doc_or_text


def _replacement(ent: Span, kind: str, rng: random.Random, pool: Mapping[str, Sequence[str]] | None) -> str | None:
    if kind == "entity":
        options = list(pool.get(ent.label_, ())) if pool else []
        options += [e.text for e in ent.sent.ents if e.label_ == ent.label_]
        options = [o for o in options if o.lower() != ent.text.lower() and o.lower() not in ent.sent.text.lower()]
        return rng.choice(options) if options else None
    if kind == "date":
        return _shift_date(ent.text, rng)
    return _shift_number(ent.text, rng)


def _shift_date(text: str, rng: random.Random) -> str | None:
    if _YEAR_RE.search(text):
        return _YEAR_RE.sub(lambda m: str(int(m.group(1)) + rng.choice([-1, 1]) * rng.randint(1, 30)), text, count=1)
    if _MONTH_RE.search(text):
        return _MONTH_RE.sub(lambda m: rng.choice([x for x in MONTHS if x != m.group(1)]), text, count=1)
    if _NUMBER_RE.search(text):
        return _shift_number(text, rng)
    return None


def _shift_number(text: str, rng: random.Random) -> str | None:
    match = _NUMBER_RE.search(text)
    if match:
        raw = match.group(0)
        decimals = len(raw.split(".")[-1]) if "." in raw and raw.count(".") == 1 else 0
        value = float(raw.replace(",", "")) if decimals else float(raw.replace(",", "").replace(".", ""))
        new = _perturb(value, rng)
        formatted = f"{new:,.{decimals}f}" if "," in raw else f"{new:.{decimals}f}"
        rest = text[match.end() :]
        if re.match(r"(st|nd|rd|th)\b", rest):
            formatted, rest = formatted + _ordinal_suffix(int(new)), rest[2:]
        return text[: match.start()] + formatted + rest
    lower = text.lower()
    for words in (_NUMBER_WORDS, _ORDINALS):
        for i, word in enumerate(words):
            if re.search(rf"\b{word}\b", lower):
                other = rng.choice([w for j, w in enumerate(words) if j != i])
                out = re.sub(rf"\b{word}\b", other, text, count=1, flags=re.IGNORECASE)
                return out[0].upper() + out[1:] if text[:1].isupper() else out
    return None


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _perturb(value: float, rng: random.Random) -> float:
    """A clearly different value of similar magnitude."""
    if value < 10 and value == int(value):
        return rng.choice([v for v in range(0, 13) if v != value])
    factor = rng.choice([0.5, 0.6, 0.75, 1.3, 1.5, 2.0, 3.0])
    new = value * factor
    return new if abs(new - value) >= 1 or value < 1 else value + rng.randint(1, 9)


_OPPOSITES = {
    "won": "lost", "lost": "won", "wins": "loses", "loses": "wins", "win": "lose", "lose": "win",
    "defeated": "was defeated by", "increased": "decreased", "decreased": "increased", "rose": "fell",
    "fell": "rose", "opened": "closed", "closed": "opened", "joined": "left", "left": "joined",
    "bought": "sold", "sold": "bought", "acquired": "sold", "entered": "left", "founded": "dissolved",
    "born": "died", "died": "was born", "invented": "improved", "discovered": "named", "built": "demolished",
    "began": "ended", "ended": "began", "started": "ended", "before": "after", "after": "before",
    "into": "out of", "north": "south", "south": "north", "east": "west", "west": "east",
    "northern": "southern", "southern": "northern", "eastern": "western", "western": "eastern",
    "larger": "smaller", "smaller": "larger", "largest": "smallest", "smallest": "largest",
    "longer": "shorter", "shorter": "longer", "longest": "shortest", "shortest": "longest",
    "higher": "lower", "lower": "higher", "highest": "lowest", "lowest": "highest",
    "older": "younger", "younger": "older", "oldest": "youngest", "youngest": "oldest",
    "more": "fewer", "fewer": "more", "first": "last", "last": "first", "above": "below", "below": "above",
    "inside": "outside", "outside": "inside", "upstream": "downstream", "downstream": "upstream",
    "deepest": "shallowest", "heaviest": "lightest", "hottest": "coldest", "coldest": "hottest",
}  # fmt: skip
_AUXILIARIES = frozenset({"is", "was", "are", "were", "has", "had", "have", "can", "could", "will", "would"})


def swap_roles(doc_or_text: Doc | Span | str, rng: random.Random) -> Corruption | None:
    """Two different entities of one label in different clause roles, with a verb or
    preposition between them, trade places."""
    doc = _as_doc(doc_or_text)
    ents = [e for e in doc.ents if e.label_ in ENTITY_LABELS]
    pairs = [
        (a, b) for i, a in enumerate(ents) for b in ents[i + 1 :]
        if a.label_ == b.label_ and a.text.lower() != b.text.lower() and a.root.dep_ != b.root.dep_
        and any(t.pos_ in ("VERB", "AUX", "ADP") for t in doc[a.end - _first(doc) : b.start - _first(doc)])
        and not any(t.text in "()[]" for t in doc[a.end - _first(doc) : b.start - _first(doc)])
    ]  # fmt: skip
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    base = doc[0].idx if isinstance(doc, Span) else 0
    text = doc.text
    a0, a1, b0, b1 = a.start_char - base, a.end_char - base, b.start_char - base, b.end_char - base
    middle = text[a1:b0]
    swapped = b.text + middle + a.text
    return Corruption(text[:a0] + swapped + text[b1:], text[a0:b1], swapped, "ROLE", a0)


def flip_relation(doc_or_text: Doc | Span | str, rng: random.Random) -> Corruption | None:
    """One verb, preposition, direction or comparative replaced by its opposite."""
    doc = _as_doc(doc_or_text)
    base = doc[0].idx if isinstance(doc, Span) else 0
    options = [t for t in doc if t.lower_ in _OPPOSITES and not t.ent_type_ and t.pos_ in ("VERB", "ADP", "ADJ", "ADV")]
    if not options:
        return None
    token = rng.choice(options)
    new = _OPPOSITES[token.lower_]
    if token.text[:1].isupper():
        new = new[:1].upper() + new[1:]
    start = token.idx - base
    text = doc.text
    return Corruption(text[:start] + new + text[start + len(token) :], token.text, new, "RELATION", start)


def negate(doc_or_text: Doc | Span | str, rng: random.Random) -> Corruption | None:
    """'not' after the main clause's auxiliary or copula (sentences already negated are left)."""
    doc = _as_doc(doc_or_text)
    if any(t.dep_ == "neg" for t in doc):
        return None
    base = doc[0].idx if isinstance(doc, Span) else 0
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return None
    auxes = [t for t in [root, *root.children] if t.lower_ in _AUXILIARIES and t.i <= root.i]
    if not auxes:
        return None
    aux = auxes[0]
    end = aux.idx - base + len(aux)
    text = doc.text
    return Corruption(text[:end] + " not" + text[end:], "", " not", "NEGATION", end)


def corrupt(
    doc_or_text: Doc | Span | str,
    kind: Kind | str,
    rng: random.Random,
    pool: dict[str, list[str]] | None = None,
) -> Corruption | None:
    """A corruption of ``kind``: entity, number, date (``corrupt_sentence``) or relation
    (this module: a role swap, an opposite or a negation, tried in random order)."""
    if kind != "relation":
        return corrupt_sentence(doc_or_text, kind, rng, pool)  # type: ignore[arg-type]
    makers = [swap_roles, flip_relation, negate]
    rng.shuffle(makers)
    for make in makers:
        found = make(doc_or_text, rng)
        if found is not None and _clean(found.text):
            return found
    return None


def _first(doc: Doc | Span) -> int:
    """Token index of the first token of ``doc`` (a Span's tokens are indexed from 0)."""
    return doc.start if isinstance(doc, Span) else 0


def _clean(text: str) -> bool:
    return not re.search(r"\s{2,}", text)


def corruption_type(corruption: Corruption) -> str:
    """The FAVA-style type of a corruption: entity, number, date or relation."""
    if corruption.label in ("ROLE", "RELATION", "NEGATION"):
        return "relation"
    if corruption.label in DATE_LABELS:
        return "date"
    if corruption.label in ENTITY_LABELS:
        return "entity"
    return "number"
