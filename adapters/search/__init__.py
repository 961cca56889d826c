"""Web search providers behind ``middleware.interfaces.EvidenceSource``.

``build_providers(settings, cache=...)`` builds the providers named in
``evidence.providers`` (SearxNG, Brave, Tavily, Serper, Wikipedia) sharing one HTTP session;
``CombinedSource(providers)`` queries them concurrently and de-duplicates the results. A
provider's ``search`` never raises for a provider failure: it logs, counts
``factcheck_provider_errors_total`` and returns [].
"""

from adapters.search.base import WebProvider
from adapters.search.brave import BraveSource
from adapters.search.combined import CombinedSource, dedupe, normalise_url
from adapters.search.errors import ConfigError, ProviderError
from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.registry import PROVIDERS, build_providers
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
    "ProviderError",
    "RetryPolicy",
    "SearxngSource",
    "SerperSource",
    "TavilySource",
    "WebProvider",
    "WikipediaSource",
    "build_providers",
    "dedupe",
    "normalise_url",
]
