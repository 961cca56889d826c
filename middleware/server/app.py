"""The aiohttp application: routes, error rendering, limits and auth. It is given its checker
and upstream ready-made (``middleware.composition.build_app`` builds the configured ones)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from middleware.chat.api_router import CHAT_PATH, OUTCOME_KEY, SERVICE_KEY, add_chat_routes, upstream_headers
from middleware.chat.protocol import Health
from middleware.errors import error_body
from middleware.chat.serving import ChatService, too_many_streams
from middleware.chat.ws_router import add_ws_routes
from middleware.messages.api_router import MESSAGES_PATH, add_messages_routes, error_format
from middleware.messages.serving import MessagesService
from middleware.responses.api_router import RESPONSES_PATH, add_responses_routes
from middleware.responses.serving import ResponsesService
from middleware.checking import CheckRunner
from middleware.errors import RequestError, UpstreamError
from middleware.interfaces import Checker, MultiApiUpstream, Upstream
from middleware.metrics import HTTP_REQUESTS, REQUEST_ERRORS, UPSTREAM_ERRORS, exposition
from middleware.redaction import register_settings
from middleware.chat.hosts import ALLOWED_HOSTS_KEY, AllowedHosts
from middleware.chat.limits import CLIENT_KEY, LIMITER_KEY, client_id, make_limiter
from middleware.server.http_errors import http_refusal
from middleware.server.openapi import openapi_document
from middleware.settings import Settings
from middleware.translation.upstream import upstream_for

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Open without a proxy key: health, metrics and the API description, and what ``create_app``'s
# caller opens (the UI's page and static files: their websocket still needs the key, passed as
# ?api_key= since browsers cannot set headers).
_OPEN_PATHS = frozenset({"/healthz", "/metrics", "/openapi.json"})


def create_app(
    settings: Settings, checker: Checker, upstream: Upstream,
    add_routes: Callable[[web.Application], None] | None = None, open_paths: frozenset[str] = frozenset(),
    checks_in_workers: bool = False,
) -> web.Application:
    """The proxy's routes over ``checker`` and ``upstream``; ``add_routes`` adds more (the UI),
    of which ``open_paths`` need no proxy key; ``checks_in_workers``: ``checker`` is the check
    workers' pool. Every key ``settings`` configures is registered for redaction
    (``middleware.redaction``)."""
    register_settings(settings)
    app = web.Application(
        client_max_size=settings.server.max_body_bytes,
        middlewares=[_count_middleware, _messages_error_format, _error_middleware, _host_middleware,
                     _auth_middleware(settings, _OPEN_PATHS | open_paths),
                     _stream_limit_middleware],
    )
    app[ALLOWED_HOSTS_KEY] = AllowedHosts.for_server(settings.server)
    app[LIMITER_KEY] = make_limiter(settings)
    runner = CheckRunner(checker, settings.check, in_workers=checks_in_workers)
    chat = ChatService(settings, upstream_for(upstream, settings.upstream.api, "chat"), runner,
                       speaking=_speaking(upstream))
    add_chat_routes(app, chat)
    add_responses_routes(app, ResponsesService(chat, upstream))
    add_messages_routes(app, MessagesService(chat, upstream))
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/openapi.json", _openapi)
    add_ws_routes(app)
    if add_routes is not None:
        add_routes(app)
    app.on_cleanup.append(_close_clients)
    return app


def _speaking(upstream: Upstream) -> Callable[[str], Upstream] | None:
    """For an upstream that speaks several APIs: it as a chat upstream, spoken to in one of them."""
    if not isinstance(upstream, MultiApiUpstream):
        return None
    return lambda api: upstream_for(upstream.speaking(api), api, "chat")


async def _close_clients(app: web.Application) -> None:
    app[SERVICE_KEY].cutter.close()
    await app[SERVICE_KEY].upstream.close()
    await app[LIMITER_KEY].aclose()


async def _models(request: web.Request) -> web.Response:
    status, body, content_type = await request.app[SERVICE_KEY].upstream.get("/models", upstream_headers(request))
    return web.Response(status=status, body=body, content_type=content_type.split(";")[0])


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response(Health().model_dump())


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def _metrics(request: web.Request) -> web.Response:
    response = web.Response(body=exposition())
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


_COUNTED = {CHAT_PATH: "chat", RESPONSES_PATH: "responses", MESSAGES_PATH: "messages", "/v1/models": "models"}
_STREAMING_PATHS = frozenset({CHAT_PATH, RESPONSES_PATH, MESSAGES_PATH})
"""Endpoints counted in ``factcheck_http_requests_total`` (the websocket counts each answer)."""


@web.middleware
async def _count_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count each proxied request once, by how it ended: the denominator and numerator of the
    dashboard's error rate, which therefore stays within 0..100%. A client that goes away
    before its answer is complete (a closed tab, a cancelled SDK call) is ``client_gone``, not
    a failure of the proxy: the dashboard leaves it out, and it never logs a traceback."""
    endpoint = _COUNTED.get(request.path)
    if endpoint is None:
        return await _quiet_when_gone(request, handler)
    outcome = "internal"
    try:
        response = await _quiet_when_gone(request, handler)
        outcome = request.get(OUTCOME_KEY) or ("ok" if response.status < 400 else "internal")
        return response
    except asyncio.CancelledError:  # aiohttp cancels the handler of a connection that closed
        outcome = "client_gone" if client_gone(request) else "internal"
        raise
    finally:
        HTTP_REQUESTS.labels(endpoint=endpoint, outcome=outcome).inc()


