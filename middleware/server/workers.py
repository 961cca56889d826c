"""``factcheck serve --workers N``: N proxy processes sharing one port.

One process relays every stream, and runs every check, on one core. On a machine with
spare cores, workers spread that load; on the 2-core test machine, where the load tools
share the cores, they did not help (off mode, 200 streams: p99 added TTFT +5.2 ms with 2
workers vs +6.0 ms with 1; annotate with the pipeline: +679 vs +162 ms). The default,
``auto``, is one process per four CPUs (``middleware.machine``: 1 below eight CPUs, 2 on eight,
as measured on a 16-core machine with the proxy held to 8 of them).
Workers each bind the port with SO_REUSEPORT, so the kernel spreads new connections between
them. Each worker has its own upstream connection pool, checker and models (memory grows
with N). The metrics of all workers are merged through prometheus_client's multiprocess
mode: the supervisor points ``PROMETHEUS_MULTIPROC_DIR`` at an empty directory before the
workers start. Limits kept per process (``max_concurrent_streams``,
``rate_limit_per_minute``) are split evenly between the workers.

The supervisor (this module, in the parent process) starts the workers, restarts one that
dies after it served for a while, gives up when one dies at start-up, and stops them all on
SIGINT/SIGTERM. Should the supervisor itself be killed, the kernel tells the workers to stop
(Linux's parent-death signal).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from middleware.metrics import MULTIPROCESS_ENV
from middleware.settings import Settings

ServeProcess = Callable[..., Coroutine[Any, Any, None]]
"""One proxy process's main: ``serve(settings, reuse_port=True, on_ready=callback)``; given by
the command that starts the workers (``middleware.commands.serve.serve_forever``), a
module-level function, so that a spawned worker imports it by name."""

log = logging.getLogger(__name__)

MIN_UPTIME_S = 10.0
"""A worker that exits sooner than this after it started is broken, not unlucky: no restart."""
STOP_TIMEOUT_S = 10.0
"""How long a worker may take to close its streams after SIGTERM before it is killed."""
_POLL_S = 0.5
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class WorkerFailed(RuntimeError):
    """A worker exited at start-up, or too soon after it started."""


def worker_share(settings: Settings) -> Settings:
    """One worker's settings: the process-wide limits divided between the workers."""
    server = settings.server
    n = server.workers
    share = {"max_concurrent_streams": math.ceil(server.max_concurrent_streams / n)}
    if server.rate_limit_per_minute and server.rate_limit_store == "memory":  # redis: one shared budget
        share["rate_limit_per_minute"] = math.ceil(server.rate_limit_per_minute / n)
    return settings.model_copy(update={"server": server.model_copy(update=share)})


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to host:port with SO_REUSEPORT and not listening: it resolves port 0 to
    a free port and holds the port for the workers (which bind it the same way) while the
    supervisor lives. A socket that does not listen receives no connections."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _stop_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGTERM this process when the supervisor dies, even by SIGKILL, so that
    no orphaned worker keeps serving the port (elsewhere, a dead supervisor leaves them)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d): workers outlive a killed supervisor", ctypes.get_errno())
    if os.getppid() != parent_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _worker_main(settings: Settings, serve: ServeProcess, ready: Queue[int], parent_pid: int) -> None:
    """A worker process: serve until SIGINT or SIGTERM (or until the supervisor dies)."""
    from middleware import eventloop

    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    _stop_with_parent(parent_pid)
    main = serve(settings, reuse_port=True, on_ready=lambda: ready.put(os.getpid()))
    eventloop.run(main, settings.server.event_loop)


class Supervisor:
    """Starts, watches and stops the worker processes."""

    def __init__(self, settings: Settings, serve: ServeProcess) -> None:
        self.settings = worker_share(settings)
        self.serve = serve
        self.count = settings.server.workers
        self._context = multiprocessing.get_context("spawn")  # no fork: models and threads do not survive it
        self._ready: Queue[int] = self._context.Queue()
        self._workers: dict[int, tuple[SpawnProcess, float]] = {}
        self._stopping = asyncio.Event()

    def _spawn(self) -> SpawnProcess:
        process = self._context.Process(target=_worker_main, args=(self.settings, self.serve, self._ready, os.getpid()), daemon=False)
        process.start()
        assert process.pid is not None
        self._workers[process.pid] = (process, time.monotonic())
        return process

    async def start(self) -> None:
        """Start every worker and wait until each listens."""
        pending = {self._spawn().pid for _ in range(self.count)}
        while pending:
            try:
                pending.discard(await asyncio.to_thread(self._ready.get, True, _POLL_S))
            except queue.Empty:
                if dead := [p for p, _ in self._workers.values() if p.pid in pending and not p.is_alive()]:
                    raise WorkerFailed(f"worker {dead[0].pid} exited with {dead[0].exitcode} at start-up")

    async def watch(self) -> None:
        """Until stopped: restart a worker that died after serving for a while."""
        while not self._stopping.is_set():
            for pid, (process, started) in list(self._workers.items()):
                if process.is_alive():
                    continue
                del self._workers[pid]
                _forget_metrics_of(pid)
                if time.monotonic() - started < MIN_UPTIME_S:
                    raise WorkerFailed(f"worker {pid} exited with {process.exitcode} {time.monotonic() - started:.1f}s after start")
                log.error("worker %d exited with %s; starting another", pid, process.exitcode)
                self._spawn()
            try:
                await asyncio.wait_for(self._stopping.wait(), _POLL_S)
            except TimeoutError:
                pass

    def request_stop(self) -> None:
        self._stopping.set()

    async def stop(self) -> None:
        """SIGTERM every worker, wait for them to close their streams, kill stragglers."""
        self._stopping.set()
        for process, _ in self._workers.values():
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for pid, (process, _) in list(self._workers.items()):
            await asyncio.to_thread(process.join, max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                await asyncio.to_thread(process.join)
            _forget_metrics_of(pid)
        self._workers.clear()
        self._ready.close()


def _forget_metrics_of(pid: int) -> None:
    """Drop a dead worker's live gauges (its counters and histograms stay in the totals)."""
    if os.environ.get(MULTIPROCESS_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def prepare_metrics_dir() -> Path | None:
    """Point the workers' metrics at an empty directory; return it if this call made it
    (to be removed at exit). A directory the user named is emptied of old metric files."""
    named = os.environ.get(MULTIPROCESS_ENV)
    if named:
        path = Path(named)
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*.db"):
            old.unlink()
        return None
    made = Path(tempfile.mkdtemp(prefix="factcheck-metrics-"))
    os.environ[MULTIPROCESS_ENV] = str(made)
    return made


async def run_workers(settings: Settings, serve: ServeProcess, announce: str) -> None:
    """Serve with ``settings.server.workers`` processes, each running ``serve``, until
    SIGINT/SIGTERM. ``announce`` is printed once every worker listens, with ``{port}`` filled in."""
    holder = reserve_port(settings.server.host, settings.server.port)
    port = holder.getsockname()[1]
    settings = settings.model_copy(update={"server": settings.server.model_copy(update={"port": port})})
    made_dir = prepare_metrics_dir()
    supervisor = Supervisor(settings, serve)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, supervisor.request_stop)
    try:
        await supervisor.start()
        print(announce.format(port=port), flush=True)
        await supervisor.watch()
    finally:
        await supervisor.stop()
        holder.close()
        if made_dir is not None:
            shutil.rmtree(made_dir, ignore_errors=True)
