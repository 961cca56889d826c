"""QUIP Data Portrait (Weller, Marone et al., 2024): every character 25-gram of the indexed
corpus in a Bloom filter, and QUIP-Score = the fraction of a text's 25-grams found in it, a
cheap signal of quotation from the trusted corpus.

Normalisation (both sides): Unicode NFKC, case-folded, every run of whitespace collapsed to
one space, ends stripped. The paper used raw text; normalising makes a quotation that only
differs in line breaks or capitalisation (a sentence re-flowed by the LLM, a capitalised
first word) still count, at the cost of conflating case. Markup is not removed.

The filter is pybloom-live's ScalableBloomFilter at error rate 0.001 (about 14 bits per
n-gram, the paper's figure). Bloom filters cannot forget: the index rebuilds the portrait
whenever a document changes or goes, and only adds to it when documents are added.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pybloom_live import ScalableBloomFilter

from middleware.types import Passage

NGRAM = 25
ERROR_RATE = 0.001
NORMALISATION = "nfkc-casefold-ws1"
"""Names the normalisation above; stored with the portrait so a change forces a rebuild."""

BLOOM_FILE = "portrait.bloom"
META_FILE = "portrait.json"

_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def ngrams(text: str, n: int = NGRAM) -> Iterator[str]:
    """Every character n-gram (stride 1) of the normalised text."""
    norm = normalise(text)
    for i in range(len(norm) - n + 1):
        yield norm[i : i + n]


class DataPortrait:
    """A Bloom filter of a corpus' character n-grams."""

    def __init__(self, capacity: int = 100_000, n: int = NGRAM, generation: int = 0) -> None:
        self.n = n
        self.bloom = ScalableBloomFilter(initial_capacity=max(capacity, 1000), error_rate=ERROR_RATE)
        self.added = 0
        self.generation = generation
        """The index generation the portrait reflects (see ``LocalIndex``)."""

    def add_text(self, text: str) -> int:
        """Add the n-grams of ``text``; return how many were new to the filter."""
        add = self.bloom.add
        fresh = sum(1 for gram in ngrams(text, self.n) if not add(gram))
        self.added += fresh
        return fresh

    def add_texts(self, texts: Iterable[str]) -> int:
        return sum(self.add_text(t) for t in texts)

    def quip_score(self, text: str) -> float | None:
        """Fraction of the text's n-grams in the portrait; None when the normalised text is
        shorter than n characters (it has no n-grams)."""
        grams = list(ngrams(text, self.n))
        if not grams:
            return None
        bloom = self.bloom
        return sum(1 for gram in grams if gram in bloom) / len(grams)

    def __len__(self) -> int:
        """Distinct n-grams added (approximately: Bloom collisions count as seen)."""
        return self.added

    def save(self, directory: Path) -> None:
        """Write the filter and its metadata into ``directory``, atomically each."""
        directory = Path(directory)
        tmp = directory / (BLOOM_FILE + ".tmp")
        with open(tmp, "wb") as fh:
            self.bloom.tofile(fh)
        os.replace(tmp, directory / BLOOM_FILE)
        meta = {"n": self.n, "normalisation": NORMALISATION, "ngrams": self.added, "generation": self.generation}
        tmp = directory / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta) + "\n", encoding="utf-8")
        os.replace(tmp, directory / META_FILE)

    @classmethod
    def load(cls, directory: Path) -> DataPortrait | None:
        """The portrait saved in ``directory``; None if there is none or it was made with
        another normalisation."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
            with open(directory / BLOOM_FILE, "rb") as fh:
                bloom = ScalableBloomFilter.fromfile(fh)
        except (OSError, ValueError):
            return None
        if meta.get("normalisation") != NORMALISATION:
            return None
        portrait = cls(n=int(meta["n"]), generation=int(meta.get("generation", 0)))
        portrait.bloom = bloom
        portrait.added = int(meta.get("ngrams", 0))
        return portrait


def covered_regions(passages: Iterator[Passage] | Sequence[Passage]) -> Iterator[str]:
    """The source text covered by passages, one string per run of overlapping passages of
    the same source (passages in source order): the sections of each document, each once,
    without the repeats of overlapping windows."""
    source, start, end, text = None, 0, 0, ""
    for p in passages:
        p_start = p.start or 0
        p_end = p_start + len(p.text)
        offset = p_start - start
        if (
            p.source == source
            and 0 <= offset <= len(text)
            and text[offset : offset + len(p.text)] == p.text[: len(text) - offset]
        ):
            if p_end > end:
                text += p.text[end - p_start :]
                end = p_end
            continue
        if text:
            yield text
        source, start, end, text = p.source, p_start, p_end, p.text
    if text:
        yield text
