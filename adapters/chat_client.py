"""A small OpenAI-compatible chat client on aiohttp, used by every ``llm`` backend of the
pipeline (CQGen, verification, decontextualisation, editing). It implements
``middleware.pipeline.prompts.ChatModel``. Prompts fence untrusted text themselves
(``middleware.pipeline.prompts.fence``); this client only moves messages."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp

log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """The endpoint failed, timed out or answered something that is not a completion."""


class ChatClient:
    """``POST {base_url}/chat/completions``. ``n`` samples are requested in one call; when
    a server returns fewer choices (many ignore ``n``) the rest are fetched concurrently."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str = "gpt-4o-mini",
        timeout_s: float = 30.0,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.n = n
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._session = session
        self._owns_session = session is None

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> ChatClient:
        """Build from ``middleware.settings.Settings``: the pipeline's LLM URL and key,
        else the upstream's."""
        pipeline, upstream = settings.pipeline, settings.upstream
        key = pipeline.llm_api_key or upstream.api_key
        options: dict[str, Any] = {
            "api_key": key.get_secret_value() if key is not None else None,
            "model": pipeline.llm_model,
            "timeout_s": pipeline.llm_timeout_s,
        }
        options.update(overrides)
        return cls(pipeline.llm_url or upstream.url, **options)

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> list[str]:
        """Texts of ``n`` completions of ``messages``."""
        want = n or self.n
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "n": want,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.max_tokens,
            "stream": False,
        }
        texts = await self._post(body)
        if len(texts) < want:
            body["n"] = 1
            extra = await asyncio.gather(*(self._post(body) for _ in range(want - len(texts))))
            texts += [t for batch in extra for t in batch]
        return texts[:want]

    async def _post(self, body: dict[str, Any]) -> list[str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        session = await self._get_session()
        try:
            async with session.post(self.url, json=body, headers=headers, timeout=self.timeout) as response:
                if response.status != 200:
                    detail = (await response.text())[:300]
                    raise LLMError(f"{self.url} answered {response.status}: {detail}")
                payload = await response.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise LLMError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        try:
            return [choice["message"]["content"] or "" for choice in payload["choices"]]
        except (KeyError, TypeError) as exc:
            raise LLMError(f"{self.url}: not a chat completion: {str(payload)[:300]}") from exc

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._owns_session and not self._session.closed:
            await self._session.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
