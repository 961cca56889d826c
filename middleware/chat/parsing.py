"""Reading a chat completions body into the protocol's models: JSON hygiene (depth, lone
surrogates), message limits, validation errors in the OpenAI error format, and the mode."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from middleware.chat.protocol import ChatRequest
from middleware.errors import RequestError
from middleware.types import Mode

DEFAULT_MAX_DEPTH = 64


def load_json(raw: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "request body") -> Any:
    """``raw`` decoded as JSON, refused with a ``RequestError`` when it is not JSON, nests
    deeper than ``max_depth`` or holds a lone surrogate (``"\\ud800"``: valid JSON, but no
    text; it would fail later, when the proxy encodes what it took from it)."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise RequestError(f"{what} is not valid JSON: {json_problem(exc)}", code="invalid_json") from exc
    except RecursionError as exc:  # a few KB of '[' would otherwise be a 500
        raise RequestError(f"{what} is nested too deeply", code="invalid_json") from exc
    if json_depth(value, max_depth) > max_depth:
        raise RequestError(f"{what} is nested too deeply: more than {max_depth} levels", code="invalid_json")
    if (where := lone_surrogate_at(value)) is not None:
        raise RequestError(f"{what} holds invalid Unicode (a lone surrogate) at {where or 'top level'}",
                           param=where or None, code="invalid_unicode")
    return value


_SYNTAX_PROBLEMS = {
    "Expecting value": "a value is missing or malformed",
    "Expecting ',' delimiter": "a comma is missing",
    "Expecting ':' delimiter": "a colon is missing after a member's name",
    "Expecting property name enclosed in double quotes": "a member's name is not a string in double quotes",
    "Unterminated string starting at": "a string is not closed",
    "Invalid control character at": "a string holds a raw control character (write it as an escape)",
    "Invalid \\escape": "a string holds an invalid escape",
    "Invalid \\uXXXX escape": "a string holds an invalid \\u escape",
    "Extra data": "something follows the JSON value",
}
"""``json.JSONDecodeError.msg`` (the json module's wording) in the client's terms."""


def json_problem(exc: ValueError) -> str:
    """What is wrong with a body ``json.loads`` refused, in the client's terms: where the
    syntax breaks, which byte is not UTF-8, that a number is too long; never the
    interpreter's own wording (``sys.set_int_max_str_digits()``, codec names)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{_SYNTAX_PROBLEMS.get(exc.msg, 'the syntax breaks')} at line {exc.lineno}, column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return f"it is not UTF-8 text (byte {exc.start} cannot start or continue a character)"
    if "integer string conversion" in str(exc) or "int_max_str_digits" in str(exc):
        return "a number has too many digits (at most 4300)"
    return "it cannot be parsed"


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a decoded JSON value (a scalar is 0), counted up to ``limit + 1``
    without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def lone_surrogate_at(value: Any) -> str | None:
    """The dotted path of the first string (or key) holding a lone surrogate, else None.
    One encode of the whole value finds out whether there is one; only then is it located."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if not _encodes(node):
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                child_path = f"{path}.{key}" if path else str(key)
                if not _encodes(str(key)):
                    return child_path
                stack.append((child, child_path))
        elif isinstance(node, list):
            stack.extend((child, f"{path}.{i}") for i, child in enumerate(node))
    return ""


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def parse_chat_request(
    raw: bytes, max_messages: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[ChatRequest, dict[str, Any]]:
    """Validate a request body; return the parsed request and the body to forward upstream
    (the original JSON object minus ``factcheck``)."""
    body = load_json(raw, max_depth)
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object", code="invalid_request")
    if isinstance(body.get("messages"), list) and len(body["messages"]) > max_messages:
        raise RequestError(f"too many messages: at most {max_messages}", param="messages", code="too_many_messages")
    request = validated(ChatRequest, body)
    forward = {key: value for key, value in body.items() if key != "factcheck"}
    return request, forward


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], body: dict[str, Any]) -> M:
    """``body`` as ``model``, or a ``RequestError`` naming the first invalid field."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise RequestError(f"invalid field {param}: {first['msg']}", param=param, code="invalid_value") from exc


def resolve_mode(request: ChatRequest, header: str | None, default: Mode) -> Mode:
    """Body field wins over the ``X-Factcheck-Mode`` header, which wins over the default. A
    header that names no mode is refused even when the body names one (present but empty
    is no mode either)."""
    from_header = None
    if header is not None:
        try:
            from_header = Mode(header.strip().lower())
        except ValueError as exc:
            raise RequestError(
                f"unknown X-Factcheck-Mode {header!r}: use off, annotate or correct",
                param="X-Factcheck-Mode",
                code="invalid_mode",
            ) from exc
    if request.factcheck is not None and request.factcheck.mode is not None:
        return request.factcheck.mode
    return from_header or default
