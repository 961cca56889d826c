"""``POST /v1/responses`` over HTTP (``middleware.chat.face_router`` does the relaying)."""

from __future__ import annotations

from aiohttp import web

from middleware.chat.face_router import serve_face
from middleware.responses.serving import ResponsesService

RESPONSES_PATH = "/v1/responses"
RESPONSES_KEY = web.AppKey("responses_service", ResponsesService)


def add_responses_routes(app: web.Application, service: ResponsesService) -> None:
    app[RESPONSES_KEY] = service
    app.router.add_post(RESPONSES_PATH, create_response)


async def create_response(request: web.Request) -> web.StreamResponse:
    service = request.app[RESPONSES_KEY]
    return await serve_face(request, service)
