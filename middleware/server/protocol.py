"""Wire schema of the chat completions endpoint: what the proxy reads from a request.

Only the fields the proxy uses are validated; every other field is forwarded unchanged.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from middleware.errors import RequestError
from middleware.types import Mode


class ContextDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    title: str | None = None
    source: str | None = None


class FactcheckOptions(BaseModel):
    """The request's ``factcheck`` field (stripped before forwarding). A bare string is a mode."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode | None = None
    context: list[ContextDocument | str] = Field(default_factory=list, description="documents to check against")
    context_policy: Literal["only", "first", "among"] | None = None
    memory_check: StrictBool = False


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[Any] | None = None

    def text(self) -> str:
        """The message's text: a string, or the text parts of a multi-part content list."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "\n".join(
                part.get("text", "") for part in self.content if isinstance(part, dict) and part.get("type") == "text"
            )
        return ""


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    stream: StrictBool = False
    factcheck: FactcheckOptions | None = None

    @field_validator("factcheck", mode="before")
    @classmethod
    def _mode_shorthand(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    def last_user_message(self) -> str | None:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text()
        return None


def parse_chat_request(raw: bytes, max_messages: int) -> tuple[ChatRequest, dict[str, Any]]:
    """Validate a request body; return the parsed request and the body to forward upstream
    (the original JSON object minus ``factcheck``)."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise RequestError(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    except RecursionError as exc:  # a few KB of '[' would otherwise be a 500
        raise RequestError("request body is nested too deeply", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object", code="invalid_request")
    if isinstance(body.get("messages"), list) and len(body["messages"]) > max_messages:
        raise RequestError(f"too many messages: at most {max_messages}", param="messages", code="too_many_messages")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise RequestError(f"invalid field {param}: {first['msg']}", param=param, code="invalid_value") from exc
    forward = {key: value for key, value in body.items() if key != "factcheck"}
    return request, forward


def resolve_mode(request: ChatRequest, header: str | None, default: Mode) -> Mode:
    """Body field wins over the ``X-Factcheck-Mode`` header, which wins over the default."""
    if request.factcheck is not None and request.factcheck.mode is not None:
        return request.factcheck.mode
    if header:
        try:
            return Mode(header.strip().lower())
        except ValueError as exc:
            raise RequestError(
                f"unknown X-Factcheck-Mode {header!r}: use off, annotate or correct",
                param="X-Factcheck-Mode",
                code="invalid_mode",
            ) from exc
    return default
