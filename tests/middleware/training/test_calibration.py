"""Calibrating the NLI verifier: thresholds picked on dev pairs, the precise one at the target
precision."""

from __future__ import annotations

import numpy as np

from middleware.training.verifier_data import NOT_ENTAILMENT, Pair


def test_calibration_picks_thresholds_on_dev_pairs() -> None:
    from middleware.training.calibration import calibrate_nli, precise_threshold

    rng = np.random.default_rng(0)
    labels = [0] * 300 + [1] * 150 + [2] * 150 + [NOT_ENTAILMENT] * 100
    pairs = [Pair(premise=f"p{i}", hypothesis="h", label=label) for i, label in enumerate(labels)]
    p_entail = np.where(np.asarray(labels) == 0, rng.uniform(0.3, 1.0, len(labels)), rng.uniform(0.0, 0.45, len(labels)))
    p_contra = np.where(np.asarray(labels) == 2, 0.9 - p_entail / 2, (1 - p_entail) / 4)
    probs = np.stack([p_entail, 1 - p_entail - p_contra, p_contra], axis=1)
    calibration = calibrate_nli(pairs, probs, target_precision=0.95)
    # supported pairs sit above 0.3, the others below 0.45: the optimum lies between
    assert 0.3 <= calibration.entailment <= 0.46
    assert calibration.metrics["supported_balanced_accuracy"] > 0.9
    assert calibration.precise_entailment >= calibration.entailment
    assert calibration.metrics["precision_at_precise_entailment"] >= 0.95
    gold = np.asarray(labels) == 0
    assert calibration.precise_entailment == max(precise_threshold(gold, p_entail, 0.95), calibration.entailment)
    assert calibration.contradiction >= 0.5
