"""Training of the compact NLI verifier: data loading, synthetic PURR-style examples,
the fine-tuning loop, ONNX export fallback and evaluation of the shipped model."""

LABELS: tuple[str, str, str] = ("entailment", "neutral", "contradiction")
"""Output order of the verifier head (maps to ``middleware.types.NLI_LABELS``)."""
