"""What every search provider shares: the never-raising ``search`` (timeout, cache, metrics,
logging) around a provider's own ``_search`` (:class:`GuardedSource`, also the retriever's), and
the web providers' snippet-to-passage helpers."""

from __future__ import annotations

import asyncio
import hashlib
import html
import logging
import re
from typing import Any

from adapters.search.errors import ProviderError
from adapters.search.client import HttpClient
from middleware.cache import Cache, cached, hash_key
from middleware.metrics import PROVIDER_ERRORS, timed
from middleware.redaction import redact, register_secrets
from middleware.types import Passage

log = logging.getLogger(__name__)

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


class GuardedSource:
    """An evidence source whose one query answers within its timeout, from the evidence cache
    when it can, and never raises (implements ``EvidenceSource``).

    Subclasses set :attr:`name` and implement :meth:`_search`, raising :class:`ProviderError`
    for a bad answer. :meth:`search` never raises for a provider failure: it logs it, counts
    it in ``factcheck_provider_errors_total{provider,kind}`` and returns []. Results are cached
    under :meth:`cache_key`; failures are not."""

    name: str = "source"

    def __init__(self, *, timeout_s: float, cache: Cache | None = None, cache_ttl_s: float | None = None):
        self.timeout_s = timeout_s
        self.cache = cache
        self.cache_ttl_s = cache_ttl_s

    def cache_key(self, query: str, k: int) -> str:
        return f"{self.name}:{k}:{hash_key(query)}"

    async def search(self, query: str, k: int) -> list[Passage]:
        query = " ".join(query.split())
        if not query or k <= 0:
            return []
        with timed("search"):
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await cached(
                        self.cache,
                        self.cache_key(query, k),
                        lambda: self._search(query, k),
                        kind="search",
                        ttl_s=self.cache_ttl_s,
                        dump=lambda ps: [p.model_dump(mode="json") for p in ps],
                        load=lambda raw: [Passage.model_validate(p) for p in raw],
                    )
            except TimeoutError:
                self._failed("timeout", f"no answer within {self.timeout_s}s", query)
            except ProviderError as exc:
                self._failed(exc.kind, str(exc), query)
            except Exception as exc:  # noqa: BLE001 - a provider must never break the stream
                log.exception("search provider %s crashed on %r", self.name, query[:80])
                self._failed("error", repr(exc), query, logged=True)
        return []

    async def _search(self, query: str, k: int) -> list[Passage]:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the source holds (nothing here)."""

    def _failed(self, kind: str, message: str, query: str, logged: bool = False) -> None:
        PROVIDER_ERRORS.labels(provider=self.name, kind=kind).inc()
        if not logged:
            log.warning("search provider %s failed (%s) for %r: %s", self.name, kind, query[:80], redact(message))


class WebProvider(GuardedSource):
    """Base of the web search providers: a :class:`GuardedSource` over a shared HTTP client."""

    name: str = "web"

    def __init__(self, http: HttpClient, *, timeout_s: float, cache: Cache | None = None, cache_ttl_s: float | None = None):
        super().__init__(timeout_s=timeout_s, cache=cache, cache_ttl_s=cache_ttl_s)
        self.http = http

    async def aclose(self) -> None:
        """Close the shared HTTP session (idempotent; closes it for the whole provider set)."""
        await self.http.aclose()

    def passage(self, rank: int, url: Any, title: Any, text: Any, *, suffix: str = "", **extra: Any) -> Passage | None:
        """A passage from one result; None when it has no URL or no text. ``score`` is the
        rank prior 1/(1+rank): providers' own scores are not comparable across providers."""
        url = url.strip() if isinstance(url, str) else ""
        text = clean_text(text)
        if not url or not text:
            return None
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
        return Passage(
            id=f"{self.name}:{digest}{suffix}",
            text=text,
            provider=self.name,
            source=url,
            title=clean_text(title) or None,
            url=url,
            score=1.0 / (1 + rank),
            **extra,
        )


class KeyedProvider(WebProvider):
    """A provider at one endpoint URL that needs an API key."""

    def __init__(self, url: str, api_key: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.url = url
        self.api_key = api_key
        register_secrets(api_key)  # never echoed in a log line or an error


def clean_text(value: Any) -> str:
    """Plain text of a snippet field: strings only, HTML tags removed, entities unescaped,
    whitespace collapsed."""
    if not isinstance(value, str):
        return ""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", value))).strip()


def result_list(data: Any, *path: str, missing_ok: bool = False) -> list[dict[str, Any]]:
    """The result objects at ``data[path...]``, or ProviderError(bad_shape). Non-object
    items are dropped; ``missing_ok`` treats an absent key as no results."""
    node = data
    for key in path:
        if not isinstance(node, dict):
            raise ProviderError("bad_shape", f"expected an object holding {'.'.join(path)}")
        if key not in node:
            if missing_ok:
                return []
            raise ProviderError("bad_shape", f"answer has no {'.'.join(path)}")
        node = node[key]
    if not isinstance(node, list):
        raise ProviderError("bad_shape", f"{'.'.join(path)} is not a list")
    return [item for item in node if isinstance(item, dict)]


def first_k(passages: list[Passage | None], k: int) -> list[Passage]:
    return [p for p in passages if p is not None][:k]
