"""Decision thresholds of an exported NLI verifier, chosen on held-out dev pairs (never on a
test set) and stored in its manifest.

The product's question is binary (does the evidence support the claim?), so the thresholds
are chosen for it: P(entailment) at the balanced-accuracy optimum decides 'supported';
``precise_entailment`` is the lowest P(entailment) whose 'supported' reaches the target
precision on dev (what an edit must reach before correct mode applies it); the
contradiction threshold is the P(contradiction) optimum on the three-way dev pairs. The
hybrid verifier's two NLI cut-offs (strong entailment that overrides a slot mismatch, and
an unlocalised contradiction) are then chosen on the same pairs, run through the slots
verifier and NLI together.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from middleware.training import CONTRADICTION, ENTAILMENT
from middleware.training.verifier_data import Pair
from middleware.training.metrics import balanced_accuracy, roc_auc

GRID = np.round(np.arange(0.05, 0.96, 0.01), 2)


def best_threshold(gold: np.ndarray, score: np.ndarray) -> tuple[float, float]:
    """The grid threshold with the best balanced accuracy (the lowest of ties) and that accuracy."""
    results = [(balanced_accuracy(gold, score >= t), -t) for t in GRID]
    accuracy, negative = max(results)
    return float(-negative), accuracy


def precise_threshold(gold: np.ndarray, score: np.ndarray, target: float) -> float:
    """The lowest grid threshold at which precision of ``score >= t`` reaches ``target``
    (with at least 20 predictions), else the highest grid threshold."""
    for t in GRID:
        chosen = score >= t
        if chosen.sum() >= 20 and float(gold[chosen].mean()) >= target:
            return float(t)
    return float(GRID[-1])


@dataclass
class Calibration:
    entailment: float
    contradiction: float
    precise_entailment: float
    target_precision: float
    metrics: dict[str, float]


def calibrate_nli(pairs: Sequence[Pair], probs: np.ndarray, target_precision: float = 0.9) -> Calibration:
    """Thresholds from dev ``pairs`` and the model's probabilities on them (``NLI_HEAD_LABELS`` order)."""
    gold = np.asarray([p.label == ENTAILMENT for p in pairs])
    p_entail = probs[:, ENTAILMENT]
    entail, bacc = best_threshold(gold, p_entail)
    three = np.asarray([p.label >= 0 for p in pairs])
    gold_c = np.asarray([p.label == CONTRADICTION for p in pairs])[three]
    contradiction, bacc_c = best_threshold(gold_c, probs[three, CONTRADICTION])
    precise = precise_threshold(gold, p_entail, target_precision)
    metrics = {
        "pairs": float(len(pairs)),
        "supported_balanced_accuracy": round(bacc, 4),
        "supported_balanced_accuracy_at_0.5": round(balanced_accuracy(gold, p_entail >= 0.5), 4),
        "supported_auc": round(roc_auc(gold, p_entail), 4),
        "contradiction_balanced_accuracy": round(bacc_c, 4),
        "contradiction_auc": round(roc_auc(gold_c, probs[three, CONTRADICTION]), 4),
        "precision_at_precise_entailment": round(float(gold[p_entail >= precise].mean()), 4)
        if (p_entail >= precise).any()
        else float("nan"),
        "recall_at_precise_entailment": round(float((p_entail[gold] >= precise).mean()), 4),
    }
    return Calibration(entail, max(0.5, contradiction), max(precise, entail), target_precision, metrics)


def tune_hybrid(pairs: Sequence[Pair], hybrid, limit: int = 1500) -> dict[str, float]:
    """Choose the hybrid verifier's strong-entailment and NLI-only-contradiction cut-offs on
    dev ``pairs`` (claim = hypothesis, evidence = premise; supported = entailment): each pair
    is assessed once, then every grid point re-runs only the (pure) combination."""
    from middleware.pipeline.alignment import sentences_of_passages
    from middleware.pipeline.verifiers.base import passages_from_texts

    chosen = list(pairs)[:limit]

    async def assess_all():
        out = []
        for pair in chosen:
            evidence = passages_from_texts([pair.premise])
            assessment = await hybrid.nli.assess(pair.hypothesis, evidence)
            aligned = await hybrid.slots.aligner.align(pair.hypothesis, sentences_of_passages(evidence), hybrid.slots.top_k)
            out.append((pair.hypothesis, hybrid.nli.decide(assessment), hybrid.slots.judge(pair.hypothesis, aligned, evidence)))
        return out

    assessed = asyncio.run(assess_all())
    gold = np.asarray([p.label == ENTAILMENT for p in chosen])
    best: tuple[float, float, float] | None = None
    for strong, only in itertools.product((0.8, 0.85, 0.9, 0.95, 0.99), (0.7, 0.8, 0.9, 0.95, 0.99)):
        hybrid.strong_entailment, hybrid.nli_only_contradiction = strong, only
        predicted = np.asarray([hybrid.combine(c, n, s).label == "attributable" for c, n, s in assessed])
        score = balanced_accuracy(gold, predicted)
        if best is None or score > best[0] + 1e-9:
            best = (score, strong, only)
    assert best is not None
    return {
        "hybrid_balanced_accuracy": round(best[0], 4),
        "hybrid_strong_entailment": best[1],
        "hybrid_nli_only_contradiction": best[2],
        "hybrid_pairs": float(len(chosen)),
    }
