"""Every Grafana panel query evaluated by a real Prometheus scraping the proxy on loopback:
each one parses and runs, the error rate reads 0 on a healthy proxy (not "no data"), stays 0
when clients go away mid-answer (``client_gone``: users closing tabs are no server errors),
stays within 0..100% when requests fail, and unverified sentences carry their reason.

Prometheus is Debian's package (``.ci/prometheus.sh``); the test starts its own on a free
loopback port with a one-second scrape interval and stops it at the end."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.adapters.grafana.test_dashboards import DASHBOARD, all_panels
from tests.support.checkers import ScriptedChecker

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus (bash .ci/prometheus.sh)"),
]

WINDOW = "20s"
"""What ``$__rate_interval`` stands for here: several one-second scrapes."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def panel_queries() -> dict[str, list[str]]:
    """Panel title -> its queries, with the dashboard variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    out: dict[str, list[str]] = {}
    for panel in all_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", WINDOW).replace("$__range", WINDOW)
                    .replace("$mode", ".*").replace("$stage", ".*"))
            out.setdefault(panel["title"], []).append(expr)
    return out


class Prometheus:
    def __init__(self, target: str, directory: Path) -> None:
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: factcheck\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self, session: aiohttp.ClientSession) -> None:
        for _ in range(150):
            try:
                async with session.get(f"{self.url}/-/ready") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError("prometheus did not start")

    async def query(self, session: aiohttp.ClientSession, expr: str) -> list[dict[str, Any]]:
        async with session.get(f"{self.url}/api/v1/query", params={"query": expr}) as response:
            body = await response.json()
        assert body["status"] == "success", f"{expr}: {body}"
        return body["data"]["result"]

    async def scraped(self, session: aiohttp.ClientSession, after: float) -> None:
        """Until two scrapes newer than ``after`` are stored (``rate`` needs two samples of a
        series, and one first seen at ``after`` has none before)."""
        for _ in range(150):
            latest = await self.query(session, 'timestamp(up{job="factcheck"})')
            stored = await self.query(session, f'count_over_time(up{{job="factcheck"}}[{WINDOW}])')
            if latest and stored and float(latest[0]["value"][1]) > after + 2.0 and float(stored[0]["value"][1]) >= 3:
                return
            await asyncio.sleep(0.2)
        raise RuntimeError("prometheus did not scrape the proxy")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
async def prometheus_and_proxy(make_proxy, tmp_path) -> AsyncIterator[tuple[Prometheus, Any]]:
    proxy = await make_proxy(ScriptedChecker({"1905": "1903"}, delay=0.05), **{"check.sentence_budget_s": 0.02})
    prometheus = Prometheus(proxy.url.removeprefix("http://").removesuffix("/v1"), tmp_path)
    try:
        yield prometheus, proxy
    finally:
        prometheus.stop()


def chat(mock: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Who was Marie Curie?"}],
            "mock": {"text": "Marie Curie was born in 1867. She won the Nobel Prize in 1905.", **mock}}


async def leave_mid_answer(session: aiohttp.ClientSession, url: str) -> None:
    """Start a streamed answer and go away after its first bytes (the connection closes)."""
    async with session.post(f"{url}/chat/completions", data=json.dumps(chat({"token_rate": 10})).encode(),
                            headers={"Content-Type": "application/json"}) as response:
        assert response.status == 200
        await response.content.readany()


async def send(session: aiohttp.ClientSession, url: str, body: Any) -> int:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with session.post(f"{url}/chat/completions", data=data,
                            headers={"Content-Type": "application/json"}) as response:
        await response.read()
        return response.status


def value(result: list[dict[str, Any]]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


async def test_every_panel_query_runs_and_the_error_rate_is_honest(prometheus_and_proxy):
    prometheus, proxy = prometheus_and_proxy
    async with aiohttp.ClientSession() as session:
        await prometheus.ready(session)
        # A healthy proxy: every request answered.
        for _ in range(4):
            assert await send(session, proxy.url, chat({})) == 200
            assert await send(session, proxy.url, chat({}, stream=False)) == 200
        await prometheus.scraped(session, time.time())
        queries = panel_queries()
        for title, exprs in queries.items():
            for expr in exprs:
                await prometheus.query(session, expr)  # parses and runs against real series
        [error_rate] = queries["Error rate"]
        assert value(await prometheus.query(session, error_rate)) == 0.0  # 0, not "no data"
        [by_reason] = queries["Unverified share by reason"]
        reasons = {r["metric"].get("reason") for r in await prometheus.query(session, by_reason)}
        assert "timeout" in reasons  # the 20 ms budget: the 50 ms checks time out, and say so

        # Clients going away mid-answer (closed tabs): counted, but no error.
        for _ in range(4):
            await leave_mid_answer(session, proxy.url)
            assert await send(session, proxy.url, chat({})) == 200
        await asyncio.sleep(0.5)
        await prometheus.scraped(session, time.time())
        gone = await prometheus.query(
            session, f'sum(increase(factcheck_http_requests_total{{outcome="client_gone"}}[{WINDOW}]))')
        assert value(gone) > 0
        assert value(await prometheus.query(session, error_rate)) == 0.0

        # Now half the requests fail: refused by the proxy, the upstream failing before the
        # answer, and the upstream dropping the connection mid-answer (after the 200).
        for _ in range(3):
            assert await send(session, proxy.url, b"{not json") == 400
            assert await send(session, proxy.url, chat({"error_status": 500})) == 500
            assert await send(session, proxy.url, chat({"fail_after": 3})) == 200
            for _ in range(3):
                assert await send(session, proxy.url, chat({})) == 200
        await prometheus.scraped(session, time.time())
        rate = value(await prometheus.query(session, error_rate))
        assert 0.0 < rate <= 1.0
        outcomes = {r["metric"]["outcome"] for r in await prometheus.query(
            session, f"sum by (outcome) (increase(factcheck_http_requests_total[{WINDOW}]))")}
        assert {"ok", "refused", "upstream_error", "client_gone"} <= outcomes
