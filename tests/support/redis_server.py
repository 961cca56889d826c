"""A real redis-server on loopback for the tests of what replicas share through Redis (the
evidence cache, the rate limiter): ``FACTCHECK_TEST_REDIS_URL`` (set by ``.ci/run`` from
``.ci/redis.sh``), else one started here; the tests skip when neither is available."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis


class FakeClock:
    """A monotonic clock the test moves by hand (``clock.now += 5``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """A loopback port nothing listens on (a Redis URL on it is a Redis that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return proc
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"redis-server did not start on port {port}")


def stop_redis(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


def redis_server_url() -> Iterator[str]:
    """Body of a ``redis_url`` fixture: FACTCHECK_TEST_REDIS_URL, else a redis-server started here."""
    url = os.environ.get("FACTCHECK_TEST_REDIS_URL")
    if url:
        yield url
        return
    if shutil.which("redis-server") is None:
        pytest.skip("no Redis: set FACTCHECK_TEST_REDIS_URL or install redis-server (bash .ci/redis.sh)")
    port = free_port()
    proc = start_redis(port)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_redis(proc)


def require_redis_server() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("needs the redis-server binary (bash .ci/redis.sh installs it)")
