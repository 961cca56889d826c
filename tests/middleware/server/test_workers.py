"""``serve --workers N``: the process limits shared out, the port shared, and real worker processes
on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from adapters.demo_upstream import DemoUpstream
from middleware.commands.serve import start_site
from middleware.server.workers import MIN_UPTIME_S, reserve_port, worker_share
from middleware.settings import load_settings

START_TIMEOUT_S = 180.0


def test_worker_share_splits_process_limits() -> None:
    settings = load_settings(**{"server.workers": 3, "server.max_concurrent_streams": 1000,
                                "server.rate_limit_per_minute": 100})
    share = worker_share(settings).server
    assert (share.max_concurrent_streams, share.rate_limit_per_minute) == (334, 34)
    assert worker_share(load_settings(**{"server.workers": 2})).server.rate_limit_per_minute == 0  # off stays off


def test_reserved_port_is_shared_only_with_reuse_port() -> None:
    holder = reserve_port("127.0.0.1", 0)
    port = holder.getsockname()[1]
    try:
        assert port > 0
        second = reserve_port("127.0.0.1", port)  # what every worker does
        second.close()
        with socket.socket() as plain, pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    finally:
        holder.close()


async def _read_until(stream: asyncio.StreamReader, pattern: str, timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    seen = []
    while (left := deadline - time.monotonic()) > 0:
        line = await asyncio.wait_for(stream.readline(), left)
        if not line:
            break
        seen.append(line.decode(errors="replace"))
        if match := re.search(pattern, seen[-1]):
            return match
    raise AssertionError(f"no {pattern!r} in the server's output:\n{''.join(seen)}")


async def _post(port: int, n: int) -> None:
    """``n`` chat requests, each on a new connection (the kernel picks a worker per connection)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "When was the Eiffel Tower completed?"}]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        for _ in range(n):
            async with session.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response:
                assert response.status == 200, await response.text()
                assert (await response.json())["choices"][0]["message"]["content"]


async def _metric(port: int, name: str) -> float:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
            text = await response.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def _start_two_workers(home: Path, upstream_url: str, **env: str) -> asyncio.subprocess.Process:
    """``factcheck serve --workers 2`` on a free port, in its own process group (so that a
    failed test can kill the workers too); its output is readable on ``stdout``."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "middleware.cli", "serve", "--workers", "2", "--port", "0", "--upstream-url", upstream_url,
        env={**os.environ, "FACTCHECK_CHECK__CHECKER": "none", "FACTCHECK_LOG_LEVEL": "WARNING",
             "FACTCHECK_HOME": str(home), **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )


def _live_workers(supervisor_pid: int) -> set[int]:
    """The supervisor's worker processes that are running (a killed worker stays a zombie
    until the supervisor reaps it; the resource tracker is a child too, but no worker)."""
    pids = set()
    for child in psutil.Process(supervisor_pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(child.cmdline()):
                pids.add(child.pid)
        except psutil.Error:  # exited meanwhile
            continue
    return pids


async def _wait_for(condition, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)


async def test_workers_share_the_port_merge_metrics_restart_and_stop(tmp_path: Path) -> None:
    upstream_runner, upstream_port = await start_site(DemoUpstream().app(), "127.0.0.1", 0)
    metrics_dir = tmp_path / "metrics"
    server = await _start_two_workers(tmp_path, f"http://127.0.0.1:{upstream_port}/v1",
                                      PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    try:
        match = await _read_until(server.stdout, r"listening on http://127\.0\.0\.1:(\d+)/v1 .*2 workers", START_TIMEOUT_S)
        ready_at = time.monotonic()
        port = int(match.group(1))
        worker_pids = _live_workers(server.pid)
        assert len(worker_pids) == 2

        await _post(port, 40)
        assert await _metric(port, "factcheck_requests_total") == 40  # both workers' counts, merged
        served = {int(p.stem.split("_")[-1]) for p in metrics_dir.glob("counter_*.db")}
        assert worker_pids <= served  # the kernel gave each worker connections

        # A worker that dies after serving for a while is replaced.
        await asyncio.sleep(max(0.0, MIN_UPTIME_S + 0.5 - (time.monotonic() - ready_at)))
        victim = min(worker_pids)
        os.kill(victim, signal.SIGKILL)

        def replaced() -> bool:
            now = _live_workers(server.pid)
            return victim not in now and len(now) == 2

        await _wait_for(replaced, START_TIMEOUT_S)
        await asyncio.sleep(5.0)  # the new worker loads before it listens; until then its twin serves
        await _post(port, 10)
        assert await _metric(port, "factcheck_requests_total") == 50  # the dead worker's counts stay

        server.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.wait(), 30.0) == 0
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in worker_pids - {victim})
    finally:
        if server.returncode is None:  # the whole group: orphaned workers would hold the output pipe open
            os.killpg(server.pid, signal.SIGKILL)
            await server.wait()
        await upstream_runner.cleanup()


async def test_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    server = await _start_two_workers(tmp_path, "http://127.0.0.1:9/v1")  # no request is sent
    try:
        await _read_until(server.stdout, r"listening on .*2 workers", START_TIMEOUT_S)
        workers = _live_workers(server.pid)
        assert len(workers) == 2
        server.kill()  # SIGKILL: the supervisor cleans nothing up
        await asyncio.wait_for(server.wait(), 30.0)

        def all_gone() -> bool:
            return not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                           for pid in workers)

        await _wait_for(all_gone, 30.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
