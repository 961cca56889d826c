"""Brave Search: ``GET {brave_url}?q=...&count=k`` with the ``X-Subscription-Token`` header,
answering ``web.results[]`` of ``{title, url, description, extra_snippets?}`` (``web`` is
absent when there are no web results)."""

from __future__ import annotations

from adapters.search.base import KeyedProvider, first_k, result_list
from middleware.types import Passage

MAX_COUNT = 20  # the API's largest page


class BraveSource(KeyedProvider):
    name = "brave"

    async def _search(self, query: str, k: int) -> list[Passage]:
        data = await self.http.request_json(
            "GET",
            self.url,
            params={"q": query, "count": str(min(k, MAX_COUNT))},
            headers={"X-Subscription-Token": self.api_key, "Accept": "application/json"},
        )
        results = result_list(data, "web", "results", missing_ok=True)
        return first_k([self.passage(i, r.get("url"), r.get("title"), _text(r)) for i, r in enumerate(results)], k)


def _text(result: dict) -> str:
    extra = result.get("extra_snippets")
    parts = [result.get("description")] + (extra if isinstance(extra, list) else [])
    return " ".join(p for p in parts if isinstance(p, str))
