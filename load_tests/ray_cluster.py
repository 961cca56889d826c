"""The Ray Serve model tier as a real local process for the loopback load test and the tests:
``python -m middleware.runtime.ray_tier --address local`` on 127.0.0.1 (a one-node Ray cluster
owned by that process, node address loopback, no dashboard, no usage stats), stopped by its
process id."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayTier:
    """A started tier: ``url`` is its Serve ingress, ``node`` the Ray node's address."""

    def __init__(self, proc: subprocess.Popen[str], url: str, node: str, log: list[str]) -> None:
        self.proc, self.url, self.node, self.log = proc, url, node, log

    @classmethod
    def start(cls, env: dict[str, str] | None = None, num_cpus: int = 2, timeout_s: float = 240.0) -> RayTier:
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "middleware.runtime.ray_tier", "--address", "local", "--host", "127.0.0.1",
             "--port", str(port), "--num-cpus", str(num_cpus), "--object-store-mb", "100"],
            cwd=ROOT, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        log: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.append(line)
                if line.startswith("ready "):
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                cls._end(proc)
                raise RuntimeError("the Ray tier did not start:\n" + "".join(log[-40:]))
        fields = dict(part.split("=", 1) for part in next(ln for ln in log if ln.startswith("ready ")).split()[2:])
        return cls(proc, f"http://127.0.0.1:{port}", fields["node"], log)

    def stop(self) -> None:
        self._end(self.proc)

    @staticmethod
    def _end(proc: subprocess.Popen[str]) -> None:
        """SIGTERM (the tier shuts Ray down), then the process group it leads, by its id."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of the group left behind
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=10)
