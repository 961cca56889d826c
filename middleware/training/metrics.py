"""The verifier's metrics, shared by training (checkpoint choice, calibration, the combiner's
fit) and evaluation (``middleware.evaluation``): balanced accuracy of attributable vs not,
ROC AUC of a score, and the 3-way / 2-way accuracies of an NLI model on its training run's
dev split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from middleware.training import ENTAILMENT
from middleware.training.verifier_data import NOT_ENTAILMENT, Pair


def balanced_accuracy(gold: Sequence[bool], predicted: Sequence[bool]) -> float:
    """Mean of the recalls of the positive and the negative class (of those gold has)."""
    gold_a, pred_a = np.asarray(gold, bool), np.asarray(predicted, bool)
    recalls = [float(np.mean(pred_a[gold_a == value] == value)) for value in (True, False) if (gold_a == value).any()]
    return float(np.mean(recalls)) if recalls else 0.0


def roc_auc(gold: Sequence[bool], scores: Sequence[float]) -> float:
    """Probability that a random positive scores above a random negative (ties count half):
    the Mann-Whitney statistic over average ranks; NaN where gold lacks a class. Written here,
    not taken from scikit-learn: that is a training extra only (``eval-battery`` runs
    without it), and its trapezoid sum can land one ulp off, which moves a figure rounded
    at a .x5 boundary."""
    g, s = np.asarray(gold, bool), np.asarray(scores, float)
    pos, neg = s[g], s[~g]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.concatenate([pos, neg])[order]
    start = 0  # average ranks over ties
    for end in range(1, len(values) + 1):
        if end == len(values) or values[end] != values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def dev_metrics(pairs: Sequence[Pair], probs: np.ndarray) -> dict[str, float]:
    """3-way accuracy on three-class pairs (natural sources, all, per source) and
    entailment-vs-rest accuracy on two-class sources."""
    pred = probs.argmax(axis=1)
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.source, []).append(i)
    out = {
        "acc3_natural": _accuracy(
            pred, pairs, [i for i, p in enumerate(pairs) if p.label >= 0 and p.source != "synthetic"]
        ),
        "acc3_all": _accuracy(pred, pairs, [i for i, p in enumerate(pairs) if p.label >= 0]),
    }
    for source, index in sorted(groups.items()):
        if any(pairs[i].label == NOT_ENTAILMENT for i in index):
            hits = [(pred[i] == ENTAILMENT) == (pairs[i].label == ENTAILMENT) for i in index]
            out[f"acc2_{source}"] = float(np.mean(hits))
        else:
            out[f"acc3_{source}"] = _accuracy(pred, pairs, index)
    return out


def _accuracy(pred: np.ndarray, pairs: Sequence[Pair], index: Sequence[int]) -> float:
    return float(np.mean([pred[i] == pairs[i].label for i in index])) if index else float("nan")
