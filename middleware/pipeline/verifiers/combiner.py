"""The hybrid verifier's learned decision at run time: two logistic regressions stored as a
few numbers in the NLI model's manifest (``decision.combiner``), applied with numpy alone
(no scikit-learn at run time). Fitted by ``factcheck fit-combiner``
(``middleware.training.combiner``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from onnx_models.manifest import CombinerWeights, LogisticWeights


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


class Combiner:
    """P(attributable) and P(contradictory) of a claim from its named features; a feature
    the weights name but the reading lacks counts as its fitting mean (no effect)."""

    def __init__(self, weights: CombinerWeights) -> None:
        self.weights = weights
        self.attributable_threshold = weights.attributable_threshold
        self.contradictory_threshold = weights.contradictory_threshold
        self.edit_threshold = weights.edit_threshold

    def _probability(self, model: LogisticWeights, features: Mapping[str, float]) -> float:
        z = model.intercept
        for name, weight in model.weights.items():
            mean = self.weights.means[name]
            z += weight * (features.get(name, mean) - mean) / (self.weights.scales[name] or 1.0)
        return _sigmoid(z)

    def p_attributable(self, features: Mapping[str, float]) -> float:
        return self._probability(self.weights.attributable, features)

    def p_contradictory(self, features: Mapping[str, float]) -> float:
        return self._probability(self.weights.contradictory, features)
