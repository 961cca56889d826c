"""The hybrid verifier's learned decision at run time: two small calibrated models (a logistic
regression or a gradient-boosted tree ensemble each) stored as numbers in the NLI model's
manifest (``decision.combiner``), evaluated with plain Python (no scikit-learn at run time). Fitted by ``factcheck fit-combiner``
(``middleware.training.combiner``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from middleware.pipeline.verifiers.base import first_given
from onnx_models.manifest import CombinerWeights, LinearModel, Tree, TreeEnsemble


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _leaf(tree: Tree, features: Mapping[str, float]) -> float:
    node = 0
    while (name := tree.feature[node]) is not None:
        # scikit-learn compares float32 readings with float64 thresholds
        node = tree.left[node] if np.float32(features.get(name, 0.0)) <= tree.threshold[node] else tree.right[node]
    return tree.value[node]


def probability(model: LinearModel | TreeEnsemble, features: Mapping[str, float]) -> float:
    """sigmoid(intercept + the weighted readings), or sigmoid(init + the leaves the reading
    reaches); a missing feature reads 0."""
    if isinstance(model, LinearModel):
        return _sigmoid(model.intercept + sum(w * features.get(name, 0.0) for name, w in model.coefficients.items()))
    return _sigmoid(model.init + sum(_leaf(tree, features) for tree in model.trees))


class Combiner:
    """P(attributable) and P(contradictory) of a claim from its named features, and the
    thresholds the fit chose for them."""

    def __init__(self, weights: CombinerWeights) -> None:
        self.weights = weights
        self.attributable_threshold = weights.attributable_threshold
        self.contradictory_threshold = weights.contradictory_threshold
        self.edit_threshold = weights.edit_threshold
        self.record_threshold = first_given(weights.record_threshold, weights.attributable_threshold)

    def p_attributable(self, features: Mapping[str, float]) -> float:
        return probability(self.weights.attributable, features)

    def p_contradictory(self, features: Mapping[str, float]) -> float:
        return probability(self.weights.contradictory, features)
