"""The NLI verifier: a cross-encoder (``PairScorer``, premise = evidence, hypothesis =
claim) over sentence windows of the evidence that fit the model, all scored in one batch.
The highest entailment decides support; failing that, a confident contradiction from a
window that shares the claim's words decides contradiction; otherwise extrapolatory."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from middleware.interfaces import PairScorer
from middleware.evidence.lexical import BM25, terms
from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.verifiers.base import DetailedVerdict, first_given, to_verdict_label
from middleware.types import NLI_LABELS, Passage

_TOKEN = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Subword tokens, roughly (WordPiece splits about one word in four)."""
    return int(len(_TOKEN.findall(text)) * 1.25) + 1


@dataclass(frozen=True)
class Window:
    """Consecutive sentences of one passage (offsets within the passage)."""

    passage_index: int
    passage_id: str
    start: int
    end: int
    text: str


@dataclass
class NLIAssessment:
    """Every window's probabilities over NLI_LABELS and its lexical alignment with the claim."""

    claim: str
    windows: list[Window]
    probs: np.ndarray  # [n, 3] in NLI_LABELS order
    lexical: np.ndarray  # [n]


def build_windows(passages: Sequence[Passage], budget: int) -> list[Window]:
    """A passage that fits is one window; a longer one is packed into windows of as many
    whole sentences as fit the budget, each next window starting at the previous one's last
    sentence (one sentence of overlap, so a claim that needs two neighbouring sentences
    still finds them together). A sentence longer than the budget is a window of its own."""
    out: list[Window] = []
    for index, passage in enumerate(passages):
        text = passage.text
        if not text.strip():
            continue
        spans = split_sentences(text)
        if estimate_tokens(text) <= budget or len(spans) <= 1:
            start, end = (spans[0][0], spans[-1][1]) if spans else (0, len(text))
            out.append(Window(index, passage.id, start, end, text[start:end]))
            continue
        costs = [estimate_tokens(text[s:e]) for s, e in spans]
        first = 0
        while True:
            last, used = first, costs[first]
            while last + 1 < len(spans) and used + costs[last + 1] <= budget:
                last += 1
                used += costs[last]
            out.append(Window(index, passage.id, spans[first][0], spans[last][1], text[spans[first][0] : spans[last][1]]))
            if last + 1 >= len(spans):
                break
            first = last if last > first else last + 1  # overlap one sentence, but always move on
    return out


