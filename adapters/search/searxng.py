"""SearxNG: ``GET {searxng_url}/search?q=...&format=json`` answering ``results[]`` of
``{url, title, content, engine, score}`` (the instance must enable the json format)."""

from __future__ import annotations

from adapters.search.base import WebProvider, first_k, result_list
from middleware.types import Passage


class SearxngSource(WebProvider):
    name = "searxng"

    def __init__(self, base_url: str, **kwargs):
        super().__init__(**kwargs)
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/search") else base + "/search"

    async def _search(self, query: str, k: int) -> list[Passage]:
        data = await self.http.request_json(
            "GET", self.url, params={"q": query, "format": "json"}, headers={"Accept": "application/json"}
        )
        results = result_list(data, "results")
        return first_k([self.passage(i, r.get("url"), r.get("title"), r.get("content")) for i, r in enumerate(results)], k)
