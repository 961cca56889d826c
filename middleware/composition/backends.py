"""Build the pipeline's backends by name from settings. Models are loaded through
``middleware.runtime``; LLM backends get their chat client from ``Providers`` (filled by the
composition root, ``middleware.composition``). Every builder takes ready objects too, so tests
and callers can inject their own (an embedder, a pair scorer, a chat model)."""

from __future__ import annotations

import logging
from typing import Any

from middleware.interfaces import ChatModel, Embedder, PairScorer, Providers
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.cqgen import (
    LLMQuestionGenerator,
    QuestionGenerator,
    Seq2SeqQuestionGenerator,
    SlotQuestionGenerator,
)
from middleware.pipeline.decontext import (
    Decontextualiser,
    LLMDecontextualiser,
    NoDecontextualiser,
    SpacyDecontextualiser,
)
from middleware.pipeline.verifiers import HybridVerifier, LLMVerifier, NLIVerifier, SlotsVerifier, Verifier
from middleware.settings import Settings

log = logging.getLogger(__name__)

VERIFIERS = ("slots", "nli", "hybrid", "llm")


class BackendUnavailable(RuntimeError):
    """A configured backend cannot run here (model missing, runtime not installed)."""


def load_embedder(settings: Settings) -> Embedder | None:
    """The runtime's embedder, or None (lexical-only alignment) with a warning."""
    try:
        from middleware.runtime import load_embedder as runtime_load_embedder

        return runtime_load_embedder(settings.runtime)
    except Exception as exc:  # noqa: BLE001 - any loading failure degrades to lexical alignment
        log.warning(
            "embedder %r unavailable (%s): aligning evidence lexically only",
            settings.runtime.embed_model,
            exc,
        )
        return None


def load_nli_scorer(settings: Settings) -> PairScorer:
    """The NLI cross-encoder ``settings.runtime.nli_model`` names ('bundled' by default)."""
    try:
        from middleware.runtime import load_pair_scorer

        return load_pair_scorer(settings.runtime.nli_model, "nli", settings.runtime)
    except Exception as exc:  # noqa: BLE001 - reported as one clear error
        raise BackendUnavailable(
            f"the NLI model {settings.runtime.nli_model!r} cannot be loaded: {exc}. Set runtime.nli_model "
            "(FACTCHECK_RUNTIME__NLI_MODEL) to an export directory, a checkpoint or a hub id, or use the slots verifier."
        ) from exc


def build_verifier(
    settings: Settings,
    name: str | None = None,
    *,
    embedder: Embedder | None = None,
    scorer: PairScorer | None = None,
    chat: ChatModel | None = None,
    providers: Providers = Providers(),
) -> Verifier:
    """``name`` defaults to ``settings.pipeline.verifier``. 'hybrid' falls back to 'slots'
    with a warning when no NLI model can be loaded."""
    name = name or settings.pipeline.verifier
    if name == "llm":
        return LLMVerifier(chat or providers.chat(settings))
    if name in ("slots", "hybrid"):
        aligner = Aligner(embedder if embedder is not None else load_embedder(settings))
        rules = settings.pipeline.rules
        slots = SlotsVerifier(aligner, top_k=settings.pipeline.verify_top_k, disabled=rules.disabled_for(False))
        if name == "slots":
            return slots
        try:
            nli = _nli(settings, scorer)
        except BackendUnavailable as exc:
            log.warning("hybrid verifier falls back to slots: %s", exc)
            return slots
        return with_rules(HybridVerifier(nli, slots, learned=rules.decision == "learned"), settings)
    if name == "nli":
        return _nli(settings, scorer)
    raise ValueError(f"unknown verifier {name!r}; expected one of {VERIFIERS}")


def with_rules(verifier: HybridVerifier, settings: Settings) -> HybridVerifier:
    """The rules the settings leave on for this verifier: by default the pruned rules are off
    where it decides with a learned combiner, none where it keeps the hand cut-offs (a model
    whose manifest has no combiner, or ``pipeline.rules.decision: hand``); and its cut-off
    for claims checked against structured records, where the settings give one."""
    verifier.slots.disabled = settings.pipeline.rules.disabled_for(verifier.combiner is not None)
    verifier.record_threshold = settings.pipeline.rules.record_threshold
    return verifier


def _nli(settings: Settings, scorer: PairScorer | None) -> NLIVerifier:
    return NLIVerifier(scorer or load_nli_scorer(settings), max_windows=settings.pipeline.nli_max_windows)


def build_question_generator(
    settings: Settings, name: str | None = None, *, chat: ChatModel | None = None, model: Any = None,
    providers: Providers = Providers(),
) -> QuestionGenerator:
    name = name or settings.pipeline.cqgen
    limit = settings.pipeline.max_questions
    if name == "slots":
        return SlotQuestionGenerator(limit)
    if name == "llm":
        return LLMQuestionGenerator(
            chat or providers.chat(settings),
            samples=settings.pipeline.cqgen_samples,
            temperature=settings.pipeline.cqgen_temperature,
            max_questions=limit,
        )
    if name == "seq2seq":
        return Seq2SeqQuestionGenerator(model or _load_seq2seq(settings), max_questions=limit)
    raise ValueError(f"unknown question generator {name!r}; expected slots, llm or seq2seq")


def _load_seq2seq(settings: Settings) -> Any:
    spec = settings.pipeline.seq2seq_model
    if not spec:
        raise BackendUnavailable(
            "the seq2seq question generator needs pipeline.seq2seq_model (FACTCHECK_PIPELINE__SEQ2SEQ_MODEL): "
            "a hub id, a local checkpoint or an ONNX export directory"
        )
    try:
        from middleware.runtime import load_seq2seq

        return load_seq2seq(spec, settings.runtime)
    except Exception as exc:  # noqa: BLE001 - reported as one clear error
        raise BackendUnavailable(f"the seq2seq model {spec!r} cannot be loaded: {exc}") from exc


def build_decontextualiser(
    settings: Settings, name: str | None = None, *, chat: ChatModel | None = None,
    providers: Providers = Providers(),
) -> Decontextualiser:
    name = name or settings.pipeline.decontext
    if name == "spacy":
        return SpacyDecontextualiser()
    if name == "llm":
        return LLMDecontextualiser(chat or providers.chat(settings))
    if name == "none":
        return NoDecontextualiser()
    raise ValueError(f"unknown decontextualiser {name!r}; expected spacy, llm or none")
