"""HTTP-level failures (issue 47, item 2): what aiohttp's parser refuses and a body it cannot
decode are answered in the face's error format, with a fixed message that never quotes the
input, counted as client errors, logged as one line without a traceback per client address;
no response names the server's versions. Raw sockets on loopback."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging

import pytest

from middleware.metrics import HTTP_REQUESTS, REQUEST_ERRORS
from tests.support.checkers import ScriptedChecker

MARK = "zqxmark"
"""In every malformed part: an answer that contains it echoes the input."""
BODY = json.dumps({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "q"}],
                   "mock": {"text": "Hi."}, "factcheck": {"mode": "off"}}).encode()


def request(path: str, extra: str = "", body: bytes = BODY, framing: str | None = None) -> bytes:
    framing = framing if framing is not None else f"Content-Length: {len(body)}\r\n"
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}{extra}\r\n"
            ).encode() + body


PROBES = {  # name: (request for a path, status)
    "gzip over plain bytes": (lambda p: request(p, "Content-Encoding: gzip\r\n", BODY + MARK.encode()), 400),
    "br": (lambda p: request(p, "Content-Encoding: br\r\n", BODY + MARK.encode()), 400),
    "bad header token": (lambda p: request(p, f"Bad {MARK}: x\r\n"), 400),
    "header over 8,190 bytes": (lambda p: request(p, f"X-Long: {MARK}{'a' * 9000}\r\n"), 431),
    "bad chunk size": (lambda p: request(p, "", f"{MARK}\r\nabc\r\n0\r\n\r\n".encode(),
                                         "Transfer-Encoding: chunked\r\n"), 400),
    "Content-Length with Transfer-Encoding": (
        lambda p: request(p, f"Transfer-Encoding: chunked\r\nX-{MARK}: 1\r\n", b"3\r\nabc\r\n0\r\n\r\n"), 400),
    "NUL in the path": (lambda p: f"POST {p}\x00{MARK} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(), 400),
}


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


async def exchange(url: str, raw: bytes, parts: int = 1) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` (in ``parts`` writes, 50 ms apart); the answer's status, headers and body."""
    reader, writer = await asyncio.open_connection(*host_port(url))
    step = -(-len(raw) // parts)
    for at in range(0, len(raw), step):
        writer.write(raw[at:at + step])
        await writer.drain()
        await asyncio.sleep(0.05)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def errors(status: int) -> float:
    return REQUEST_ERRORS.labels(status=str(status))._value.get()


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
async def test_a_malformed_request_gets_the_faces_error_format_without_its_input(make_proxy, caplog, probe, path):
    proxy = await make_proxy(ScriptedChecker())
    make, expected = PROBES[probe]
    before = errors(expected)
    with caplog.at_level(logging.DEBUG):
        status, headers, body = await exchange(proxy.url, make(path))
    assert status == expected, body
    assert headers["content-type"].startswith("application/json")
    payload = json.loads(body)
    if path == "/v1/messages":
        assert payload["type"] == "error" and set(payload["error"]) == {"type", "message"}
        assert payload["error"]["type"] == ("request_too_large" if expected == 413 else "invalid_request_error")
    else:
        assert set(payload) == {"error"} and payload["error"]["type"] == "invalid_request_error"
    assert MARK not in body.decode() and "b'" not in body.decode() and "Brotli" not in body.decode()
    assert errors(expected) - before == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert proxy.upstream.requests == []


async def test_a_bad_chunk_after_the_head_is_a_400_too(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    raw = request("/v1/chat/completions", "", b"5\r\n{\"mod\r\nzz\r\n", "Transfer-Encoding: chunked\r\n")
    status, _, body = await exchange(proxy.url, raw, parts=3)  # the handler is already reading when it breaks
    assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error"


async def test_an_undecodable_body_is_a_refusal_not_an_internal_failure(make_proxy):
    proxy = await make_proxy(ScriptedChecker())
    refused = HTTP_REQUESTS.labels(endpoint="chat", outcome="refused")._value.get()
    internal = HTTP_REQUESTS.labels(endpoint="chat", outcome="internal")._value.get()
    status, _, _ = await exchange(proxy.url, request("/v1/chat/completions", "Content-Encoding: gzip\r\n"))
    assert status == 400
    assert HTTP_REQUESTS.labels(endpoint="chat", outcome="refused")._value.get() - refused == 1
    assert HTTP_REQUESTS.labels(endpoint="chat", outcome="internal")._value.get() == internal
    good = gzip.compress(BODY)  # a real gzip body still works
    raw = request("/v1/chat/completions", "Content-Encoding: gzip\r\nConnection: close\r\n", good)
    status, _, body = await exchange(proxy.url, raw)
    assert status == 200, body


async def test_one_log_line_per_client_address_however_many_malformed_requests(make_proxy, caplog):
    proxy = await make_proxy(ScriptedChecker())
    with caplog.at_level(logging.INFO):
        for _ in range(20):
            await exchange(proxy.url, request("/v1/chat/completions", f"Bad {MARK}: x\r\n"))
    lines = [r for r in caplog.records if "refused" in r.getMessage() and "127.0.0.1" in r.getMessage()]
    assert len(lines) <= 1 and not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize("raw", [b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                 b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                 request("/v1/chat/completions", f"Bad {MARK}: x\r\n")])
async def test_no_response_names_the_servers_versions(make_proxy, raw):
    proxy = await make_proxy(ScriptedChecker())
    _, headers, _ = await exchange(proxy.url, raw.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1))
    assert headers["server"] == "factcheck-middleware"
