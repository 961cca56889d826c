"""Serper (Google results): ``POST {serper_url}`` with the ``X-API-KEY`` header and a JSON
body ``{q, num}``, answering ``organic[]`` of ``{title, link, snippet, position}``."""

from __future__ import annotations

from adapters.search.base import KeyedProvider, first_k, result_list
from middleware.types import Passage


class SerperSource(KeyedProvider):
    name = "serper"

    async def _search(self, query: str, k: int) -> list[Passage]:
        data = await self.http.request_json(
            "POST",
            self.url,
            json={"q": query, "num": k},
            headers={"X-API-KEY": self.api_key, "Accept": "application/json"},
        )
        results = result_list(data, "organic")
        return first_k([self.passage(i, r.get("link"), r.get("title"), r.get("snippet")) for i, r in enumerate(results)], k)
