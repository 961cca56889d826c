"""Align a claim with evidence sentences: BM25-style lexical recall over all sentences of
the evidence, then embedding cosine for the best lexical candidates, fused into one score.
Verifiers read the best-aligned sentences instead of whole passages."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from middleware.interfaces import Embedder
from middleware.evidence.lexical import BM25, terms
from middleware.text.evidence_sentences import split_sentences
from middleware.types import Passage


@dataclass(frozen=True)
class EvidenceSentence:
    """One sentence of one passage; offsets are within the passage text."""

    passage_index: int
    passage_id: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Aligned:
    sentence: EvidenceSentence
    score: float  # fused alignment, 0..1
    lexical: float  # IDF-weighted share of the claim's terms present
    cosine: float | None  # embedding cosine, when an embedder is configured


def sentences_of_passages(passages: Sequence[Passage]) -> list[EvidenceSentence]:
    """Every sentence of every evidence passage, in order, for alignment with a claim (the
    index cuts documents into passages: ``middleware.evidence.passages.document_passages``)."""
    out = []
    for index, passage in enumerate(passages):
        for start, end in split_sentences(passage.text):
            out.append(EvidenceSentence(index, passage.id, passage.text[start:end], start, end))
    return out


class Aligner:
    """Scores evidence sentences against a claim. ``embedder`` is optional: without it the
    alignment is lexical only (faster, blind to paraphrase)."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        prefilter: int = 8,
        lexical_weight: float = 0.5,
        cache_size: int = 8192,
    ) -> None:
        self.embedder = embedder
        self.prefilter = prefilter
        self.lexical_weight = lexical_weight
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    async def align(self, claim: str, sentences: Sequence[EvidenceSentence], top_k: int = 4) -> list[Aligned]:
        """The ``top_k`` best-aligned sentences, best first."""
        if not sentences:
            return []
        claim_terms = terms(claim)
        bm25 = BM25([terms(s.text) for s in sentences])
        recall = bm25.recall(claim_terms)
        ranked = sorted(range(len(sentences)), key=lambda i: recall[i], reverse=True)
        # overlapping passages repeat sentences: each text once, so a repeat takes no place
        # another sentence could have ('It was designed by the Danish architect ...')
        first = {}
        for i in ranked:
            first.setdefault(sentences[i].text, i)
        ranked = [i for i in ranked if first[sentences[i].text] == i]
        candidates = ranked[: max(self.prefilter, top_k)]
        cosines: dict[int, float] = {}
        if self.embedder is not None:
            vectors = await self._embed([claim, *(sentences[i].text for i in candidates)])
            sims = vectors[1:] @ vectors[0]
            cosines = {i: float(s) for i, s in zip(candidates, sims, strict=True)}
        scored = [
            Aligned(sentences[i], self._fuse(recall[i], cosines.get(i)), recall[i], cosines.get(i))
            for i in candidates
        ]
        scored.sort(key=lambda a: a.score, reverse=True)
        return scored[:top_k]

    def _fuse(self, lexical: float, cosine: float | None) -> float:
        if cosine is None:
            return lexical
        return self.lexical_weight * lexical + (1 - self.lexical_weight) * max(cosine, 0.0)

    async def _embed(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None
        found = {t: self._vectors[t] for t in texts if t in self._vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            vectors = np.asarray(await self.embedder.embed(missing), dtype=np.float32)
            found.update(zip(missing, vectors, strict=True))
        for text in dict.fromkeys(texts):
            self._vectors[text] = found[text]
            self._vectors.move_to_end(text)
        while len(self._vectors) > self._cache_size:
            self._vectors.popitem(last=False)
        return np.stack([found[t] for t in texts])
