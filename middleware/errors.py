"""Errors that cross module boundaries, each rendered in the OpenAI error format."""

from __future__ import annotations

from typing import Any

from middleware.chat.protocol import error_body
from middleware.redaction import redact


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
