"""HTTP-level failures in the API's error format: what aiohttp's parser refuses (a malformed
request line or header, a header over its size limit, a bad chunk, Content-Length beside
Transfer-Encoding), a body that cannot be decoded (``Content-Encoding`` gzip over bytes that
are not gzip, br without a decoder), a body that arrives too slowly.

Each becomes a :class:`~middleware.errors.RequestError` with a fixed message chosen by the
kind of failure, never the parser's own text: aiohttp's messages quote the offending input
as a Python bytes repr (``b'Bad Header: x'``), and a client's bytes are not echoed back.
:func:`refusal_response` renders one in the format of the face the request was for.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict

from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadStatusLine,
    ContentEncodingError,
    ContentLengthError,
    DecompressSizeError,
    HttpProcessingError,
    InvalidHeader,
    InvalidURLError,
    LineTooLong,
    TransferEncodingError,
)
from aiohttp.web_protocol import RequestPayloadError

from middleware.errors import RequestError
from middleware.messages.api_router import MESSAGES_PATH, error_format

SERVER_NAME = "factcheck-middleware"
"""The ``Server`` header of every response: no versions for a prober to match against."""

# Most specific first: ContentEncodingError and the rest are BadHttpMessage too.
_REFUSALS: tuple[tuple[type[BaseException], int, str, str], ...] = (
    (DecompressSizeError, 413, "body_too_large", "the request body is too large once decompressed"),
    (ContentEncodingError, 400, "invalid_content_encoding",
     "the request body could not be decoded as its Content-Encoding says, or that encoding is not supported"),
    (TransferEncodingError, 400, "invalid_transfer_encoding", "the request body's chunked encoding is malformed"),
    (ContentLengthError, 400, "invalid_content_length", "the request body does not match its Content-Length"),
    (LineTooLong, 431, "header_too_large", "a request header (or the request line) is too long"),
    (InvalidURLError, 400, "invalid_url", "the request target is not a valid URL path"),
    (BadStatusLine, 400, "invalid_request_line", "the request line is malformed"),
    (InvalidHeader, 400, "invalid_header", "a request header is malformed"),
    (BadHttpMessage, 400, "invalid_http", "the request is not well-formed HTTP/1.1"),
)


def http_refusal(exc: BaseException | None) -> RequestError | None:
    """The client error an aiohttp parse or payload failure stands for (None: not one)."""
    for cause in _chain(exc):
        for kind, status, code, message in _REFUSALS:
            if isinstance(cause, kind):
                return RequestError(message, status=status, code=code)
    if any(isinstance(cause, (HttpProcessingError, RequestPayloadError)) for cause in _chain(exc)):
        return RequestError("the request is not well-formed HTTP/1.1", code="invalid_http")
    return None


def _chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and its causes (aiohttp wraps a payload's failure in ``RequestPayloadError``)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def refusal_response(path: str | None, error: RequestError) -> web.Response:
    """``error`` as the response of the face at ``path``: the Anthropic error format for
    ``/v1/messages``, the OpenAI one elsewhere; the connection is closed after it."""
    body = error.body()
    if path == MESSAGES_PATH:
        body = error_format(body, error.status)
    response = web.Response(status=error.status, body=json.dumps(body).encode(), content_type="application/json",
                            headers={"Server": SERVER_NAME})
    response.force_close()
    return response


class PeerLog:
    """At most one log line per client address per ``interval_s``: a client sending malformed
    requests in a loop cannot fill the log. The lines suppressed meanwhile are counted in the
    next one. At most ``max_peers`` addresses are remembered (the oldest are forgotten)."""

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0, max_peers: int = 10_000) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.max_peers = max_peers
        self._peers: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def info(self, peer: str, message: str, *args: object) -> None:
        now = time.monotonic()
        last, suppressed = self._peers.get(peer, (-self.interval_s, 0))
        if now - last < self.interval_s:
            self._peers[peer] = (last, suppressed + 1)
            return
        self._peers[peer] = (now, 0)
        self._peers.move_to_end(peer)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        more = f" ({suppressed} more from this address not logged)" if suppressed else ""
        self.logger.info(message + more, *args)
