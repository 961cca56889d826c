"""The message-level attribution report (RARR) and auto-AIS, read from the sentence reports.

- Links: a passage supports a sentence whose verdict is ``attributable`` and was decided by
  that passage (``verdict.evidence_id``, one of the sentence's evidence), and contradicts one
  whose ``contradictory`` verdict it decided. Only linked passages can be in the report: a
  passage that was found for a sentence but neither supports nor contradicts any (one about
  the answer's topic, not its claims) attributes nothing.
- Report: choose A ⊆ linked passages, |A| ≤ M, maximising Cover(A) = Σ_i max_{e∈A} S(q_i, e)
  over the verification questions q_i of the linked sentences (a sentence without questions
  stands for one), where S(q_i, e) is the verdict's probability for its label when e decided
  the verdict of q_i's sentence and 0 otherwise: RARR's cover of the claims' questions, with
  the verifier's judgement as the relevance. Exhaustive over at most ``MAX_CANDIDATES``
  candidates (C(12, 5) = 792 subsets). The report is in the order of the first sentence each
  passage decides.
- Attr_auto: mean over checked sentences of the verifier's attributable probability for the
  sentence against the passage that decided its verdict, when that passage is in the report,
  else 0 (RARR's max_{e∈A} P(e entails s), read from the reports rather than verified again).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from middleware.types import AttributionLink, Passage, SentenceReport

MAX_CANDIDATES = 12
CHECKED = ("attributable", "contradictory", "extrapolatory")
"""Verdicts a verifier gave: the sentences auto-AIS is the mean over."""


@dataclass
class AttributionReport:
    passages: list[Passage] = field(default_factory=list)
    links: list[AttributionLink] = field(default_factory=list)
    alignment: dict[int, list[str]] = field(default_factory=dict)
    """Sentence index -> ids of report passages supporting it."""
    attr_auto: float | None = None


def attribution_report(reports: Sequence[SentenceReport], m: int = 5) -> AttributionReport:
    """The report of at most ``m`` passages, each linked to the sentences it supports or
    contradicts, and auto-AIS, from ``reports`` (in sentence order)."""
    linked: dict[tuple[str, str], AttributionLink] = {}
    passages: dict[tuple[str, str], Passage] = {}
    rows: list[tuple[tuple[str, str], float]] = []  # one per question: the passage deciding it, the verdict's p
    for report in reports:
        passage = deciding_passage(report)
        if passage is None or report.verdict.label not in ("attributable", "contradictory"):
            continue
        key = (passage.provider, passage.id)
        passages.setdefault(key, passage)
        link = linked.setdefault(key, AttributionLink(passage_id=passage.id, provider=passage.provider))
        (link.supports if report.verdict.label == "attributable" else link.contradicts).append(report.index)
        weight = report.verdict.scores.get(report.verdict.label) or 1.0
        rows += [(key, weight)] * max(1, len(report.questions))
    keys = list(linked)
    cover = np.zeros((len(rows), len(keys)))
    for i, (key, weight) in enumerate(rows):
        cover[i, keys.index(key)] = weight
    chosen = sorted((keys[j] for j in select_report(cover, m)), key=lambda k: min(linked[k].supports + linked[k].contradicts))
    alignment: dict[int, list[str]] = {}
    for key in chosen:
        for index in linked[key].supports:
            alignment.setdefault(index, []).append(key[1])
    return AttributionReport([passages[k] for k in chosen], [linked[k] for k in chosen], dict(sorted(alignment.items())),
                             attr_auto(reports, set(chosen)))


def deciding_passage(report: SentenceReport) -> Passage | None:
    """The passage of the sentence's evidence that decided its verdict, if one did."""
    wanted = report.verdict.evidence_id
    return next((p for p in report.evidence if p.id == wanted), None) if wanted else None


def attr_auto(reports: Sequence[SentenceReport], report: set[tuple[str, str]]) -> float | None:
    """Mean over checked sentences of the attributable probability against the deciding
    passage when ``report`` (provider, id keys) holds it, else 0; None without checked sentences."""
    checked = [r for r in reports if r.verdict.label in CHECKED]
    if not checked:
        return None
    scores = []
    for r in checked:
        passage = deciding_passage(r)
        held = passage is not None and (passage.provider, passage.id) in report
        scores.append(r.verdict.scores.get("attributable", 0.0) if held else 0.0)
    return float(np.mean(scores))


def select_report(relevance: np.ndarray, m: int = 5) -> list[int]:
    """Indices (columns of ``relevance`` [questions, passages]) of the best ≤ m passages: the
    subset maximising the sum over questions of its best passage's relevance; candidates are
    the ``MAX_CANDIDATES`` with the largest cover alone."""
    n_questions, n_passages = relevance.shape
    if n_passages == 0:
        return []
    if n_questions == 0:
        return list(range(min(m, n_passages)))
    candidates = np.argsort(-relevance.sum(axis=0), kind="stable")[:MAX_CANDIDATES]
    size = min(m, len(candidates))
    best: tuple[float, tuple[int, ...]] = (-np.inf, ())
    for subset in itertools.combinations(candidates.tolist(), size):
        cover = float(relevance[:, subset].max(axis=1).sum())
        if cover > best[0] + 1e-12:
            best = (cover, subset)
    chosen = sorted(best[1], key=lambda j: -relevance[:, j].max())
    return [int(j) for j in chosen]


def unique_passages(groups: Sequence[Sequence[Passage]]) -> list[Passage]:
    seen: dict[tuple[str, str], Passage] = {}
    for group in groups:
        for passage in group:
            seen.setdefault((passage.provider, passage.id), passage)
    return list(seen.values())
