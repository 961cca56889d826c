"""The message-level attribution report (RARR) and auto-AIS.

- Report: choose A ⊆ evidence, |A| ≤ M, maximising Cover(A) = Σ_i max_{e∈A} S(q_i, e) over
  all verification questions q_i of the message, exhaustively (RARR). S is the embedding
  cosine between question and passage. Candidates are capped (the 12 most relevant) so the
  exhaustive search stays at most C(12, 5) = 792 subsets.
- Attr_auto: mean over checked sentences of the verifier's attributable probability for the
  sentence against the report passages (for the NLI verifier this is max over windows of
  P(entailment), i.e. RARR's max_{e∈A} P_NLI(e entails s)).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from middleware.types import Passage

MAX_CANDIDATES = 12


def select_report(relevance: np.ndarray, m: int = 5) -> list[int]:
    """Indices (columns of ``relevance`` [questions, passages]) of the best ≤ m passages."""
    n_questions, n_passages = relevance.shape
    if n_passages == 0:
        return []
    if n_questions == 0:
        return list(range(min(m, n_passages)))
    candidates = np.argsort(-relevance.max(axis=0))[:MAX_CANDIDATES]
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
