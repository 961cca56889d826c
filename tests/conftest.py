"""Shared fixtures: the scripted demo upstream and the proxy, both on loopback; spaCy loaded
before a module's tests (``pytestmark = pytest.mark.usefixtures("warm_spacy")``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from aiohttp import web

from adapters.demo_upstream import DemoUpstream
from middleware.interfaces import Checker
from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.settings import Settings, load_settings
from tests.support.checkers import ScriptedChecker


@dataclass
class Proxy:
    url: str
    """Base URL of the proxy, ending in /v1."""
    upstream: DemoUpstream
    checker: Checker
    settings: Settings
    app: web.Application


@pytest.fixture
async def make_proxy() -> AsyncIterator[Callable[..., object]]:
    runners: list[web.AppRunner] = []

    async def _make(checker: Checker | None = None, **overrides: object) -> Proxy:
        upstream = DemoUpstream()
        up_runner, up_port = await start_site(upstream.app(), "127.0.0.1", 0)
        runners.append(up_runner)
        settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{up_port}/v1", "check.checker": "none",
                                    **overrides})
        checker = checker if checker is not None else ScriptedChecker()
        app = build_app(settings, checker=checker)
        runner, port = await start_site(app, "127.0.0.1", 0)
        runners.append(runner)
        return Proxy(f"http://127.0.0.1:{port}/v1", upstream, checker, settings, app)

    yield _make
    for runner in reversed(runners):
        await runner.cleanup()


@pytest.fixture(scope="module")
def warm_spacy() -> None:
    """Load spaCy once, outside any sentence budget (a cold load takes seconds)."""
    from middleware.pipeline.slots import analyse

    analyse("Warm up the parser.")
