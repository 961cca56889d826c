"""Secrets are never echoed: every configured key is cut out of what the proxy forwards to a
client and of what it logs.

One function, :func:`redact`, for every face and adapter: it takes a string, bytes or a JSON
value (dicts and lists, walked) and returns it with each secret replaced by ``[redacted]``,
however it is spelt: as itself, or in any of the escapes a JSON string may write it in
(``\\u0073k-...``, ``\\/``), so that what a JSON parser decodes from the result never holds it.
The secrets are the process's registry (:data:`SECRETS`), which holds every configured key
(``upstream.api_key``, ``pipeline.llm_api_key``, the search providers' keys and
``server.api_keys``: :func:`register_settings` is called when an app is built, and each client
registers its own key), plus any ``extra`` values the caller names (the client's own key an
adapter forwarded on one request, say).

Logging: once a secret is registered, every log record is redacted as it is made (its
message, arguments and traceback; :func:`install_log_redaction`), whatever logger or handler
writes it.

Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets: a three-letter
"key" cannot be cut out of text without mangling it (and is no secret anyway).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import SecretStr

if TYPE_CHECKING:
    from middleware.settings import Settings

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

T = TypeVar("T")


class Redactor:
    """A set of secrets and the means to cut them out, however a JSON string spells them
    (:func:`spellings`). Thread-safe to add to; reading uses the compiled patterns of the
    moment."""

    def __init__(self, secrets: Iterable[str | SecretStr | None] = ()) -> None:
        self._secrets: frozenset[str] = frozenset()  # replaced whole, never changed in place
        self._lock = threading.Lock()
        self._text: _Patterns[str] | None = None
        self._bytes: _Patterns[bytes] | None = None
        self.add(*secrets)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __contains__(self, value: str) -> bool:
        return value in self._secrets

    @property
    def secrets(self) -> frozenset[str]:
        return self._secrets

    def add(self, *secrets: str | SecretStr | None) -> None:
        new = {s for s in (_plain(s) for s in secrets) if s is not None and s not in self._secrets}
        if not new:
            return
        with self._lock:
            ordered = sorted(self._secrets | new, key=len, reverse=True)  # a key holding another goes first
            self._text = _Patterns.of(ordered, str)
            self._bytes = _Patterns.of(ordered, bytes)
            self._secrets = frozenset(ordered)

    def plus(self, extra: Iterable[str | SecretStr | None]) -> Redactor:
        """These secrets and ``extra`` (one request's own credentials, say); ``self`` when
        ``extra`` adds nothing. Made once per set of secrets (compiling is the costly part)."""
        more = frozenset(s for s in (_plain(s) for s in extra) if s is not None) - self._secrets
        return _redactor_of(self._secrets | more) if more else self

    def text(self, value: str) -> str:
        patterns = self._text
        return patterns.sub(value) if patterns is not None else value

    def data(self, value: bytes) -> bytes:
        patterns = self._bytes
        return patterns.sub(value) if patterns is not None else value

    def found_in(self, value: str | bytes) -> bool:
        patterns: _Patterns[Any] | None = self._text if isinstance(value, str) else self._bytes
        return patterns is not None and patterns.found_in(value)

    def __call__(self, value: T) -> T:
        """``value`` with every secret replaced: strings, bytes, and JSON values (dict keys and
        values, list items) walked; anything else is returned as it is."""
        if not self:
            return value
        return self._walk(value)  # type: ignore[no-any-return]

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes | bytearray):
            return self.data(bytes(value))
        if isinstance(value, dict):
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._walk(v) for v in value)
        return value


@functools.lru_cache(maxsize=64)
def _redactor_of(secrets: frozenset[str]) -> Redactor:
    return Redactor(secrets)


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}


def spellings(char: str) -> list[str]:
    """Every way a JSON string may write ``char``: as itself, as ``\\uXXXX`` (its hex digits
    in either case; a surrogate pair beyond U+FFFF) and by its short escape if it has one
    (``\\/``). A JSON parser turns each of them, and nothing else, into ``char``."""
    code = ord(char)
    units = [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    escaped = "".join("\\u" + f"{unit:04x}" for unit in units)
    return [char, escaped] + ([_SHORT_ESCAPES[char]] if char in _SHORT_ESCAPES else [])


A = TypeVar("A", str, bytes)


@dataclass(frozen=True, slots=True)
class _Patterns(Generic[A]):
    """The patterns of a set of secrets, for text or bytes (UTF-8). ``spelled`` finds every
    spelling of each (:func:`spellings`, char by char); it is several times slower than
    ``literal``, so it only runs where ``escape`` finds an escape of a char some secret holds
    (rare: an upstream that writes its text in ``\\u`` escapes, or a hostile one)."""

    literal: re.Pattern[A]
    escape: re.Pattern[A]
    spelled: re.Pattern[A]
    redacted: A

    @classmethod
    def of(cls, secrets: list[str], kind: type[A]) -> _Patterns[A]:
        def pattern(text: str) -> A:
            return text.encode("utf-8") if issubclass(kind, bytes) else text

        def matching(spelled: str) -> str:  # a \\u escape's hex digits in either case
            escaped = re.escape(spelled)
            return re.sub(r"(?<=\\\\u)[0-9a-f]{4}", lambda m: "".join(
                f"[{d}{d.upper()}]" if d.isalpha() else d for d in m.group()), escaped)

        def char_class(char: str) -> str:  # the escapes first: a backslash is one's start
            first, *escapes = spellings(char)
            return "(?:" + "|".join([*map(matching, escapes), re.escape(first)]) + ")"

        escapes = sorted({matching(s) for char in set("".join(secrets)) for s in spellings(char)[1:]})
        return cls(literal=re.compile(pattern("|".join(map(re.escape, secrets)))),
                   escape=re.compile(pattern("|".join(escapes))),
                   spelled=re.compile(pattern("|".join("".join(map(char_class, secret)) for secret in secrets))),
                   redacted=pattern(REDACTED))

    def found_in(self, value: A) -> bool:
        if self.literal.search(value) is not None:
            return True
        return self.escape.search(value) is not None and self.spelled.search(value) is not None

    def sub(self, value: A) -> A:
        if self.escape.search(value) is None:
            return self.literal.sub(self.redacted, value)
        return self.spelled.sub(self.redacted, value)


SECRETS = Redactor()
"""The process's secrets: every configured key (see the module's docstring)."""


def _plain(secret: str | SecretStr | None) -> str | None:
    value = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
    if not value:
        return None
    value = value.strip()
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    return value if len(value) >= MIN_SECRET_CHARS else None


def redact(value: T, extra: Iterable[str | SecretStr | None] = ()) -> T:
    """``value`` with every registered secret, and each of ``extra``, replaced by
    ``[redacted]`` (see :meth:`Redactor.__call__` for what is walked)."""
    return SECRETS.plus(extra)(value)


def register_secrets(*secrets: str | SecretStr | None) -> None:
    """Add keys to the process's registry (and redact the logs from now on)."""
    SECRETS.add(*secrets)
    if SECRETS:
        install_log_redaction()


