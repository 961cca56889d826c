"""Search providers behind ``middleware.interfaces.EvidenceSource``: the web's, and the user's
own LangChain retriever (``RetrieverSource``, ``evidence.providers: [..., retriever]``).

``build_web_sources(settings, cache=...)`` is what the engine uses: the providers named in
``evidence.providers`` (SearxNG, Brave, Tavily, Serper, Wikipedia, built by
``build_providers`` sharing one HTTP session) queried concurrently by ``CombinedSource``,
which merges and de-duplicates their results, wrapped, when ``evidence.fetch_pages`` is on,
in ``PageSource``, which fetches the top results' pages and ranks their passages with the
snippets. A provider's ``search`` never raises for a provider failure: it logs, counts
``factcheck_provider_errors_total`` and returns []; so does ``RetrieverSource``'s, which sits
beside the combined web source, not in it (its documents have no pages to fetch).
"""

from adapters.search.base import WebProvider
from adapters.search.brave import BraveSource
from adapters.search.combined import CombinedSource, dedupe, normalise_url
from adapters.search.errors import ConfigError, ProviderError
from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.pages import PageSource
from adapters.search.registry import PROVIDERS, build_providers, build_web_sources
from adapters.search.retriever import RetrieverSource
from adapters.search.searxng import SearxngSource
from adapters.search.serper import SerperSource
from adapters.search.tavily import TavilySource
from adapters.search.wikipedia import WikipediaSource

__all__ = [
    "PROVIDERS",
    "BraveSource",
    "CombinedSource",
    "ConfigError",
    "HttpClient",
    "PageSource",
    "ProviderError",
    "RetrieverSource",
    "RetryPolicy",
    "SearxngSource",
    "SerperSource",
    "TavilySource",
    "WebProvider",
    "WikipediaSource",
    "build_providers",
    "build_web_sources",
    "dedupe",
    "normalise_url",
]
