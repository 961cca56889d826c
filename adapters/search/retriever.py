"""A LangChain retriever as an evidence source: ``evidence.providers: [..., retriever]`` with
``evidence.retriever: {factory: "mypkg.kb:make_retriever", kwargs: {...}}``.

The factory is imported and called once, at start-up, with its keyword arguments; it returns the
retriever the user already runs (a ``BaseRetriever`` over pgvector, Elasticsearch, Qdrant, an
in-memory store ...), or anything else with ``ainvoke`` or ``invoke`` answering a query string
with ``Document``s. Each verification question is one call: ``ainvoke`` where the retriever has
it (a ``BaseRetriever`` without a native async path runs its sync one in LangChain's executor),
else ``invoke`` in a worker thread; under the provider timeout (``evidence.search_timeouts_s
['retriever']``, default ``evidence.search_timeout_s``) and the evidence cache, like the web
providers (:class:`GuardedSource`). A timed-out sync call cannot be interrupted: its thread runs
on, its answer unused.

A ``Document`` becomes a :class:`Passage`: ``page_content`` the text, ``metadata["source"]`` the
source (else the document's ``id``, else the factory), ``metadata["title"]`` the title,
``metadata["url"]`` (or an http(s) source) the URL, ``metadata["start_index"]`` (LangChain's text
splitters set it) the offset. A document without text, or not a document at all, is dropped and
counted (``factcheck_provider_errors_total{provider="retriever",kind="bad_document"}``). The
retriever's own ``k`` (``search_kwargs``) bounds what it returns; the first
``evidence.top_k`` are kept."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from adapters.search.base import GuardedSource
from adapters.search.errors import ConfigError, ProviderError
from middleware.cache import Cache, hash_key
from middleware.metrics import PROVIDER_ERRORS
from middleware.settings import RetrieverSettings, Settings
from middleware.types import Passage

log = logging.getLogger(__name__)

FACTORY_ENV = "FACTCHECK_EVIDENCE__RETRIEVER__FACTORY"


class RetrieverSource(GuardedSource):
    """``EvidenceSource`` over a LangChain retriever (see the module docstring)."""

    name = "retriever"

    def __init__(self, retriever: Any, *, origin: str, timeout_s: float, cache: Cache | None = None,
                 cache_ttl_s: float | None = None, cache_scope: str | None = None):
        """``origin`` names the retriever in logs (the factory); ``cache_scope`` keeps its cache
        entries apart from another retriever's (default: ``origin``)."""
        super().__init__(timeout_s=timeout_s, cache=cache, cache_ttl_s=cache_ttl_s)
        if not any(callable(getattr(retriever, m, None)) for m in ("ainvoke", "invoke")):
            raise ConfigError(self.name, f"evidence.retriever: {origin} returned {type(retriever).__name__}, "
                                         "which has neither ainvoke nor invoke (expected a LangChain BaseRetriever)",
                              FACTORY_ENV)
        self.retriever = retriever
        self.origin = origin
        self.cache_scope = hash_key(cache_scope or origin)

    @classmethod
    def from_settings(cls, settings: Settings, *, cache: Cache | None = None) -> RetrieverSource:
        """The retriever ``evidence.retriever`` names, built now. Raises :class:`ConfigError`
        when it is not configured, cannot be imported, or its factory fails."""
        ev = settings.evidence
        if ev.retriever is None:
            raise ConfigError(cls.name, "evidence provider 'retriever' is configured (evidence.providers) but "
                                        f"evidence.retriever is not: set its factory ({FACTORY_ENV})", FACTORY_ENV)
        config = ev.retriever
        return cls(build_retriever(config), origin=config.factory,
                   timeout_s=ev.search_timeouts_s.get(cls.name, ev.search_timeout_s), cache=cache,
                   cache_ttl_s=ev.cache_ttl_s,
                   cache_scope=f"{config.factory}\0{json.dumps(config.kwargs, sort_keys=True, default=str)}")

    def cache_key(self, query: str, k: int) -> str:
        """Per retriever configuration (factory and kwargs): another retriever never reads these."""
        return f"{self.name}:{self.cache_scope}:{k}:{hash_key(query)}"

    async def _search(self, query: str, k: int) -> list[Passage]:
        documents = await self._documents(query)
        if not isinstance(documents, (list, tuple)):
            raise ProviderError("bad_shape", f"the retriever answered {type(documents).__name__}, not a list of Documents")
        passages = [self._passage(rank, doc) for rank, doc in enumerate(documents)]
        dropped = sum(p is None for p in passages)
        if dropped:
            PROVIDER_ERRORS.labels(provider=self.name, kind="bad_document").inc(dropped)
            log.warning("retriever %s: dropped %d of %d documents without text for %r",
                        self.origin, dropped, len(passages), query[:80])
        return [p for p in passages if p is not None][:k]

    async def _documents(self, query: str) -> Any:
        ainvoke = getattr(self.retriever, "ainvoke", None)
        if callable(ainvoke):
            return await ainvoke(query)
        return await asyncio.to_thread(self.retriever.invoke, query)

    def _passage(self, rank: int, document: Any) -> Passage | None:
        """The passage of one ``Document`` (duck-typed: ``page_content``, ``metadata``, ``id``);
        None when it has no text."""
        content = getattr(document, "page_content", None)
        text = content.strip() if isinstance(content, str) else ""
        if not text:
            return None
        metadata = getattr(document, "metadata", None)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        doc_id = _text(getattr(document, "id", None))
        source = _text(metadata.get("source")) or doc_id or self.origin
        url = _text(metadata.get("url")) or (source if source.startswith(("http://", "https://")) else None)
        start = metadata.get("start_index")
        offsets = {}
        if type(start) is int and start >= 0:  # the split's offset in its file; the text is stripped
            start += len(content) - len(content.lstrip())
            offsets = {"start": start, "end": start + len(text)}
        digest = doc_id or hashlib.sha1(f"{source}\0{text}".encode()).hexdigest()[:16]
        return Passage(id=f"{self.name}:{digest}", text=text, provider=self.name, source=source,
                       title=_text(metadata.get("title")), url=url, score=1.0 / (1 + rank), **offsets)


def _text(value: Any) -> str | None:
    """A metadata value as a non-empty string (paths included), else None."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return value.strip() or None if isinstance(value, str) else None


def build_retriever(config: RetrieverSettings) -> Any:
    """Import ``config.factory`` ('module.path:callable') and call it with ``config.kwargs``."""
    factory = load_factory(config.factory)
    try:
        return factory(**config.kwargs)
    except Exception as exc:
        raise ConfigError("retriever", f"evidence.retriever: {config.factory}(**kwargs) failed: {exc!r}",
                          FACTORY_ENV) from exc


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` ('module.path:attr.path') names; :class:`ConfigError` if it cannot be found."""
    module_name, _, attr_path = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError("retriever", f"evidence.retriever.factory {spec!r}: cannot import {module_name!r} ({exc}); "
                                       "it must be installed or on PYTHONPATH", FACTORY_ENV) from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ConfigError("retriever", f"evidence.retriever.factory {spec!r}: {module_name!r} has no {attr_path!r}",
                              FACTORY_ENV) from exc
    if not callable(target):
        raise ConfigError("retriever", f"evidence.retriever.factory {spec!r} is not callable", FACTORY_ENV)
    return target
