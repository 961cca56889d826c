"""The training metrics: the one balanced accuracy (the evaluation's ``Result`` uses it too), the
one ROC AUC (the battery's and calibration's) and the dev-split metrics. No torch, never reads ../shared."""

from __future__ import annotations

import random

import numpy as np
import pytest

from middleware.training.verifier_data import NOT_ENTAILMENT, Pair
from middleware.evaluation.verifier import Result
from middleware.training.metrics import balanced_accuracy, dev_metrics, roc_auc


def test_balanced_accuracy_is_the_mean_recall_of_the_classes_gold_has() -> None:
    assert balanced_accuracy([True, True, False, False], [True, False, False, False]) == pytest.approx(0.75)
    assert balanced_accuracy([True, True], [True, False]) == pytest.approx(0.5)
    result = Result("set", "backend", ["attributable", "contradictory", "extrapolatory", "extrapolatory"],
                    ["attributable", "attributable", "extrapolatory", "contradictory"])  # fmt: skip
    assert result.balanced_accuracy == pytest.approx(0.5 * (1 + 2 / 3)) and result.three_way_accuracy == 0.5


def test_dev_metrics() -> None:
    pairs = [Pair("p", "h", 0, "x"), Pair("p", "h", 2, "x"), Pair("p", "h", NOT_ENTAILMENT, "med")]
    probs = np.asarray([[0.9, 0.05, 0.05], [0.5, 0.2, 0.3], [0.2, 0.7, 0.1]])
    metrics = dev_metrics(pairs, probs)
    assert metrics["acc3_x"] == 0.5 and metrics["acc2_med"] == 1.0


def test_roc_auc_matches_the_pairwise_definition() -> None:
    rng = random.Random(3)
    gold = [rng.random() < 0.4 for _ in range(60)]
    scores = [round(rng.random(), 1) for _ in range(60)]  # with ties
    pos = [s for s, g in zip(scores, gold, strict=True) if g]
    neg = [s for s, g in zip(scores, gold, strict=True) if not g]
    pairs = [(p > n) + 0.5 * (p == n) for p in pos for n in neg]
    assert roc_auc(gold, scores) == pytest.approx(np.mean(pairs))
    assert np.isnan(roc_auc([True, True], [0.1, 0.2]))
