"""Semantic-role and relation corruptions, added to ``middleware.training.corrupt`` (which
swaps entities, numbers and dates) for the editor's PURR-style data:

- ``swap_roles``: two entities of the same type trade places ('Wellington defeated Napoleon'
  -> 'Napoleon defeated Wellington');
- ``flip_relation``: a verb, preposition or comparative becomes its opposite ('flows into'
  -> 'flows out of', 'won' -> 'lost', 'larger' -> 'smaller', 'before' -> 'after');
- ``negate``: a negation is added after the main auxiliary ('was built' -> 'was not built').

All return the ``Corruption`` tuple of ``training.corrupt`` (offsets into the sentence).
"""

from __future__ import annotations

import random
import re

from spacy.tokens import Doc, Span

from middleware.nlp import get_nlp
from middleware.pipeline.slots import ENTITY_LABELS
from middleware.training.corrupt import DATE_LABELS, Corruption, Kind, corrupt_sentence

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
    doc = _doc(doc_or_text)
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
    doc = _doc(doc_or_text)
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
    doc = _doc(doc_or_text)
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
    """A corruption of ``kind``: entity, number, date (``training.corrupt``) or relation
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


def _doc(doc_or_text: Doc | Span | str) -> Doc | Span:
    return get_nlp()(doc_or_text) if isinstance(doc_or_text, str) else doc_or_text


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
