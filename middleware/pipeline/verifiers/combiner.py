"""The hybrid verifier's learned decision at run time: two small gradient-boosted tree
ensembles stored as numbers in the NLI model's manifest (``decision.combiner``), walked with
plain Python (no scikit-learn at run time). Fitted by ``factcheck fit-combiner``
(``middleware.training.combiner``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from onnx_models.manifest import CombinerWeights, Tree, TreeEnsemble


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _leaf(tree: Tree, features: Mapping[str, float]) -> float:
    node = 0
    while (name := tree.feature[node]) is not None:
        # scikit-learn compares float32 readings with float64 thresholds
        node = tree.left[node] if np.float32(features.get(name, 0.0)) <= tree.threshold[node] else tree.right[node]
    return tree.value[node]


def probability(ensemble: TreeEnsemble, features: Mapping[str, float]) -> float:
    """sigmoid(init + the leaves the reading reaches); a missing feature reads 0."""
    return _sigmoid(ensemble.init + sum(_leaf(tree, features) for tree in ensemble.trees))


class Combiner:
    """P(attributable) and P(contradictory) of a claim from its named features, and the
    thresholds the fit chose for them."""

    def __init__(self, weights: CombinerWeights) -> None:
        self.weights = weights
        self.attributable_threshold = weights.attributable_threshold
        self.contradictory_threshold = weights.contradictory_threshold
        self.edit_threshold = weights.edit_threshold

    def p_attributable(self, features: Mapping[str, float]) -> float:
        return probability(self.weights.attributable, features)

    def p_contradictory(self, features: Mapping[str, float]) -> float:
        return probability(self.weights.contradictory, features)
