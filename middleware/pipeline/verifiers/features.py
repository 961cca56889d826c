"""What the hybrid verifier's learned decision reads: one named number per signal.

The NLI model's window probabilities (max, mean, top-2, the contradiction of windows about
the claim), the NLI model on the claim's best-aligned evidence sentences alone (long windows
blur a verbatim match), lexical coverage of the claim by the evidence, the slots verifier's
findings (its rules, by name) and lengths. ``Combiner`` (``combiner.py``) maps these to
calibrated probabilities; the fitting lives in ``middleware.training.combiner``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from middleware.evidence.lexical import terms
from middleware.pipeline.verifiers.base import DetailedVerdict

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_EPS = 1e-4

NLI_FEATURES = (
    "nli_entail_max", "nli_entail_top2", "nli_entail_mean", "nli_contra_aligned", "nli_neutral_at_best",
    "nli_entail_lexbest", "focus_entail", "focus_contra", "sentence_entail_min", "sentence_contra_max",
)  # fmt: skip
LEXICAL_FEATURES = (
    "overlap_item", "overlap_all", "content_recall", "bigram_recall", "lexical_best", "missing_content",
    "numbers_missing",
)  # fmt: skip
SLOT_FEATURES = (
    "slots_attributable", "slots_contradictory", "slots_unsupported_share", "align_best", "gap_relation",
    "gap_polarity", "gap_coverage",
)  # fmt: skip
LENGTH_FEATURES = ("claim_words", "evidence_words", "windows", "claim_sentences")
FEATURES = NLI_FEATURES + LEXICAL_FEATURES + SLOT_FEATURES + LENGTH_FEATURES
"""Every feature the combiner may weigh, in a fixed order; rule findings come after these
as ``rule:<name>`` (1 when the rule fired)."""


def logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def nli_features(probs: np.ndarray, lexical: np.ndarray, min_align: float) -> dict[str, float]:
    """``probs`` [n, 3] (attributable, extrapolatory, contradictory) of the windows and their
    lexical recall of the claim; probabilities enter as logits."""
    if not len(probs):
        return {name: logit(0.0) for name in NLI_FEATURES[:6]}
    entail = np.sort(probs[:, 0])[::-1]
    best = int(np.argmax(probs[:, 0]))
    aligned = probs[lexical >= min_align, 2]
    return {
        "nli_entail_max": logit(float(entail[0])),
        "nli_entail_top2": logit(float(entail[:2].mean())),
        "nli_entail_mean": logit(float(entail.mean())),
        "nli_contra_aligned": logit(float(aligned.max()) if aligned.size else 0.0),
        "nli_neutral_at_best": logit(float(probs[best, 1])),
        "nli_entail_lexbest": logit(float(probs[int(np.argmax(lexical)), 0])),
    }


_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")


def mask_citations(claim: str) -> str:
    """Citation markers of an LLM answer ('... protection [3].', '[1, 2]') blanked out with
    spaces of the same length: they are no part of what the sentence claims, and offsets
    into the claim stay valid."""
    return _CITATION.sub(lambda m: " " * len(m.group()), claim)


def sentence_features(per_sentence: Sequence[np.ndarray]) -> dict[str, float]:
    """A claim of several sentences (a summary) holds only where each sentence does: the
    weakest sentence's best entailment and the strongest contradiction of any sentence
    (``per_sentence``: each sentence's window probabilities)."""
    entail = [float(p[:, 0].max()) if len(p) else 0.0 for p in per_sentence]
    contra = [float(p[:, 2].max()) if len(p) else 0.0 for p in per_sentence]
    return {
        "sentence_entail_min": logit(min(entail, default=0.0)),
        "sentence_contra_max": logit(max(contra, default=0.0)),
        "claim_sentences": math.log1p(len(per_sentence)),
    }


def focus_features(probs: np.ndarray | None) -> dict[str, float]:
    """The NLI model on the best-aligned sentences as one premise (None: no sentence aligned)."""
    if probs is None:
        return {"focus_entail": logit(0.0), "focus_contra": logit(0.0)}
    return {"focus_entail": logit(float(probs[0])), "focus_contra": logit(float(probs[2]))}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _best_share(words: set[str], items: Iterable[set[str]]) -> float:
    return max((len(words & item) / len(words) for item in items), default=0.0) if words else 0.0


OVERLAP_CUT = 0.6
"""The word-overlap baseline calls a claim attributable when at least this share of its
words is in one evidence item."""


def word_overlap(claim: str, evidence: Sequence[str]) -> float:
    """The largest share of the claim's distinct words found in one evidence item: the
    word-overlap baseline of ``factcheck eval-battery`` and the ``overlap_item`` feature."""
    return _best_share(set(_words(claim)), (set(_words(e)) for e in evidence))


def lexical_features(claim: str, evidence: Sequence[str]) -> dict[str, float]:
    """How much of the claim the evidence writes: distinct words in the best item and in all
    items, stemmed content terms, word pairs in order, content words and numbers missing; and
    the evidence's length (each item is read once)."""
    claim_words = _words(claim)
    words = set(claim_words)
    evidence_words = [_words(e) for e in evidence]
    items = [set(w) for w in evidence_words]
    every = set().union(*items) if items else set()
    content = set(terms(claim))
    evidence_terms = {t for e in evidence for t in terms(e)}
    pairs = set(zip(claim_words, claim_words[1:], strict=False))
    evidence_pairs = {p for w in evidence_words for p in zip(w, w[1:], strict=False)}
    numbers = {n.replace(",", "") for n in _NUMBER.findall(claim)}
    evidence_numbers = {n.replace(",", "") for e in evidence for n in _NUMBER.findall(e)}
    missing = content - evidence_terms
    return {
        "overlap_item": _best_share(words, items),
        "overlap_all": len(words & every) / len(words) if words else 0.0,
        "content_recall": len(content & evidence_terms) / len(content) if content else 1.0,
        "bigram_recall": len(pairs & evidence_pairs) / len(pairs) if pairs else 1.0,
        "missing_content": math.log1p(len(missing)),
        "numbers_missing": len(numbers - evidence_numbers) / len(numbers) if numbers else 0.0,
        "evidence_words": math.log1p(sum(len(w) for w in evidence_words)),
    }


def slot_features(slots: DetailedVerdict, n_slots: int, align_best: float) -> dict[str, float]:
    return {
        "slots_attributable": float(slots.label == "attributable"),
        "slots_contradictory": float(slots.label == "contradictory"),
        "slots_unsupported_share": len(slots.unsupported) / n_slots if n_slots else 0.0,
        "align_best": align_best,
        "gap_relation": float("relation" in slots.gaps),
        "gap_polarity": float("polarity" in slots.gaps),
        "gap_coverage": float("coverage" in slots.gaps),
    }


def length_features(claim: str, windows: int) -> dict[str, float]:
    """Log word count of the claim and the number of NLI windows (the evidence's length comes
    with ``lexical_features``)."""
    return {"claim_words": math.log1p(len(_words(claim))), "windows": math.log1p(windows)}
