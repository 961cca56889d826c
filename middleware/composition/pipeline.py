"""Assemble the proxy's default checker from settings: evidence sources, ranker, question
generator, decontextualiser, verifier, editor and QUIP portrait. The backends themselves are
built by name in ``middleware.composition.backends``; this module wires them together."""

from __future__ import annotations

import logging

from middleware.cache import Cache, make_cache
from middleware.evidence.source import LocalIndexSource
from middleware.evidence.portrait import DataPortrait
from middleware.evidence.relevance import RelevanceRanker
from middleware.interfaces import Embedder, EvidenceSource, Providers
from middleware.text.nlp import get_nlp
from middleware.pipeline.factchecker import FactChecker, PipelineParts
from middleware.pipeline.memory import MEMORY_WAIT_SHARE
from middleware.composition.backends import (
    build_decontextualiser,
    build_question_generator,
    build_verifier,
    load_embedder,
)
from middleware.composition.editor import build_editor
from middleware.settings import Settings

log = logging.getLogger(__name__)


LOCAL_SOURCES = ("index", "context", "retriever")
"""``evidence.providers`` names that are no web search provider."""


def build_sources(settings: Settings, embedder: Embedder | None, cache: Cache,
                  providers: Providers = Providers()) -> list[EvidenceSource]:
    """The configured evidence sources (``context`` comes from each request): the local index,
    the user's retriever, then the web."""
    names = [p.strip().lower() for p in settings.evidence.providers]
    sources: list[EvidenceSource] = []
    if "index" in names:
        sources.append(LocalIndexSource.from_settings(settings, embedder, cache))
    if "retriever" in names:
        sources.append(providers.retriever(settings, cache))
    if any(p not in LOCAL_SOURCES for p in names):
        sources.extend(providers.web(settings, cache))
    return sources


def build_pipeline_checker(settings: Settings, providers: Providers = Providers()) -> FactChecker:
    """The pipeline ``settings`` describe; ``providers`` supplies the LLM client and the web
    search when they are configured (``middleware.composition.build_checker`` passes the adapters)."""
    get_nlp()  # load spaCy now, not on the first sentence
    embedder = load_embedder(settings)
    cache = make_cache(settings)
    verifier = build_verifier(settings, embedder=embedder, providers=providers)
    parts = PipelineParts(
        sources=build_sources(settings, embedder, cache, providers),
        questions=build_question_generator(settings, providers=providers),
        decontext=build_decontextualiser(settings, providers=providers),
        verifier=verifier,
        ranker=RelevanceRanker.from_settings(settings, embedder, cache),
        embedder=embedder,
        editor=build_editor(settings, verifier, providers=providers),
        portrait=DataPortrait.load(settings.evidence.index_dir) if "index" in settings.evidence.providers else None,
        top_k=settings.evidence.top_k,
        top_j=settings.evidence.top_j,
        report_size=settings.pipeline.report_max_snippets,
        context_policy=settings.evidence.context_policy,
        context_whole_chars=settings.evidence.context_whole_chars,
        memory_margin=settings.pipeline.memory_margin,
        memory_wait_s=MEMORY_WAIT_SHARE * settings.check.sentence_budget_s,
    )
    log.info("fact-checking pipeline: verifier=%s cqgen=%s sources=%s", verifier.name, settings.pipeline.cqgen,
             [s.name for s in parts.sources])
    return FactChecker(parts)
