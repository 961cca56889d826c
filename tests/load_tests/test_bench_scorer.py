"""The parity columns of load_tests/bench_scorer.py (the model card's int8-against-fp32 tolerance)."""

from __future__ import annotations

import numpy as np

from load_tests.bench_scorer import parity
from middleware.runtime.scorer import softmax


def test_parity_reads_logit_differences_back_from_probabilities() -> None:
    reference_logits = np.array([[2.0, 0.5, -1.0], [-0.5, 0.0, 1.5]])
    shifted = reference_logits + np.array([[0.3, 0.0, 0.0], [5.0, 5.0, 5.2]])  # a softmax shift is no difference
    row = parity(softmax(shifted), softmax(reference_logits), ["entailment", "neutral", "contradiction"])
    # centred: row 0 moves by (0.2, -0.1, -0.1), row 1 by (-0.067, -0.067, 0.133)
    assert abs(row["max_logit_diff"] - 0.2) < 1e-6
    assert row["argmax_agreement"] == 1.0 and row["decision_agreement"] == 1.0
    assert 0 < row["max_abs_diff"] < 0.1
