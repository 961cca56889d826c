"""Client for the upstream LLM, over one session of the guarded outbound client
(``adapters.http``: no redirect followed, no proxy from the environment unless
``outbound.trust_env``, capped headers and bodies): any base URL speaking chat completions, the
OpenAI Responses API or the Anthropic Messages API (``upstream.api``).

Nothing secret goes back to the client: an upstream's error body (a misconfigured gateway may
echo the Authorization or x-api-key header it received) and its answers, streamed or not, have
every configured key cut out (``middleware.redaction``), the key this request sent included,
however the answer spells it (``\\u`` escapes a JSON parser decodes to the key) and however
the reads split a streamed event; a failure to connect is described without the upstream's
address."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from adapters.http import MAX_ERROR_BODY_BYTES, OutboundClient, RedirectRefused, failure_reason, read_capped
from middleware.errors import UpstreamError
from middleware.redaction import SECRETS, Redactor, redact, register_secrets, sent_credentials
from middleware.settings import UpstreamSettings
from middleware.sse import DEFAULT_MAX_EVENT_BYTES, EventCutter, EventTooLarge, SSEEvent, SSEParser

log = logging.getLogger(__name__)

# Client headers passed on to the upstream (Authorization only when no upstream key is set).
_FORWARDED_HEADERS = ("authorization", "openai-organization", "openai-project", "x-request-id")
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
# More of them for an upstream speaking the Anthropic Messages API (x-api-key as Authorization is).
_MESSAGES_HEADERS = ("x-api-key", "anthropic-version", "anthropic-beta")
ANTHROPIC_VERSION = "2023-06-01"
"""Sent to a Messages upstream when the client named no version (the API requires one)."""
API_PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
"""Where each upstream API (``upstream.api``) answers, under the base URL."""


@dataclass
class UpstreamStream:
    """An open streamed response: iterate ``events()`` or ``chunks()`` (once); always ``close()``.
    ``redactor``: the secrets cut out of it (every configured key and this request's own)."""

    response: aiohttp.ClientResponse
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    redactor: Redactor = SECRETS

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, one item per socket read (off mode's byte pipe).
        With secrets to cut out, an incomplete last event is held until its end arrives
        (``EventCutter``: a client's SSE parser could not use it before anyway), so that every
        secret in an event is cut out, however it is spelt and however the reads split it."""
        redactor = self.redactor
        cutter = EventCutter(self.max_event_bytes) if redactor else None
        try:
            async for read in self.response.content.iter_any():
                if cutter is None:
                    yield read
                elif whole := cutter.feed(read):
                    yield redactor.data(whole) if redactor.found_in(whole) else whole
            if cutter is not None and (rest := cutter.flush()):
                yield redactor.data(rest) if redactor.found_in(rest) else rest
        except EventTooLarge as exc:
            raise event_too_large(exc) from exc
        except TimeoutError as exc:
            raise UpstreamError("upstream stopped sending (read timeout)", 504, kind="timeout") from exc
        except aiohttp.ClientError as exc:
            log.warning("upstream connection failed mid-stream: %r", exc)
            raise UpstreamError(f"upstream connection failed mid-stream: {failure_reason(exc)}", 502,
                                kind="disconnect") from exc

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
    def __init__(self, settings: UpstreamSettings, *, trust_env: bool = False,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.settings = settings
        self.base_url = settings.url.rstrip("/")
        self.path = API_PATHS[settings.api]
        self.max_response_bytes = max_response_bytes
        register_secrets(settings.api_key)
        timeout = aiohttp.ClientTimeout(total=None, connect=settings.connect_timeout_s, sock_read=settings.read_timeout_s)
        # no guard and no redirects: the upstream is the operator's, and every request carries a key
        self.client = OutboundClient(timeout=timeout, trust_env=trust_env, limit=0, ttl_dns_cache=300)
        self._parent: UpstreamClient | None = None
        self._siblings: dict[str, UpstreamClient] = {}

    def speaking(self, api: str) -> UpstreamClient:
        """The same upstream (base URL, key, timeouts, connection pool) spoken to in ``api``:
        for an upstream that speaks several (the demo LLM speaks all three)."""
        if api == self.settings.api:
            return self
        if api not in self._siblings:
            sibling = UpstreamClient(self.settings.model_copy(update={"api": api}),
                                     max_response_bytes=self.max_response_bytes)
            sibling.client = self.client  # one session, one policy
            sibling._parent = self
            self._siblings[api] = sibling
        return self._siblings[api]

    @property
    def session(self) -> aiohttp.ClientSession:
        return self.client.session

    async def close(self) -> None:
        if self._parent is None:  # a sibling shares its parent's session
            await self.client.close()

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

    async def _send(self, method: str, path: str, headers: dict[str, str], **kwargs: Any) -> aiohttp.ClientResponse:
        """The upstream's answer to a request (an error status raises ``UpstreamError``). A
        redirect is never followed: it could point anywhere, loopback included, and would
        carry the key there."""
        try:
            response = await self.client.send(method, f"{self.base_url}{path}", headers=headers, credentials=True,
                                              **kwargs)
        except RedirectRefused as exc:
            raise _redirect_error(exc.status) from exc
        except TimeoutError as exc:
            raise UpstreamError("upstream did not answer in time", 504, kind="timeout") from exc
        except aiohttp.ClientError as exc:
            log.warning("cannot reach the upstream at %s: %s", self.base_url, exc)  # the address stays here
            raise UpstreamError(f"cannot reach upstream: {failure_reason(exc)}", 502, kind="connect") from exc
        if 300 <= response.status < 400:
            response.release()
            raise _redirect_error(response.status)
        if response.status >= 400:
            raise await _error_from_response(response, sent_credentials(headers))
        return response

    async def _post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> aiohttp.ClientResponse:
        return await self._send("POST", path, headers, data=json.dumps(body))

    async def _read(self, response: aiohttp.ClientResponse, redactor: Redactor) -> bytes:
        """A whole non-streamed answer, capped, with every secret of ``redactor`` cut out."""
        try:
            raw, truncated = await read_capped(response, self.max_response_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise UpstreamError(f"upstream failed while sending its answer: {failure_reason(exc)}", 502,
                                kind="disconnect") from exc
        finally:
            response.release()
        if truncated:
            raise UpstreamError(f"upstream answer larger than {self.max_response_bytes} bytes "
                                "(outbound.max_response_bytes)", 502, kind="too_large")
        return redactor.data(raw) if redactor and redactor.found_in(raw) else raw

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream:
        headers = self.headers(client_headers)
        response = await self._post(self.path, body, headers)
        return UpstreamStream(response, self.settings.max_event_bytes, redactor_for(headers))

    async def complete(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> tuple[bytes, dict[str, Any]]:
        """A non-stream completion: the raw body and its decoded JSON, each with every secret
        cut out (the JSON after decoding too: what annotate and correct mode re-serialise)."""
        headers = self.headers(client_headers)
        redactor = redactor_for(headers)
        raw = await self._read(await self._post(self.path, body, headers), redactor)
        try:
            data = redactor(json.loads(raw))
        except ValueError as exc:
            raise UpstreamError("upstream answered with invalid JSON", 502, kind="invalid") from exc
        if not isinstance(data, dict):
            raise UpstreamError("upstream answered with a non-object JSON body", 502, kind="invalid")
        return raw, data

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        """Forward a GET (e.g. /models): status, body and content type. Redirects are not
        followed; an error status raises ``UpstreamError`` (its body summarised unless it is
        an OpenAI-style error)."""
        headers = self.headers(client_headers)
        resp = await self._send("GET", path, headers)
        content_type = resp.headers.get("Content-Type", "application/json")
        return resp.status, await self._read(resp, redactor_for(headers)), content_type


def redactor_for(sent_headers: Mapping[str, str]) -> Redactor:
    """What an answer to a request sent with ``sent_headers`` must not echo: every configured
    key and the credentials the request carried (the client's own, when it was forwarded)."""
    return SECRETS.plus(sent_credentials(sent_headers))


def event_too_large(exc: EventTooLarge) -> UpstreamError:
    return UpstreamError(f"upstream sent an event larger than {exc.limit} bytes", 502, kind="event_too_large")


def _redirect_error(status: int) -> UpstreamError:
    return UpstreamError(
        f"upstream answered with a redirect (HTTP {status}); redirects are not followed: "
        "set upstream.url to the final address", 502, kind="redirect",
    )


async def _error_from_response(response: aiohttp.ClientResponse, sent: list[str] | None = None) -> UpstreamError:
    """The ``UpstreamError`` of an error status: an OpenAI- (or Anthropic-) style error body
    passed on with every configured key and ``sent`` (the credentials this request carried)
    cut out; anything else summarised."""
    try:
        raw, _ = await read_capped(response, MAX_ERROR_BODY_BYTES)
    except (TimeoutError, aiohttp.ClientError):
        raw = b""
    finally:
        response.release()
    body: Any = None
    message = f"upstream returned HTTP {response.status}"
    try:
        body = json.loads(raw)
    except ValueError:
        pass
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = redact(body, sent or [])
        message = str(body["error"].get("message") or message)
    else:  # not an OpenAI error: summarised, never echoed (it may be a proxy's page or a traceback)
        body = None
        content_type = response.headers.get("Content-Type", "no content type").split(";")[0]
        message = f"{message} ({content_type}, {len(raw)} bytes)"
        log.warning("%s", message)
    kind = "rate_limited" if response.status == 429 else "status"
    return UpstreamError(message, response.status, body, kind=kind, retry_after=response.headers.get("Retry-After"))
