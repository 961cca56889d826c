"""Training of the compact NLI verifier: data loading, synthetic PURR-style examples,
the fine-tuning loop, ONNX export fallback and evaluation of the shipped model."""

from middleware.types import NLI_HEAD_LABELS

ENTAILMENT, NEUTRAL, CONTRADICTION = (NLI_HEAD_LABELS.index(x) for x in ("entailment", "neutral", "contradiction"))
"""Target ids of the head's three classes: positions in ``middleware.types.NLI_HEAD_LABELS``,
the label vocabulary the training data, the export's manifest and the runtime share."""
