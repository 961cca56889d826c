"""The Messages API's wire models as the proxy reads and writes them. Only the request fields
the proxy uses are validated; the rest is forwarded unchanged."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from middleware.chat.protocol import CheckedRequest, CompletionFactcheck, FactcheckEvent


class AnthropicMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class MessagesRequest(CheckedRequest):
    """``POST /v1/messages``: the Anthropic request plus the optional ``factcheck`` field."""

    model: str
    messages: list[AnthropicMessage] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[dict[str, Any]] | None = None


class TextDelta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text_delta"] = "text_delta"
    text: str


class MessagesTextDelta(BaseModel):
    """Correct mode: a sentence's text, as the upstream's text deltas are."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: TextDelta


class MessagesFactcheck(BaseModel):
    """An extension event (``event: factcheck``) carrying a ``factcheck`` event: a sentence's
    report, or the summary (before ``message_stop``)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["factcheck"] = "factcheck"
    factcheck: FactcheckEvent


class AnthropicError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str
    message: str


class AnthropicErrorBody(BaseModel):
    """The Anthropic error format: every error of ``/v1/messages`` (HTTP body, ``error`` event)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["error"] = "error"
    error: AnthropicError


class MessageObject(BaseModel):
    """A non-stream message: the upstream's as it came, plus ``factcheck`` in annotate and
    correct mode (correct mode also corrects its text)."""

    model_config = ConfigDict(extra="allow")
    factcheck: CompletionFactcheck | None = None


_TYPE_BY_STATUS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def anthropic_error_body(body: Any, status: int) -> dict[str, Any]:
    """An error body (OpenAI's, or already Anthropic's) in the Anthropic error format."""
    if isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict):
        return body
    error = body.get("error") if isinstance(body, dict) else None
    message = str(error.get("message")) if isinstance(error, dict) else "error"
    kind = _TYPE_BY_STATUS.get(status, "invalid_request_error" if status < 500 else "api_error")
    return AnthropicErrorBody(error=AnthropicError(type=kind, message=message)).model_dump()


WIRE_MODELS: tuple[type[BaseModel], ...] = (
    MessagesRequest, MessagesTextDelta, MessagesFactcheck, AnthropicErrorBody, MessageObject)
