"""Tavily: ``POST {tavily_url}`` with a JSON body ``{api_key, query, max_results}`` (the key
also goes as a Bearer token), answering ``results[]`` of ``{title, url, content, score}``."""

from __future__ import annotations

from adapters.search.base import KeyedProvider, first_k, result_list
from middleware.types import Passage

MAX_RESULTS = 20


class TavilySource(KeyedProvider):
    name = "tavily"

    async def _search(self, query: str, k: int) -> list[Passage]:
        data = await self.http.request_json(
            "POST",
            self.url,
            json={"api_key": self.api_key, "query": query, "max_results": min(k, MAX_RESULTS), "search_depth": "basic"},
            headers={"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"},
        )
        results = result_list(data, "results")
        return first_k([self.passage(i, r.get("url"), r.get("title"), r.get("content")) for i, r in enumerate(results)], k)
