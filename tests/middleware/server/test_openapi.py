"""Schemathesis against the live proxy's ``/openapi.json``: generated requests (valid and
invalid) never get a 5xx, and every response conforms to the document (status codes,
content types, bodies).

The document is the one the proxy serves. The proxy (ScriptedChecker) and the scripted mock upstream run on loopback in a thread with
its own event loop, because schemathesis calls the API synchronously."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from adapters.demo_upstream import DemoUpstream
from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.server.openapi import openapi_document
from middleware.settings import load_settings
from tests.support.checkers import ScriptedChecker

MAX_EXAMPLES = 15


class LiveProxy:
    """The mock upstream and the proxy, served from a background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-proxy", daemon=True)
        self.runners: list = []
        self.base_url = ""

    def start(self) -> str:
        self.thread.start()
        return asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)

    async def _start(self) -> str:
        upstream_runner, upstream_port = await start_site(DemoUpstream().app(), "127.0.0.1", 0)
        settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{upstream_port}/v1", "check.checker": "none",
                                    "check.sentence_budget_s": 5.0, "server.max_body_bytes": 200_000})
        runner, port = await start_site(build_app(settings, checker=ScriptedChecker({"Paris": "Rome"})),
                                        "127.0.0.1", 0)
        self.runners = [runner, upstream_runner]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        async def cleanup() -> None:
            for runner in self.runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def live_proxy() -> Iterator[str]:
    proxy = LiveProxy()
    try:
        yield proxy.start()
    finally:
        proxy.stop()


# The document the proxy serves (asserted below); loaded at import because schemathesis'
# lazy ``from_fixture`` loader does not work with pytest 9 (it reads ``node._nodeid``).
schema = schemathesis.openapi.from_dict(openapi_document())


def test_served_document_is_the_tested_one(live_proxy):
    with urllib.request.urlopen(f"{live_proxy}/openapi.json", timeout=10) as response:
        assert json.load(response) == json.loads(json.dumps(openapi_document()))


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_and_never_5xx(case, live_proxy):
    response = case.call_and_validate(base_url=live_proxy, timeout=30)
    assert response.status_code < 500
