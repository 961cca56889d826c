"""Building the configured web search providers (``build_providers``): a provider configured without
its key or URL fails at start-up naming the variable to set, unknown names are refused, keys
come from the environment."""

from __future__ import annotations

import json

import pytest

from adapters.search import ConfigError, build_providers
from middleware.settings import EvidenceSettings
from tests.adapters.search.test_providers import settings_for


@pytest.mark.parametrize(
    ("name", "field", "env"),
    [
        ("brave", "brave_api_key", "FACTCHECK_EVIDENCE__BRAVE_API_KEY"),
        ("tavily", "tavily_api_key", "FACTCHECK_EVIDENCE__TAVILY_API_KEY"),
        ("serper", "serper_api_key", "FACTCHECK_EVIDENCE__SERPER_API_KEY"),
        ("searxng", "searxng_url", "FACTCHECK_EVIDENCE__SEARXNG_URL"),
    ],
)
def test_configured_provider_without_key_fails_at_start_up(name: str, field: str, env: str) -> None:
    settings = settings_for("http://127.0.0.1:9", ["index", name], **{field: None})
    with pytest.raises(ConfigError) as info:
        build_providers(settings)
    assert info.value.provider == name and info.value.env_var == env
    assert name in str(info.value) and env in str(info.value)


def test_unknown_provider_and_non_web_sources() -> None:
    with pytest.raises(ConfigError, match="unknown evidence provider 'bing'"):
        build_providers(EvidenceSettings(providers=["bing"]))
    assert build_providers(EvidenceSettings(providers=["index", "context"])) == []
    built = build_providers(EvidenceSettings(providers=["Wikipedia", "wikipedia", "index"], search_timeouts_s={"wikipedia": 1.5}))
    assert [p.name for p in built] == ["wikipedia"] and built[0].timeout_s == 1.5


def test_keys_come_from_the_environment(monkeypatch) -> None:
    from middleware.settings import load_settings

    monkeypatch.setenv("FACTCHECK_EVIDENCE__PROVIDERS", json.dumps(["brave"]))
    monkeypatch.setenv("FACTCHECK_EVIDENCE__BRAVE_API_KEY", "from-env")
    [brave] = build_providers(load_settings())
    assert brave.api_key == "from-env"
