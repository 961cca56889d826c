"""Edit-quality metrics (RARR, PURR).

- Attr_auto(y, E): mean over the sentences s of y of max over evidence snippets e of
  P(e entails s), here the verifier's probability of ``attributable`` for s against e alone.
- Pres_Lev(x, y) = max(1 - Lev(x, y) / len(x), 0) on characters.
- F1_AP: harmonic mean of (mean) attribution after editing and (mean) preservation.
- PURR edit classes of a changed sentence: huge (Pres < 0.5), bad (Attr_after - Attr_before
  < -0.1), unnecessary (bad and Attr_before > 0.9), good (gain > 0.3 and Pres > 0.7).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz.distance import Levenshtein

from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.verifiers.base import Verifier
from middleware.types import Passage

CLASSES = ("good", "bad", "huge", "unnecessary")


def preservation(original: str, edited: str) -> float:
    """Pres_Lev: 1 for an untouched text, 0 for one rewritten beyond recognition."""
    if not original:
        return 1.0 if not edited else 0.0
    return max(1.0 - Levenshtein.distance(original, edited) / len(original), 0.0)


def f1_ap(attribution: float, preservation: float) -> float:
    total = attribution + preservation
    return 2 * attribution * preservation / total if total > 0 else 0.0


def edit_classes(attr_before: float, attr_after: float, pres: float) -> set[str]:
    """The PURR classes of one edit (empty for a middling one)."""
    gain = attr_after - attr_before
    out = set()
    if pres < 0.5:
        out.add("huge")
    if gain < -0.1:
        out.add("bad")
        if attr_before > 0.9:
            out.add("unnecessary")
    if gain > 0.3 and pres > 0.7:
        out.add("good")
    return out


async def attribution(verifier: Verifier, text: str, evidence: Sequence[Passage], context: str | None = None) -> float:
    """Attr_auto of ``text``: per sentence the best P(attributable) over single snippets, averaged."""
    spans = split_sentences(text) or ((0, len(text)),)
    if not evidence:
        return 0.0
    scores = []
    for start, end in spans:
        sentence = text[start:end]
        verdicts = await asyncio.gather(*(verifier.verify(sentence, [e], context) for e in evidence))
        scores.append(max(v.scores.get("attributable", 0.0) for v in verdicts))
    return sum(scores) / len(scores)


@dataclass(frozen=True)
class EditScore:
    """One evaluated example."""

    original: str
    edited: str
    attr_before: float
    attr_after: float
    preservation: float
    target: str | None = None  # the known correct text, if given
    type: str | None = None

    @property
    def changed(self) -> bool:
        return self.edited != self.original

    @property
    def classes(self) -> set[str]:
        return edit_classes(self.attr_before, self.attr_after, self.preservation) if self.changed else set()

    @property
    def exact(self) -> bool | None:
        if self.target is None:
            return None
        return " ".join(self.edited.split()) == " ".join(self.target.split())


@dataclass
class EditReport:
    """Aggregates over a dev set. Class rates are over changed sentences and over all."""

    scores: list[EditScore] = field(default_factory=list)
    revise_ms: list[float] = field(default_factory=list)  # verify + edit time per line

    def add(self, score: EditScore) -> None:
        self.scores.append(score)

    def summary(self) -> dict[str, object]:
        out = _summary(self.scores)
        if self.revise_ms:
            ordered = sorted(self.revise_ms)
            out["revise_ms_p50"] = round(ordered[len(ordered) // 2], 1)
            out["revise_ms_p95"] = round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)
        return out | {"by_type": self.by_type()}

    def by_type(self) -> dict[str, dict[str, object]]:
        groups: dict[str, list[EditScore]] = defaultdict(list)
        for s in self.scores:
            groups[s.type or "-"].append(s)
        return {name: _summary(items) for name, items in sorted(groups.items())} if len(groups) > 1 else {}


def _summary(scores: Sequence[EditScore]) -> dict[str, object]:
    n = len(scores)
    if n == 0:
        return {"n": 0}
    changed = [s for s in scores if s.changed]
    attr_before = sum(s.attr_before for s in scores) / n
    attr_after = sum(s.attr_after for s in scores) / n
    pres = sum(s.preservation for s in scores) / n
    counts = {c: sum(1 for s in changed if c in s.classes) for c in CLASSES}
    targets = [s for s in scores if s.exact is not None]
    out: dict[str, object] = {
        "n": n,
        "attr_before": round(attr_before, 4),
        "attr_after": round(attr_after, 4),
        "preservation": round(pres, 4),
        "f1_ap_before": round(f1_ap(attr_before, 1.0), 4),
        "f1_ap": round(f1_ap(attr_after, pres), 4),
        "edited": round(len(changed) / n, 4),
        "classes": {c: counts[c] for c in CLASSES},
        "class_rate_edited": {c: round(counts[c] / len(changed), 4) if changed else 0.0 for c in CLASSES},
        "class_rate_all": {c: round(counts[c] / n, 4) for c in CLASSES},
    }
    if targets:
        out["exact_fix"] = round(sum(1 for s in targets if s.exact) / len(targets), 4)
        out["exact_fix_n"] = len(targets)
    return out
