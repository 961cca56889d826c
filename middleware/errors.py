"""Errors that cross module boundaries, and the OpenAI error format they are rendered in
(``ErrorBody``, part of every endpoint family's wire protocol)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from middleware.redaction import redact


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """The OpenAI error format, for every error the proxy reports (HTTP body, SSE event,
    websocket message), but those of ``/v1/messages`` (``messages.protocol.AnthropicErrorBody``)."""

    model_config = ConfigDict(extra="forbid")
    error: ErrorDetail


def error_body(
    message: str, type_: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An ``ErrorBody`` as JSON-ready data."""
    return ErrorBody(error=ErrorDetail(message=message, type=type_, param=param, code=code)).model_dump()


class RequestError(Exception):
    """A client error (4xx)."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type_: str = "invalid_request_error",
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code
        self.type = type_
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return error_body(str(self), self.type, self.param, self.code)


class UpstreamError(Exception):
    """The upstream failed: an error status, a broken connection, a timeout or bad data.
    ``kind`` is a metric label: status, rate_limited, connect, timeout, disconnect, invalid."""

    def __init__(
        self,
        message: str,
        status: int = 502,
        body: Any = None,
        kind: str = "status",
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.kind = kind
        self.retry_after = retry_after

    def client_body(self) -> dict[str, Any]:
        """The upstream's own OpenAI-style error body when it sent one, else ours; every
        configured key cut out (``middleware.redaction``): a gateway may echo the
        Authorization header it received."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return redact(self.body)
        return error_body(redact(str(self)), "upstream_error", None, self.kind)