def settings_secrets(settings: Settings) -> list[SecretStr]:
    """Every key ``settings`` configures: upstream, pipeline LLM, search providers, proxy keys."""
    ev = settings.evidence
    keys = [settings.upstream.api_key, settings.pipeline.llm_api_key, ev.brave_api_key, ev.tavily_api_key,
            ev.serper_api_key, *settings.server.api_keys]
    return [key for key in keys if key is not None]


def register_settings(settings: Settings) -> None:
    """Register every key ``settings`` configures (called when an app is built)."""
    register_secrets(*settings_secrets(settings))


CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})


def bearer_token(headers: dict[str, str] | Any) -> str | None:
    """The credential of an ``Authorization`` header among ``headers`` (any case), if any."""
    for name, value in headers.items():
        if name.lower() == "authorization" and isinstance(value, str):
            return value.removeprefix("Bearer ").removeprefix("bearer ").strip() or None
    return None


def sent_credentials(headers: dict[str, str] | Any) -> list[str]:
    """The credentials among request ``headers`` (``Authorization``'s token, ``x-api-key``,
    ...): what an upstream's error must not echo back."""
    found = [bearer_token(headers)]
    found += [v for k, v in headers.items() if k.lower() in CREDENTIAL_HEADERS - {"authorization"}]
    return [v for v in found if isinstance(v, str) and v]


# --------------------------------------------------------------------------- logging

_installed = False
_install_lock = threading.Lock()


def install_log_redaction() -> None:
    """Redact every log record as it is made, from now on (idempotent). A record holding a
    secret in its message, its arguments or its traceback gets the redacted text instead."""
    global _installed
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if SECRETS:
                _scrub(record)
            return record

        logging.setLogRecordFactory(make_record)
        _installed = True


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string is the logging module's to report
        return
    if SECRETS.found_in(message):
        record.msg, record.args = SECRETS.text(message), None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if SECRETS.found_in(text):
            record.exc_text = SECRETS.text(text)  # formatters use it instead of formatting exc_info
    if record.stack_info and SECRETS.found_in(record.stack_info):
        record.stack_info = SECRETS.text(record.stack_info)