class NLIVerifier:
    """``scorer`` is any PairScorer whose labels map to NLI_LABELS (entailment/neutral/
    contradiction, or a two-class entailment/not_entailment model)."""

    name = "nli"

    def __init__(
        self,
        scorer: PairScorer,
        *,
        max_length: int | None = None,
        max_windows: int = 64,
        entail_threshold: float | None = None,
        contradiction_threshold: float | None = None,
        min_align: float = 0.3,
        cache_size: int = 4096,
    ) -> None:
        self.scorer = scorer
        self.columns = [NLI_LABELS.index(to_verdict_label(name)) for name in scorer.labels]
        manifest = getattr(scorer, "manifest", None)
        self.max_length = (
            max_length or getattr(manifest, "max_length", None) or getattr(scorer, "max_length", 256)
        )
        self.max_windows = max_windows
        decision = getattr(manifest, "decision", None)
        self.decision = decision  # calibrated thresholds of the model, or None
        # thresholds: given, else calibrated on dev data (the model's manifest), else 0.5 / 0.7
        self.entail_threshold = first_given(entail_threshold, getattr(decision, "entailment", None), 0.5)
        self.contradiction_threshold = first_given(contradiction_threshold, getattr(decision, "contradiction", None), 0.7)
        self.precise_entailment = first_given(getattr(decision, "precise_entailment", None), max(0.5, self.entail_threshold))
        self.min_align = min_align
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict:
        return self.decide(await self.assess(claim, evidence))

    async def assess(self, claim: str, evidence: Sequence[Passage]) -> NLIAssessment:
        """Score all windows of the evidence against the claim in one batch."""
        budget = max(16, self.max_length - estimate_tokens(claim) - 4)
        windows = build_windows(evidence, budget)
        if not windows:
            return NLIAssessment(claim, [], np.zeros((0, 3), np.float32), np.zeros(0, np.float32))
        lexical = np.asarray(BM25([terms(w.text) for w in windows]).recall(terms(claim)), dtype=np.float32)
        if len(windows) > self.max_windows:
            keep = sorted(np.argsort(-lexical, kind="stable")[: self.max_windows].tolist())
            windows, lexical = [windows[i] for i in keep], lexical[keep]
        probs = await self.probabilities([(w.text, claim) for w in windows])
        return NLIAssessment(claim, windows, probs, lexical)

    async def probabilities(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """[n, 3] in NLI_LABELS order; pairs scored before come from an LRU cache, the
        others go to the model in one batch."""
        missing = [p for p in dict.fromkeys(pairs) if p not in self._cache]
        if missing:
            raw = np.asarray(await self.scorer.score(missing), dtype=np.float32)
            mapped = np.zeros((len(missing), 3), dtype=np.float32)
            for source, target in enumerate(self.columns):
                mapped[:, target] += raw[:, source]
            mapped /= np.clip(mapped.sum(axis=1, keepdims=True), 1e-9, None)
            for pair, row in zip(missing, mapped, strict=True):
                self._cache[pair] = row
        rows = []
        for pair in pairs:
            self._cache.move_to_end(pair)
            rows.append(self._cache[pair])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return np.stack(rows)

    def decide(self, assessment: NLIAssessment) -> DetailedVerdict:
        if not assessment.windows:
            return DetailedVerdict(
                label="extrapolatory", scores={"attributable": 0.0, "extrapolatory": 1.0, "contradictory": 0.0},
                reason="no evidence", backend=self.name,
            )  # fmt: skip
        probs, lexical = assessment.probs, assessment.lexical
        best = int(np.argmax(probs[:, 0]))
        if probs[best, 0] >= self.entail_threshold and probs[best, 0] >= probs[best].max():
            return self._verdict("attributable", assessment, best, "the evidence entails the claim")
        aligned = np.where(lexical >= self.min_align)[0]
        if aligned.size:
            worst = int(aligned[np.argmax(probs[aligned, 2])])
            if probs[worst, 2] >= self.contradiction_threshold:
                return self._verdict("contradictory", assessment, worst, "the evidence contradicts the claim")
        return self._verdict("extrapolatory", assessment, best, "no window entails or contradicts the claim")

    def contradiction_verdict(self, assessment: NLIAssessment) -> DetailedVerdict:
        """The window that contradicts the claim most, of those about the claim where any is."""
        if not assessment.windows:
            return self.decide(assessment)
        aligned = np.where(assessment.lexical >= self.min_align)[0]
        rows = aligned if aligned.size else np.arange(len(assessment.windows))
        worst = int(rows[np.argmax(assessment.probs[rows, 2])])
        return self._verdict("contradictory", assessment, worst, "the evidence contradicts the claim")

    def _verdict(self, label: str, assessment: NLIAssessment, row: int, reason: str) -> DetailedVerdict:
        window = assessment.windows[row]
        claim = assessment.claim
        stripped = claim.rstrip()
        span = (len(stripped) - len(stripped.lstrip()), len(stripped)) if label != "extrapolatory" else None
        return DetailedVerdict(
            label=label,  # type: ignore[arg-type]
            scores={name: float(p) for name, p in zip(NLI_LABELS, assessment.probs[row], strict=True)},
            evidence_id=window.passage_id,
            evidence_sentence=window.text,
            span=span,
            reason=f"{reason} (p={assessment.probs[row, NLI_LABELS.index(label)]:.2f})",
            backend=self.name,
            evidence_index=window.passage_index,
            evidence_span=(window.start, window.end),
        )

