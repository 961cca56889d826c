"""The OpenAPI 3.1 document of the proxy's endpoints, served at ``/openapi.json``.

Every schema comes from the pydantic wire models of ``middleware.chat.protocol``,
``middleware.responses.protocol`` and ``middleware.messages.protocol``, requests
and responses alike, so the document cannot drift from what the server reads and writes."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from middleware.chat.protocol import WIRE_MODELS
from middleware.messages.protocol import WIRE_MODELS as MESSAGES_MODELS
from middleware.responses.protocol import WIRE_MODELS as RESPONSES_MODELS


# OpenAPI 3.1 has the schema of an event stream describe one event.
_SSE_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {"type": "string", "description": "a chat.completion.chunk as JSON (the upstream's, or the proxy's own: "
                 "#/components/schemas/ChatChunk, whose extension chunks add a top-level 'factcheck' event), an "
                 "error object (#/components/schemas/ErrorBody), or [DONE]"},
        "event": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error_response(description: str, body: str = "ErrorBody") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(body)}}}


def _typed_event(api: str, events: list[str]) -> dict[str, Any]:
    """One event of a typed-event stream (the Responses and Messages APIs)."""
    return {"type": "object", "required": ["event", "data"], "properties": {
        "event": {"type": "string", "description": "the data's type"},
        "data": {"type": "string", "description": f"an event of the {api} as JSON: the upstream's, or the proxy's own "
                 "(" + ", ".join(f"#/components/schemas/{name}" for name in events) + ")"}}}


_MODE_HEADER = {"name": "X-Factcheck-Mode", "in": "header", "required": False,
                "schema": {"type": "string", "enum": ["off", "annotate", "correct"]}}


def _face(operation: str, request: str, answer: str, stream_event: dict[str, Any], errors: dict[str, Any]
          ) -> dict[str, Any]:
    return {"post": {
        "operationId": operation, "parameters": [_MODE_HEADER],
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(request)}}},
        "responses": {"200": {"description": "the answer (JSON) or a stream of its events (SSE)",
                              "content": {"application/json": {"schema": _ref(answer)},
                                          "text/event-stream": {"schema": stream_event}}},
                      **errors}}}


def _schemas() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    out: dict[str, Any] = {}
    for model in WIRE_MODELS + RESPONSES_MODELS + MESSAGES_MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    out.update(defs)
    passage = out["Passage"]  # on the wire a passage's text comes once per response (chat.wire.WireReports)
    passage["required"] = [name for name in passage["required"] if name != "text"]
    passage["properties"]["text"]["description"] = (
        "the passage's text; absent when this response already sent the passage with the same provider and id"
    )
    return out


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    chat_errors = {
        "400": _error_response("invalid request"),
        "401": _error_response("missing or invalid proxy API key"),
        "413": _error_response("request body too large"),
        "429": _error_response("too many concurrent streams or rate limited"),
        "502": _error_response("upstream failure"),
    }
    messages_errors = {status: _error_response(str(error["description"]), "AnthropicErrorBody")
                       for status, error in chat_errors.items()}
    return {
        "openapi": "3.1.0",
        "info": {"title": "factcheck proxy", "version": "0.1.0",
                 "description": "Chat completions, the OpenAI Responses API and the Anthropic "
                 "Messages API with streaming fact-checking."},
        "paths": {
            "/v1/chat/completions": {
                "post": {
                    "operationId": "createChatCompletion",
                    "parameters": [{"name": "X-Factcheck-Mode", "in": "header", "required": False,
                                    "schema": {"type": "string", "enum": ["off", "annotate", "correct"]}}],
                    "requestBody": {"required": True,
                                    "content": {"application/json": {"schema": _ref("ChatRequest")}}},
                    "responses": {
                        "200": {"description": "a chat completion (JSON) or a stream of chunks (SSE)",
                                "content": {"application/json": {"schema": _ref("ChatCompletion")},
                                            "text/event-stream": {"schema": _SSE_EVENT}}},
                        **chat_errors,
                    },
                }
            },
            "/v1/responses": _face("createResponse", "ResponsesRequest", "ResponseObject", _typed_event(
                "OpenAI Responses API", ["ResponseTextDelta", "ResponseFactcheck", "ResponseErrorEvent"]), chat_errors),
            "/v1/messages": _face("createMessage", "MessagesRequest", "MessageObject", _typed_event(
                "Anthropic Messages API", ["MessagesTextDelta", "MessagesFactcheck", "AnthropicErrorBody"]),
                messages_errors),
            "/v1/models": {"get": {"operationId": "listModels", "responses": {
                "200": {"description": "the upstream's model list",
                        "content": {"application/json": {"schema": {"type": "object"}}}},
                "502": _error_response("upstream failure")}}},
            "/healthz": {"get": {"operationId": "health", "responses": {
                "200": {"description": "alive", "content": {"application/json": {"schema": _ref("Health")}}}}}},
            "/metrics": {"get": {"operationId": "metrics", "responses": {
                "200": {"description": "Prometheus metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        },
        "components": {"schemas": _schemas()},
    }
