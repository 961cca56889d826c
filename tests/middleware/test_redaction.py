"""``middleware.redaction``: one function cuts every configured key out of what is forwarded
and logged (the paths through the proxy are in tests/middleware/server/test_secrets.py)."""

from __future__ import annotations

import json
import logging
import random
import re

from pydantic import SecretStr

from middleware.redaction import (
    REDACTED,
    SECRETS,
    Redactor,
    bearer_token,
    redact,
    register_secrets,
    register_settings,
    settings_secrets,
    spellings,
)
from middleware.settings import load_settings

KEY = "sk-redaction-unit-4f1e9a7c"


def test_redactor_walks_text_bytes_and_json_values() -> None:
    r = Redactor([KEY, SecretStr("tvly-another-key-77"), None, "short"])
    assert "short" not in r and KEY in r  # a value under MIN_SECRET_CHARS is no secret
    assert r(f"Bearer {KEY}") == f"Bearer {REDACTED}"
    assert r(f"x{KEY}y".encode()) == f"x{REDACTED}y".encode()
    body = {"error": {"message": f"bad key {KEY}", "seen": [f"Authorization: Bearer {KEY}", 3, None],
                      KEY: "tvly-another-key-77"}}
    assert r(body) == {"error": {"message": f"bad key {REDACTED}",
                                 "seen": [f"Authorization: Bearer {REDACTED}", 3, None], REDACTED: REDACTED}}
    assert r("short and sweet") == "short and sweet"
    assert Redactor()("anything") == "anything"


def test_a_key_holding_another_is_cut_whole() -> None:
    r = Redactor(["sk-abcdefgh", "sk-abcdefgh-and-more"])
    assert r("sk-abcdefgh-and-more") == REDACTED


def test_redact_uses_the_registry_and_one_off_extras() -> None:
    register_secrets(KEY)
    client_key = "sk-client-own-key-123"
    assert redact(f"{KEY} {client_key}") == f"{REDACTED} {client_key}"
    assert redact(f"{KEY} {client_key}", [client_key, None]) == f"{REDACTED} {REDACTED}"
    assert client_key not in SECRETS  # the extra is not remembered


def test_every_configured_key_is_a_secret() -> None:
    settings = load_settings(**{
        "upstream.api_key": "sk-upstream-cfg-1111", "pipeline.llm_api_key": "sk-llm-cfg-2222",
        "evidence.brave_api_key": "brave-cfg-3333", "evidence.tavily_api_key": "tvly-cfg-4444",
        "evidence.serper_api_key": "serper-cfg-5555", "server.api_keys": ["pk-proxy-cfg-6666", "pk-proxy-cfg-7777"],
    })
    assert sorted(k.get_secret_value() for k in settings_secrets(settings)) == sorted([
        "sk-upstream-cfg-1111", "sk-llm-cfg-2222", "brave-cfg-3333", "tvly-cfg-4444", "serper-cfg-5555",
        "pk-proxy-cfg-6666", "pk-proxy-cfg-7777"])
    register_settings(settings)
    assert all(k.get_secret_value() in SECRETS for k in settings_secrets(settings))


def test_bearer_token() -> None:
    assert bearer_token({"Authorization": "Bearer abc"}) == "abc"
    assert bearer_token({"authorization": "raw"}) == "raw"
    assert bearer_token({"Content-Type": "x"}) is None


def test_log_records_are_redacted_message_arguments_and_traceback(caplog) -> None:
    register_secrets(KEY)
    log = logging.getLogger("middleware.test_redaction")
    with caplog.at_level(logging.DEBUG):
        log.warning("upstream said %s", f"Incorrect API key provided: {KEY}")
        log.info(f"inline {KEY}")
        try:
            raise RuntimeError(f"failed with Bearer {KEY}")
        except RuntimeError:
            log.exception("boom")
    formatter = logging.Formatter("%(message)s")
    texts = [formatter.format(r) for r in caplog.records]
    assert len(texts) == 3 and all(KEY not in t for t in texts), texts
    assert REDACTED in texts[0] and REDACTED in texts[1]
    assert "RuntimeError" in texts[2] and f"Bearer {REDACTED}" in texts[2]


def spelt(key: str, rng: random.Random) -> str:
    """``key`` as a JSON string may write it: each character as itself (where JSON allows),
    as a ``\\u`` escape in either case, or by its short escape."""
    out = []
    for char in key:
        options = spellings(char)[1:] if char in '"\\' else spellings(char)
        choice = rng.choice(options)
        if choice.startswith("\\u") and rng.random() < 0.5:
            choice = re.sub(r"(?<=\\u)[0-9a-f]{4}", lambda m: m.group().upper(), choice)
        out.append(choice)
    return "".join(out)


def test_every_json_spelling_of_a_key_is_cut_out_and_the_json_stays_valid() -> None:
    """Whatever escapes the upstream writes the key in, the bytes and the text a JSON parser
    decodes from them hold ``[redacted]`` and never the key (issue 47: ``\\u`` escapes passed)."""
    key = 'sk-od/d"key\\9d3f😀é'
    r = Redactor([key])
    rng = random.Random(47)
    for _ in range(300):
        document = '{"content": "x' + spelt(key, rng) + 'y"}'
        assert json.loads(document)["content"] == f"x{key}y"  # the spelling is one a parser decodes to the key
        assert r.found_in(document) and r.found_in(document.encode())
        assert json.loads(r.data(document.encode()))["content"] == f"x{REDACTED}y"
        assert json.loads(r.text(document))["content"] == f"x{REDACTED}y"
    assert r(b"nothing secret \\u0073k") == b"nothing secret \\u0073k"


def test_plus_adds_one_requests_keys_without_remembering_them() -> None:
    r = Redactor([KEY])
    assert r.plus([None, "short", KEY]) is r
    own = r.plus(["sk-client-own-key-456"])
    assert own is r.plus(["sk-client-own-key-456"])  # compiled once
    assert own("sk-client-own-key-456 " + KEY) == f"{REDACTED} {REDACTED}" and "sk-client-own-key-456" not in r
