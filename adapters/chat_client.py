"""A small OpenAI-compatible chat client on aiohttp, used by every ``llm`` backend of the
pipeline (CQGen, verification, decontextualisation, editing). It implements
``middleware.pipeline.prompts.ChatModel``. Prompts fence untrusted text themselves
(``middleware.pipeline.prompts.fence``); this client only moves messages.

Its session is the guarded outbound client's (``adapters.http``): a redirect is never followed
(every call is a POST that may carry the server's key: a same-origin 307 would re-send it),
the environment's proxies are not read unless configured (``outbound.trust_env``), the answer
is read up to ``outbound.max_response_bytes``, and its key is cut out of every error."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp

from adapters.http import MAX_ERROR_BODY_BYTES, OutboundClient, RedirectRefused, failure_reason, read_capped
from middleware.redaction import redact, register_secrets

log = logging.getLogger(__name__)

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024


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
        trust_env: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        register_secrets(api_key)
        self.model = model
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.n = n
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_response_bytes = max_response_bytes
        self.client = OutboundClient(timeout=self.timeout, trust_env=trust_env)

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
            "trust_env": settings.outbound.trust_env,
            "max_response_bytes": settings.outbound.max_response_bytes,
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
        try:
            async with await self.client.send("POST", self.url, json=body, headers=headers, credentials=True) as response:
                if response.status != 200:
                    detail, _ = await read_capped(response, MAX_ERROR_BODY_BYTES)
                    text = redact(detail.decode("utf-8", errors="replace")[:300], [self.api_key])
                    raise LLMError(f"{self.url} answered {response.status}: {text}")
                raw, truncated = await read_capped(response, self.max_response_bytes)
        except RedirectRefused as exc:
            raise LLMError(f"{self.url} answered a redirect (HTTP {exc.status}); redirects are not followed: "
                           "set pipeline.llm_url to the final address") from exc
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise LLMError(f"{self.url}: {failure_reason(exc)}") from exc
        if truncated:
            raise LLMError(f"{self.url}: answer larger than {self.max_response_bytes} bytes (outbound.max_response_bytes)")
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise LLMError(f"{self.url}: answer is not JSON") from exc
        try:
            return [choice["message"]["content"] or "" for choice in payload["choices"]]
        except (KeyError, TypeError) as exc:
            raise LLMError(f"{self.url}: not a chat completion: {redact(str(payload)[:300], [self.api_key])}") from exc

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
