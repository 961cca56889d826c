"""Cheap lexical matching without a parse: content terms with a light stemmer and a
BM25-style scorer over a small set of sentences (the evidence of one claim)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from spacy.lang.en.stop_words import STOP_WORDS

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_EXTRA_STOP = {"also", "s", "t", "d", "ll", "m", "re", "ve", "lrb", "rrb", "lsb", "rsb"}
_STOP = frozenset(STOP_WORDS) | _EXTRA_STOP


def stem(word: str) -> str:
    """A light suffix stripper: plural and -ed/-ing forms meet their base
    ('modelled' ~ 'model', 'completed' ~ 'complete', 'cities' ~ 'city')."""
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    elif len(word) > 4 and word.endswith("ll"):
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


@lru_cache(maxsize=32768)
def terms(text: str) -> tuple[str, ...]:
    """Stemmed content terms of ``text`` (stop words and punctuation dropped; numbers kept
    without thousands separators)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    out = []
    for word in _WORD.findall(ascii_text):
        if word in _STOP:
            continue
        out.append(word.replace(",", "") if word[0].isdigit() else stem(word))
    return tuple(out)


class BM25:
    """Okapi BM25 over a handful of sentences; ``recall`` is the IDF-weighted share of the
    query's terms a sentence contains (0..1), which is what alignment needs."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(d) for d in documents]
        self.lengths = [len(d) for d in documents]
        self.avg_length = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        # a term absent from every sentence weighs as a term seen once: rare, not infinitely so
        self.default_idf = math.log(1 + (n - 1 + 0.5) / 1.5)
        self.k1, self.b = k1, b

    def scores(self, query: Sequence[str]) -> list[float]:
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            for term in set(query):
                tf = doc.get(term, 0)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * length / (self.avg_length or 1))
                    score += self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
            out.append(score)
        return out

    def recall(self, query: Sequence[str]) -> list[float]:
        unique = set(query)
        weights = {t: self.idf.get(t, self.default_idf) for t in unique}
        total = sum(weights.values()) or 1.0
        return [sum(w for t, w in weights.items() if t in doc) / total for doc in self.docs]


def term_recall(query: Sequence[str], document: Sequence[str]) -> float:
    """Share of the query's distinct terms found in ``document`` (unweighted)."""
    unique = set(query)
    if not unique:
        return 0.0
    present = set(document)
    return sum(1 for t in unique if t in present) / len(unique)
