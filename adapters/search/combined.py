"""Several evidence sources queried concurrently, results merged and de-duplicated."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from itertools import zip_longest
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rapidfuzz import fuzz, process

from middleware.interfaces import EvidenceSource
from middleware.metrics import PROVIDER_ERRORS
from middleware.types import Passage

log = logging.getLogger(__name__)

_TRACKING_PARAMS = ("utm_", "gclid", "fbclid", "mc_cid", "mc_eid", "ref_src")


class CombinedSource:
    """Queries every source at once (each with its own timeout) and merges their results
    round-robin by rank, so each source's best result comes first, dropping the results
    :func:`dedupe` finds repeated (``text_threshold``: ``evidence.search_dedup_threshold``).
    ``limit`` caps the merged list (None: no cap). A source that raises despite the
    ``EvidenceSource`` contract is logged and skipped."""

    name = "web"

    def __init__(self, sources: Sequence[EvidenceSource], *, text_threshold: float = 90.0, limit: int | None = None):
        self.sources = list(sources)
        self.text_threshold = text_threshold
        self.limit = limit

    async def search(self, query: str, k: int) -> list[Passage]:
        answers = await asyncio.gather(*(s.search(query, k) for s in self.sources), return_exceptions=True)
        ranked: list[list[Passage]] = []
        for source, answer in zip(self.sources, answers, strict=True):
            if isinstance(answer, BaseException):
                if isinstance(answer, asyncio.CancelledError):
                    raise answer
                PROVIDER_ERRORS.labels(provider=source.name, kind="error").inc()
                log.error("evidence source %s raised %r for %r", source.name, answer, query[:80])
                continue
            ranked.append(answer)
        merged = [p for group in zip_longest(*ranked) for p in group if p is not None]
        unique = dedupe(merged, self.text_threshold)
        return unique if self.limit is None else unique[: self.limit]

    async def aclose(self) -> None:
        """Close every source that can be closed (shared sessions close once)."""
        for source in self.sources:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()


def dedupe(passages: Sequence[Passage], text_threshold: float = 90.0) -> list[Passage]:
    """Keep the first of passages that are the same result or say the same thing.

    The same result: the same normalised URL (a page two providers both found), and the same
    span of it for passages that are spans of a page (``start``/``end`` set: Wikipedia intro
    windows, passages of a fetched page), which are different passages of one URL. The same
    thing: texts, lower-cased with whitespace collapsed, whose rapidfuzz ratio to a kept one
    is at least ``text_threshold`` (0-100; 100 drops only identical texts)."""
    kept: list[Passage] = []
    seen_urls: set[tuple[str, int | None, int | None]] = set()
    seen_texts: list[str] = []
    for p in passages:
        url = (normalise_url(p.url), p.start, p.end) if p.url else None
        text = " ".join(p.text.lower().split())
        if url is not None and url in seen_urls:
            continue
        if seen_texts and process.extractOne(text, seen_texts, scorer=fuzz.ratio, score_cutoff=text_threshold):
            continue
        kept.append(p)
        seen_texts.append(text)
        if url is not None:
            seen_urls.add(url)
    return kept


def normalise_url(url: str) -> str:
    """A comparison key for URLs: scheme-less, lower-case host without ``www.`` or default
    port, no fragment, no trailing slash, tracking parameters dropped, query sorted."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    port = parts.port if parts.port not in (None, 80, 443) else None
    netloc = f"{host}:{port}" if port else host
    query = sorted(
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not k.lower().startswith(_TRACKING_PARAMS)
    )
    path = parts.path.rstrip("/")
    return urlunsplit(("", netloc, path, urlencode(query), ""))
