"""The tier deployed as the compose profile deploys it: ``ray start --head`` (here on 127.0.0.1),
then ``python -m middleware.runtime.ray_tier --address auto --block`` on that running cluster,
which serves the models until SIGTERM removes them and leaves the cluster running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def _end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its process group, by the id of the process we started
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_tier_on_a_running_cluster_serves_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "FACTCHECK_RUNTIME__RAY_REPLICA_CPUS": "0.5"}
    gcs_port, serve_port = _free_port(), _free_port()
    head_log = (tmp_path / "head.log").open("wb")
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
         f"--port={gcs_port}", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         "--object-store-memory=100000000", "--block"],
        env=env, stdout=head_log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    tier = None
    try:
        deadline = time.monotonic() + 120
        while b"block forever" not in (tmp_path / "head.log").read_bytes():
            assert head.poll() is None and time.monotonic() < deadline, (tmp_path / "head.log").read_text()
            time.sleep(0.2)
        tier = subprocess.Popen(
            [sys.executable, "-m", "middleware.runtime.ray_tier", "--address", "auto", "--host", "127.0.0.1",
             "--port", str(serve_port), "--block"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert tier is not None and tier.stdout is not None
            for line in tier.stdout:
                lines.append(line)
                if line.startswith("ready "):
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(240), "".join(lines[-40:])
        assert "node=127.0.0.1" in next(line for line in lines if line.startswith("ready "))
        status, info = _get(f"http://127.0.0.1:{serve_port}/nli")
        assert status == 200 and info["kind"] == "nli" and info["spec"] == "bundled"
        tier.send_signal(signal.SIGTERM)
        assert tier.wait(timeout=120) == 0, "".join(lines[-40:])
        assert _get(f"http://127.0.0.1:{serve_port}/nli")[0] == 404  # the application is gone, Serve is not
        assert head.poll() is None  # nor the cluster
    finally:
        if tier is not None:
            _end(tier)
        _end(head)
        head_log.close()
