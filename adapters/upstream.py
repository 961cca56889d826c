"""Client for the upstream LLM, over one aiohttp session: any base URL speaking chat completions,
the OpenAI Responses API or the Anthropic Messages API (``upstream.api``)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from middleware.errors import UpstreamError
from middleware.settings import UpstreamSettings
from middleware.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SSEEvent, SSEParser

log = logging.getLogger(__name__)

# Client headers passed on to the upstream (Authorization only when no upstream key is set).
_FORWARDED_HEADERS = ("authorization", "openai-organization", "openai-project", "x-request-id")
# More of them for an upstream speaking the Anthropic Messages API (x-api-key as Authorization is).
_MESSAGES_HEADERS = ("x-api-key", "anthropic-version", "anthropic-beta")
ANTHROPIC_VERSION = "2023-06-01"
"""Sent to a Messages upstream when the client named no version (the API requires one)."""
API_PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
"""Where each upstream API (``upstream.api``) answers, under the base URL."""


@dataclass
class UpstreamStream:
    """An open streamed response: iterate ``events()`` or ``chunks()`` (once); always ``close()``."""

    response: aiohttp.ClientResponse
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, one item per socket read (off mode's byte pipe)."""
        try:
            async for chunk in self.response.content.iter_any():
                yield chunk
        except TimeoutError as exc:
            raise UpstreamError("upstream stopped sending (read timeout)", 504, kind="timeout") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"upstream connection failed mid-stream: {exc}", 502, kind="disconnect") from exc

    async def events(self) -> AsyncIterator[SSEEvent]:
        parser = SSEParser(self.max_event_bytes)
        async for chunk in self.chunks():
            try:
                events = parser.feed(chunk)
            except EventTooLarge as exc:
                raise event_too_large(exc) from exc
            for event in events:
                yield event
        for event in parser.flush():
            yield event

    def close(self) -> None:
        self.response.close()


class UpstreamClient:
    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self.base_url = settings.url.rstrip("/")
        self.path = API_PATHS[settings.api]
        self._session: aiohttp.ClientSession | None = None
        self._parent: UpstreamClient | None = None
        self._siblings: dict[str, UpstreamClient] = {}

    def speaking(self, api: str) -> UpstreamClient:
        """The same upstream (base URL, key, timeouts, connection pool) spoken to in ``api``:
        for an upstream that speaks several (the demo LLM speaks all three)."""
        if api == self.settings.api:
            return self
        if api not in self._siblings:
            sibling = UpstreamClient(self.settings.model_copy(update={"api": api}))
            sibling._parent = self
            self._siblings[api] = sibling
        return self._siblings[api]

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._parent is not None:
            return self._parent.session
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(
                total=None, connect=self.settings.connect_timeout_s, sock_read=self.settings.read_timeout_s
            )
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(timeout=timeout, connector=connector, auto_decompress=True)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def headers(self, client_headers: Mapping[str, str]) -> dict[str, str]:
        out = {"Content-Type": "application/json"}
        for name in _FORWARDED_HEADERS:
            if name in client_headers and not (name == "authorization" and self.settings.api_key):
                out[name] = client_headers[name]
        if self.settings.api == "messages":
            self._messages_headers(client_headers, out)
        elif self.settings.api_key:
            out["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
        return out

    def _messages_headers(self, client_headers: Mapping[str, str], out: dict[str, str]) -> None:
        """An Anthropic upstream's key goes as ``x-api-key``, with an ``anthropic-version``."""
        for name in _MESSAGES_HEADERS:
            if name in client_headers and not (name == "x-api-key" and self.settings.api_key):
                out[name] = client_headers[name]
        if self.settings.api_key:
            out["x-api-key"] = self.settings.api_key.get_secret_value()
        out.setdefault("anthropic-version", ANTHROPIC_VERSION)

    async def _post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> aiohttp.ClientResponse:
        try:  # a redirect is not followed: it could point anywhere, loopback included
            response = await self.session.post(
                f"{self.base_url}{path}", data=json.dumps(body), headers=headers, allow_redirects=False
            )
        except TimeoutError as exc:
            raise UpstreamError("upstream did not answer in time", 504, kind="timeout") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"cannot reach upstream: {exc}", 502, kind="connect") from exc
        if 300 <= response.status < 400:
            response.release()
            raise _redirect_error(response.status)
        if response.status >= 400:
            raise await _error_from_response(response)
        return response

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream:
        response = await self._post(self.path, body, self.headers(client_headers))
        return UpstreamStream(response, self.settings.max_event_bytes)

    async def complete(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> tuple[bytes, dict[str, Any]]:
        """A non-stream completion: the raw body and its decoded JSON."""
        response = await self._post(self.path, body, self.headers(client_headers))
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise UpstreamError(f"upstream failed while sending its answer: {exc}", 502, kind="disconnect") from exc
        finally:
            response.release()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UpstreamError("upstream answered with invalid JSON", 502, kind="invalid") from exc
        if not isinstance(data, dict):
            raise UpstreamError("upstream answered with a non-object JSON body", 502, kind="invalid")
        return raw, data

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        """Forward a GET (e.g. /models): status, body and content type. Redirects are not
        followed; an error status raises ``UpstreamError`` (its body summarised unless it is
        an OpenAI-style error)."""
        try:
            resp = await self.session.get(
                f"{self.base_url}{path}", headers=self.headers(client_headers), allow_redirects=False
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise UpstreamError(f"cannot reach upstream: {exc}", 502, kind="connect") from exc
        if 300 <= resp.status < 400:
            resp.release()
            raise _redirect_error(resp.status)
        if resp.status >= 400:
            raise await _error_from_response(resp)
        try:
            return resp.status, await resp.read(), resp.headers.get("Content-Type", "application/json")
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise UpstreamError(f"upstream failed while sending its answer: {exc}", 502, kind="disconnect") from exc
        finally:
            resp.release()


def event_too_large(exc: EventTooLarge) -> UpstreamError:
    return UpstreamError(f"upstream sent an event larger than {exc.limit} bytes", 502, kind="event_too_large")


def _redirect_error(status: int) -> UpstreamError:
    return UpstreamError(
        f"upstream answered with a redirect (HTTP {status}); redirects are not followed: "
        "set upstream.url to the final address", 502, kind="redirect",
    )


async def _error_from_response(response: aiohttp.ClientResponse) -> UpstreamError:
    try:
        raw = await response.read()
    finally:
        response.release()
    body: Any = None
    message = f"upstream returned HTTP {response.status}"
    try:
        body = json.loads(raw)
    except ValueError:
        pass
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message") or message)
    else:  # not an OpenAI error: summarised, never echoed (it may be a proxy's page or a traceback)
        body = None
        content_type = response.headers.get("Content-Type", "no content type").split(";")[0]
        message = f"{message} ({content_type}, {len(raw)} bytes)"
        log.warning("%s", message)
    kind = "rate_limited" if response.status == 429 else "status"
    return UpstreamError(message, response.status, body, kind=kind, retry_after=response.headers.get("Retry-After"))
