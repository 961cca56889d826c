"""``POST /v1/messages`` over HTTP (``middleware.chat.face_router`` does the relaying); its
errors leave in the Anthropic error format (``error_format``, used by the server's error
middleware)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from middleware.chat.face_router import serve_face
from middleware.messages.protocol import anthropic_error_body
from middleware.messages.serving import MessagesService

MESSAGES_PATH = "/v1/messages"
MESSAGES_KEY = web.AppKey("messages_service", MessagesService)


def add_messages_routes(app: web.Application, service: MessagesService) -> None:
    app[MESSAGES_KEY] = service
    app.router.add_post(MESSAGES_PATH, create_message)


async def create_message(request: web.Request) -> web.StreamResponse:
    service = request.app[MESSAGES_KEY]
    return await serve_face(request, service)


def error_format(body: dict[str, Any], status: int) -> dict[str, Any]:
    return anthropic_error_body(body, status)
