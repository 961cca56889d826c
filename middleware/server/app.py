"""The aiohttp application: routes, error rendering, limits and auth.

``create_app`` is the composition root of the server: it builds the configured upstream
client and checker unless they are given (tests inject their own)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from middleware.checking import CheckRunner, NoChecker
from middleware.errors import RequestError, UpstreamError, error_body
from middleware.interfaces import Checker, Upstream
from middleware.metrics import REQUEST_ERRORS, exposition
from middleware.server.chat import (
    RUNNER_KEY,
    SETTINGS_KEY,
    STREAMS_KEY,
    UPSTREAM_KEY,
    StreamCounter,
    chat_completions,
    request_error_response,
    upstream_error_response,
    upstream_headers,
)
from middleware.server.limits import CLIENT_KEY, LIMITER_KEY, RateLimiter, client_id
from middleware.server.openapi import openapi_document
from middleware.server.ws import add_ws_routes
from middleware.settings import Settings

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Open without a proxy key: health, metrics, the API description and the UI's static files
# (the UI's websocket still needs the key, passed as ?api_key= since browsers cannot set headers).
_OPEN_PATHS = frozenset({"/healthz", "/metrics", "/openapi.json", "/", "/ui/app.js", "/ui/style.css"})


def build_checker(settings: Settings) -> Checker:
    """The configured checker: the fact-checking pipeline, or ``NoChecker`` for 'none'."""
    if settings.check.checker == "none":
        return NoChecker()
    from middleware.pipeline.assembly import build_pipeline_checker

    return build_pipeline_checker(settings)


def create_app(settings: Settings, checker: Checker | None = None, upstream: Upstream | None = None) -> web.Application:
    if upstream is None:
        from adapters.upstream import UpstreamClient

        upstream = UpstreamClient(settings.upstream)
    app = web.Application(
        client_max_size=settings.server.max_body_bytes,
        middlewares=[_error_middleware, _auth_middleware(settings), _stream_limit_middleware(settings)],
    )
    app[SETTINGS_KEY] = settings
    app[LIMITER_KEY] = RateLimiter(settings.server.rate_limit_per_minute)
    app[UPSTREAM_KEY] = upstream
    app[STREAMS_KEY] = StreamCounter()
    app[RUNNER_KEY] = CheckRunner(checker if checker is not None else build_checker(settings), settings.check)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/openapi.json", _openapi)
    add_ws_routes(app)
    from adapters.ui import add_ui_routes

    add_ui_routes(app)
    app.on_cleanup.append(_close_upstream)
    return app


async def _close_upstream(app: web.Application) -> None:
    await app[UPSTREAM_KEY].close()


async def _models(request: web.Request) -> web.Response:
    status, body, content_type = await request.app[UPSTREAM_KEY].get("/models", upstream_headers(request))
    return web.Response(status=status, body=body, content_type=content_type.split(";")[0])


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def _metrics(request: web.Request) -> web.Response:
    response = web.Response(body=exposition())
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


@web.middleware
async def _error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves in the OpenAI error format."""
    try:
        return await handler(request)
    except RequestError as exc:
        REQUEST_ERRORS.labels(status=str(exc.status)).inc()
        return request_error_response(exc)
    except UpstreamError as exc:
        return upstream_error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        REQUEST_ERRORS.labels(status="413").inc()
        return web.json_response(error_body(f"request body too large: {exc.text}", code="body_too_large"), status=413)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        REQUEST_ERRORS.labels(status=str(exc.status)).inc()
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None  # 405 must list methods
        return web.json_response(error_body(exc.reason, code=str(exc.status)), status=exc.status, headers=allow)


def _auth_middleware(settings: Settings) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Proxy API keys (separate from upstream keys), compared in constant time, and the rate
    limit per key (per client address without keys). Keys are never logged."""
    keys = [key.get_secret_value().encode() for key in settings.server.api_keys]

    @web.middleware
    async def check_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in _OPEN_PATHS:
            return await handler(request)
        if not keys:
            request.app[LIMITER_KEY].check(client_id(request))
            return await handler(request)
        presented = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not presented and request.path == "/v1/ws":
            presented = request.query.get("api_key", "")
        presented = presented.encode()
        matched = -1
        for index, key in enumerate(keys):  # no early exit: every key is compared
            if hmac.compare_digest(presented, key):
                matched = index
        if matched < 0:
            raise RequestError("invalid or missing proxy API key", status=401, code="invalid_api_key")
        request[CLIENT_KEY] = f"key:{matched}"
        request.app[LIMITER_KEY].check(request[CLIENT_KEY])
        return await handler(request)

    return check_key


def _stream_limit_middleware(settings: Settings) -> Callable[..., Awaitable[web.StreamResponse]]:
    limit = settings.server.max_concurrent_streams

    @web.middleware
    async def limit_streams(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/v1/chat/completions" and request.app[STREAMS_KEY].active >= limit:
            response = web.json_response(
                error_body("too many concurrent streams; retry shortly", "rate_limit_error", None, "too_many_streams"),
                status=429,
            )
            response.headers["Retry-After"] = "1"
            return response
        return await handler(request)

    return limit_streams