def client_gone(request: web.Request) -> bool:
    """The request's connection is closed or closing: its client went away."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _quiet_when_gone(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A write to (or read from) a connection the client closed raises ``ConnectionResetError``
    ('Cannot write to closing transport'); aiohttp would log it as an ERROR with a traceback
    and try a 500 on the dead connection. It is an ordinary disconnect: one INFO line, and an
    answer that is never sent."""
    try:
        return await handler(request)
    except ConnectionResetError:
        if not client_gone(request):
            raise
        request[OUTCOME_KEY] = "client_gone"
        log.info("client went away before its answer was complete (%s %s)", request.method, request.path)
        return web.Response(status=499, reason="Client Closed Request")  # never reaches anyone


@web.middleware
async def _messages_error_format(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``/v1/messages`` answers its errors in the Anthropic error format, whatever made them."""
    response = await handler(request)
    if request.path != MESSAGES_PATH or response.status < 400 or not isinstance(response, web.Response):
        return response
    if response.content_type != "application/json" or not isinstance(response.body, bytes):
        return response
    response.body = json.dumps(error_format(json.loads(response.body), response.status)).encode()
    return response


@web.middleware
async def _error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves in the OpenAI error format."""
    try:
        return await handler(request)
    except RequestError as exc:
        REQUEST_ERRORS.labels(status=str(exc.status)).inc()
        request[OUTCOME_KEY] = "refused"
        return request_error_response(exc)
    except UpstreamError as exc:
        request[OUTCOME_KEY] = "upstream_error"
        return upstream_error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        REQUEST_ERRORS.labels(status="413").inc()
        request[OUTCOME_KEY] = "refused"
        return web.json_response(error_body(f"request body too large: {exc.text}", code="body_too_large"), status=413)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        REQUEST_ERRORS.labels(status=str(exc.status)).inc()
        request[OUTCOME_KEY] = "refused"
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None  # 405 must list methods
        return web.json_response(error_body(exc.reason, code=str(exc.status)), status=exc.status, headers=allow)
    except Exception as exc:
        refusal = http_refusal(exc)  # a body aiohttp could not read: undecodable, malformed chunks
        if refusal is None:
            raise
        REQUEST_ERRORS.labels(status=str(refusal.status)).inc()
        request[OUTCOME_KEY] = "refused"
        response = request_error_response(refusal)
        response.force_close()
        return response


@web.middleware
async def _host_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Only the hosts of ``server.allowed_hosts`` are answered (``middleware.chat.hosts``)."""
    if not request.app[ALLOWED_HOSTS_KEY].allows_header(request.headers.get("Host")):
        raise RequestError("the Host header names a host this server does not answer for (server.allowed_hosts)",
                           param="Host", code="host_not_allowed")
    return await handler(request)


def _auth_middleware(settings: Settings, open_paths: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Proxy API keys (separate from upstream keys), compared in constant time, and the rate
    limit per key (per client address without keys); ``open_paths`` need no key. Keys are never logged."""
    keys = [key.get_secret_value().encode() for key in settings.server.api_keys]

    @web.middleware
    async def check_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        if not keys:
            await request.app[LIMITER_KEY].check(client_id(request))
            return await handler(request)
        presented = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not presented and request.path == MESSAGES_PATH:  # Anthropic clients send their key as x-api-key
            presented = request.headers.get("x-api-key", "").strip()
        if not presented and request.path == "/v1/ws":
            presented = request.query.get("api_key", "")
        presented_bytes = presented.encode()
        matched = -1
        for index, key in enumerate(keys):  # no early exit: every key is compared
            if hmac.compare_digest(presented_bytes, key):
                matched = index
        if matched < 0:
            raise RequestError("invalid or missing proxy API key", status=401, code="invalid_api_key")
        request[CLIENT_KEY] = f"key:{matched}"
        await request.app[LIMITER_KEY].check(request[CLIENT_KEY])
        return await handler(request)

    return check_key


@web.middleware
async def _stream_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a chat request at once when the stream limit is full (before reading its body)."""
    if request.path in _STREAMING_PATHS and request.app[SERVICE_KEY].streams.full:
        raise too_many_streams()
    return await handler(request)


def upstream_error_response(exc: UpstreamError) -> web.Response:
    UPSTREAM_ERRORS.labels(kind=exc.kind).inc()
    status = exc.status if 400 <= exc.status < 600 else 502
    response = web.json_response(exc.client_body(), status=status)
    if exc.retry_after:
        response.headers["Retry-After"] = exc.retry_after
    return response


def request_error_response(exc: RequestError) -> web.Response:
    response = web.json_response(exc.body(), status=exc.status)
    if exc.retry_after:
        response.headers["Retry-After"] = exc.retry_after
    return response
