"""Builds the configured web search providers from settings (the start-up check lives here),
and the one web evidence source the engine uses (:func:`build_web_sources`)."""

from __future__ import annotations

from collections.abc import Callable

from adapters.fetch import PageFetcher
from adapters.search.base import WebProvider
from adapters.search.brave import BraveSource
from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.combined import CombinedSource
from adapters.search.errors import ConfigError
from adapters.search.pages import PageSource
from adapters.search.searxng import SearxngSource
from adapters.search.serper import SerperSource
from adapters.search.tavily import TavilySource
from adapters.search.wikipedia import WikipediaSource
from middleware.cache import Cache
from middleware.interfaces import EvidenceSource
from middleware.settings import EvidenceSettings, Settings

# Evidence sources that are not web providers; the composition root builds them (the
# retriever: adapters.search.retriever.RetrieverSource).
NON_WEB_SOURCES = frozenset({"index", "context", "retriever"})

Builder = Callable[[EvidenceSettings, dict], WebProvider]


def _env(field: str) -> str:
    return f"FACTCHECK_EVIDENCE__{field.upper()}"


def _secret(ev: EvidenceSettings, provider: str, field: str) -> str:
    value = getattr(ev, field)
    secret = value.get_secret_value() if value is not None else ""
    if not secret.strip():
        raise ConfigError(
            provider,
            f"search provider {provider!r} is configured (evidence.providers) but has no API key: "
            f"set {_env(field)} (evidence.{field})",
            _env(field),
        )
    return secret.strip()


def _searxng(ev: EvidenceSettings, common: dict) -> WebProvider:
    if not (ev.searxng_url or "").strip():
        raise ConfigError(
            "searxng",
            f"search provider 'searxng' is configured (evidence.providers) but has no URL: "
            f"set {_env('searxng_url')} (evidence.searxng_url)",
            _env("searxng_url"),
        )
    return SearxngSource(ev.searxng_url, **common)


PROVIDERS: dict[str, Builder] = {
    "searxng": _searxng,
    "brave": lambda ev, common: BraveSource(ev.brave_url, _secret(ev, "brave", "brave_api_key"), **common),
    "tavily": lambda ev, common: TavilySource(ev.tavily_url, _secret(ev, "tavily", "tavily_api_key"), **common),
    "serper": lambda ev, common: SerperSource(ev.serper_url, _secret(ev, "serper", "serper_api_key"), **common),
    "wikipedia": lambda ev, common: WikipediaSource(ev.wikipedia_url, pages=ev.wikipedia_pages, **common),
}


def build_providers(
    settings: Settings | EvidenceSettings, *, cache: Cache | None = None, http: HttpClient | None = None
) -> list[WebProvider]:
    """The web providers named in ``evidence.providers``, in order, sharing one HTTP session
    (``http``, or a new one; close it with any provider's ``aclose``). ``index`` and
    ``context`` are skipped: they are not web providers. Raises :class:`ConfigError` for an
    unknown name or a provider without its key or URL, naming the environment variable."""
    ev = settings.evidence if isinstance(settings, Settings) else settings
    trust_env = settings.outbound.trust_env if isinstance(settings, Settings) else False
    http = http or HttpClient(
        ev.http_user_agent, RetryPolicy(ev.search_retries, ev.search_backoff_s, ev.search_backoff_max_s),
        trust_env=trust_env, allowlist=ev.fetch_allowlist,
    )
    providers = []
    for name in dict.fromkeys(n.strip().lower() for n in ev.providers):
        if name in NON_WEB_SOURCES:
            continue
        builder = PROVIDERS.get(name)
        if builder is None:
            known = ", ".join(sorted(NON_WEB_SOURCES | PROVIDERS.keys()))
            raise ConfigError(name, f"unknown evidence provider {name!r} (known: {known})")
        common = {
            "http": http,
            "timeout_s": ev.search_timeouts_s.get(name, ev.search_timeout_s),
            "cache": cache,
            "cache_ttl_s": ev.cache_ttl_s,
        }
        providers.append(builder(ev, common))
    return providers


def build_web_sources(settings: Settings | EvidenceSettings, *, cache: Cache | None = None) -> list[EvidenceSource]:
    """The web evidence of ``evidence.providers``, ready to search: [] when no web provider is
    named, else one source. The providers are queried together and their results merged and
    de-duplicated (:class:`CombinedSource`, ``evidence.search_dedup_threshold``); with
    ``evidence.fetch_pages`` the pages of the top ``evidence.fetch_pages_per_query`` results
    are fetched and their passages ranked with the snippets (:class:`PageSource`). Raises
    :class:`ConfigError` like :func:`build_providers`."""
    ev = settings.evidence if isinstance(settings, Settings) else settings
    providers = build_providers(settings, cache=cache)
    if not providers:
        return []
    web: EvidenceSource = CombinedSource(providers, text_threshold=ev.search_dedup_threshold)
    if ev.fetch_pages:
        web = PageSource(
            web,
            PageFetcher(ev, cache=cache),
            pages=ev.fetch_pages_per_query,
            window=ev.passage_sentences,
            stride=ev.passage_stride,
            text_threshold=ev.search_dedup_threshold,
        )
    return [web]
