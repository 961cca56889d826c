"""Verification backends behind one interface (``Verifier``): slots, nli, hybrid, llm."""

from middleware.pipeline.verifiers.base import (
    DetailedVerdict,
    Mismatch,
    Verifier,
    passages_from_texts,
    to_verdict_label,
)
from middleware.pipeline.verifiers.hybrid import HybridVerifier
from middleware.pipeline.verifiers.llm_verifier import LLMVerifier
from middleware.pipeline.verifiers.nli import NLIAssessment, NLIVerifier, Window, build_windows
from middleware.pipeline.verifiers.slots_verifier import SlotsVerifier

__all__ = [
    "DetailedVerdict",
    "HybridVerifier",
    "LLMVerifier",
    "Mismatch",
    "NLIAssessment",
    "NLIVerifier",
    "SlotsVerifier",
    "Verifier",
    "Window",
    "build_windows",
    "passages_from_texts",
    "to_verdict_label",
]
