"""Errors of the web search adapters."""

from __future__ import annotations


class ConfigError(Exception):
    """A configured search provider cannot work: missing key or URL, unknown name.

    Raised at start-up by :func:`adapters.search.build_providers`, never during a search."""

    def __init__(self, provider: str, message: str, env_var: str | None = None):
        super().__init__(message)
        self.provider = provider
        self.env_var = env_var


class ProviderError(Exception):
    """One failed provider request. ``kind`` labels ``factcheck_provider_errors_total``:
    timeout, connection, http_429, http_5xx, http_4xx, html, bad_json, bad_shape, too_large."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
