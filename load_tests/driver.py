"""Load driver: N concurrent streamed chats against each target, measured from the client side.

Targets, side by side under the same load and the same request body:
- ``direct``: the scripted mock upstream itself (the baseline);
- ``factcheck``: this proxy in front of it, once per mode (off, annotate, correct), the mode
  chosen by the ``X-Factcheck-Mode`` header so the body stays identical;
- ``litellm``: LiteLLM's proxy in pass-through in front of it (``--litellm``; see
  ``load_tests/litellm_target.py``).

Every target runs in its own process so the driver's event loop does not distort it. Each
stream records time to first content, inter-token gaps, per-sentence report latency
(annotate/correct: from the sentence's last character reaching the client to its report),
content mismatches (off/annotate/pass-through must be byte-identical) and errors; each
target process's peak RSS and CPU time are sampled with psutil. Workers start staggered
over one stream's length so requests do not arrive in lockstep, and ``--rounds`` repeats
every target in rotating order, pooling the samples, so a noisy shared machine disturbs all
targets alike. Each worker's first streams are a cold burst (every stream starting within
one stream's length): their TTFT p99 is shown apart from the streams after them, and beside
it how long the target's main thread waited for a CPU that this driver, the mock upstream or
anything else on the machine held.

    python -m load_tests.driver --streams 1,50 --duration 15 --token-rate 50 --modes off --checker none
    python -m load_tests.driver --streams 200 --duration 60 --modes off,annotate --checker pipeline --litellm \\
        --out load.json --markdown load.md

The second is the acceptance run (200 streams, 60 s, the real offline pipeline in annotate
mode, LiteLLM beside it; ``bash load_tests/install_litellm.sh`` first). ``--checker none``
measures the proxy's own cost without checks; ``--workers N`` runs ``serve --workers N`` (else
the proxy's own ``server.workers``, by default ``auto``: sized for the CPUs it may use).
``--target-cpus 0-1`` runs the proxy (and its check workers, and LiteLLM) on those CPUs and
this driver and the mock upstream on the others, as a deployment's clients and LLM run on
other machines: on a machine of four CPUs or more that is the fair reading of the relay's
latencies. (On two CPUs it leaves the relay and its check workers one core between them,
which a deployment would not.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import psutil
import typer

from adapters.demo_upstream import tokenize
from middleware.machine import Machine, size_for, usable_cpus, usable_memory_bytes
from middleware import eventloop

ANSWER = (
    "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair. "
    "Marie Curie won the Nobel Prize in Physics in 1903. She was born in Warsaw in 1867. "
    "Mount Everest is 8,849 metres tall. The Amazon flows into the Atlantic Ocean."
)


@dataclass
class StreamResult:
    ttft: float | None = None
    gaps: list[float] = field(default_factory=list)
    report_latencies: list[float] = field(default_factory=list)
    tokens: int = 0
    duration: float = 0.0
    error: str | None = None
    mismatch: bool = False
    verdicts: list[str] = field(default_factory=list)
    first: bool = False
    """The worker's first stream: all of them start within one stream's length (the burst)."""


@dataclass
class RunSummary:
    target: str
    mode: str
    streams: int
    requests: int
    errors: int
    error_rate: float
    mismatches: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    gap_p50_ms: float
    gap_p99_ms: float
    report_p50_ms: float | None
    report_p95_ms: float | None
    reports: int
    tokens_per_s: float
    cpu_percent: float | None
    """CPU used by the target's process (the mock upstream for ``direct``), % of one core."""
    peak_rss_mb: float | None
    driver_cpu_percent: float | None = None
    """CPU used by this driver, % of one core: near 100 means the driver itself limits the figures."""
    verdicts: dict[str, int] = field(default_factory=dict)
    """Sentence reports by verdict label (reason in brackets for unverified ones)."""
    first_errors: list[str] = field(default_factory=list)
    lag_p50_ms: float | None = None
    lag_p99_ms: float | None = None
    lag_max_ms: float | None = None
    """The proxy's event loop lag: how late a 1 ms timer on its loop fires (``loop_lag.py``)."""
    checks_per_s: float | None = None
    """Checks completed per second: sentence reports with a verdict (not ``unverified``)."""
    shed: int = 0
    """Checks shed: ``unverified (overload)`` reports."""
    timed_out: int = 0
    """Checks that ran out of budget: ``unverified (timeout)`` reports."""
    main_cpu_ms_per_stream: float | None = None
    """CPU time of the target's main process (the relay, without its check workers) per
    stream: what the relay spends on a stream, which CPU contention from other processes
    does not change the way it changes the latencies."""
    ttft_p99_burst_ms: float | None = None
    """TTFT p99 of each worker's first stream: every stream starting within one stream's
    length (a cold burst: new connections, sessions, the relay's busiest second)."""
    ttft_p99_after_ms: float | None = None
    """TTFT p99 of the streams after each worker's first (the steady state)."""
    ttft_p99_by_round_ms: list[float | None] = field(default_factory=list)
    """TTFT p99 of each round alone (``--rounds``; None for a round without a first token):
    rounds ran at different moments of a noisy machine, and a mode is compared with another
    round by round (``mode_gaps``)."""
    main_cpu_wait_percent: float | None = None
    """How long the main thread of the target's process was ready to run but waited for a
    CPU, % of the run (Linux ``schedstat``): on a machine shared with this driver and the
    mock upstream, the time the relay lost to them."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Usage:
    """A process's CPU counters at one moment, in seconds."""

    cpu_s: float
    """CPU of the process and its children."""
    main_cpu_s: float
    """CPU of the process alone."""
    main_wait_s: float | None
    """Time its main thread waited for a CPU (None where the kernel does not say)."""


class Process:
    """A server in a child process on loopback; its output goes to a log file that is shown
    if it fails to start."""

    def __init__(
        self,
        args: list[str],
        port: int,
        env: dict[str, str] | None = None,
        *,
        name: str = "server",
        startup_timeout: float = 60.0,
        cwd: Path | None = None,
        ready_text: str | None = None,
    ) -> None:
        self.port = port
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, cwd=cwd)
        self.peak_rss = 0
        self.lag_file = (env or {}).get("FACTCHECK_LOOP_LAG_FILE")
        """Where the process writes its event loop's lag samples on SIGUSR1 (``loop_lag.py``), if it does."""
        self._wait_ready(startup_timeout, ready_text)

    def loop_lag(self) -> list[float] | None:
        """The lag samples (seconds) since the last call, from the process's own event loop;
        None for a process without the probe."""
        if self.lag_file is None:
            return None
        # The file is removed, then awaited: the probe writes it whole (os.replace). Comparing
        # modification times could miss a second write within one timestamp tick of the first
        # (the driver asks twice in a row between two runs).
        Path(self.lag_file).unlink(missing_ok=True)
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(self.lag_file):
                text = Path(self.lag_file).read_text()
                return [float(line) for line in text.split()]
            time.sleep(0.02)
        state = "running" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
        raise RuntimeError(f"{self.name} ({state}) wrote no loop lag samples in 10 s:\n{self.log_tail()}")

    def _wait_ready(self, timeout: float, ready_text: str | None) -> None:
        """Until the port accepts connections and, if given, ``ready_text`` is in the log."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            with socket.socket() as s:
                listening = s.connect_ex(("127.0.0.1", self.port)) == 0
            if listening and (ready_text is None or ready_text in self.log_path.read_text(errors="replace")):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} not listening on 127.0.0.1:{self.port} after {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _processes(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def sample_rss(self) -> None:
        rss = 0
        for process in self._processes():
            try:
                rss += process.memory_info().rss
            except psutil.Error:
                pass
        self.peak_rss = max(self.peak_rss, rss)

    def cpu_seconds(self, main_only: bool = False) -> float:
        """CPU seconds of the process and its children (``main_only``: the process alone)."""
        total = 0.0
        for process in self._processes()[:1] if main_only else self._processes():
            try:
                times = process.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    def cpu_wait_seconds(self) -> float | None:
        """Seconds the process's main thread has spent ready to run but waiting for a CPU
        (the second field of Linux's ``/proc/PID/schedstat``); None where it is not known."""
        try:
            with open(f"/proc/{self.proc.pid}/schedstat") as stat:
                return int(stat.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def usage(self) -> Usage:
        """The process's CPU counters now (a run's are the difference of two)."""
        return Usage(self.cpu_seconds(), self.cpu_seconds(main_only=True), self.cpu_wait_seconds())

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def start_mock_upstream(token_rate: float) -> Process:
    port = free_port()
    return Process([sys.executable, "-m", "load_tests.mock_upstream", "--port", str(port),
                    "--token-rate", str(token_rate)], port, name="mock-upstream")


LOOP_LAG = Path(__file__).with_name("loop_lag.py")


def parse_cpus(spec: str) -> set[int]:
    """CPU numbers from ``"0"``, ``"0,2"`` or ``"0-3"`` (``taskset -c``'s list form)."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


@contextlib.contextmanager
def spawning_on(cpus: set[int] | None) -> Iterator[None]:
    """Processes started inside run on ``cpus`` (Linux: a child, its threads and its own
    children inherit the CPUs of the process that started it): the driver moves there while
    it starts them, then back. None: nothing changes."""
    if cpus is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def split_cpus(target_cpus: str | None) -> tuple[set[int] | None, set[int] | None]:
    """The CPUs of the targets and those of the load (this driver and the mock upstream):
    ``target_cpus`` and every other CPU this process may use. A relay that shares its cores
    with the load generator at the same priority waits for them (``main_cpu_wait_percent``),
    which a deployment, whose clients and LLM run elsewhere, does not."""
    if target_cpus is None:
        return None, None
    allowed = os.sched_getaffinity(0)
    target = parse_cpus(target_cpus)
    if not target or not target < allowed:
        raise typer.BadParameter(f"must name some, not all, of the CPUs this process may use: {sorted(allowed)}",
                                 param_hint="--target-cpus")
    return target, allowed - target


def start_proxy(upstream_port: int, checker: str = "none", extra_env: dict[str, str] | None = None,
                startup_timeout: float = 600.0, workers: int | None = 1, code: Path | None = None,
                cpus: set[int] | None = None) -> Process:
    """The proxy (``factcheck serve``) in front of the mock upstream. A pipeline checker may
    build the demo index and load models at start-up, hence the long default timeout. The
    proxy is ready when it prints that it listens (with workers: once every worker listens).
    ``code``: the checkout whose ``middleware`` runs (default: this one), for before/after
    runs in one sitting. ``workers`` None: the proxy's own setting (``auto`` by default, sized
    for ``cpus``, the CPUs it runs on). With one process, its event loop's lag is sampled
    (``loop_lag.py``)."""
    port = free_port()
    env = {"FACTCHECK_CHECK__CHECKER": checker, "FACTCHECK_LOG_LEVEL": "WARNING",
           "FACTCHECK_SERVER__MAX_CONCURRENT_STREAMS": "100000", **(extra_env or {})}
    serve = ["serve", "--port", str(port), *(["--workers", str(workers)] if workers is not None else []),
             "--upstream-url", f"http://127.0.0.1:{upstream_port}/v1"]
    command = [sys.executable, "-m", "middleware.cli", *serve]
    if relay_processes(workers, env, cpus) == 1:
        env["FACTCHECK_LOOP_LAG_FILE"] = tempfile.mkstemp(prefix="loop-lag-")[1]
        command = [sys.executable, str(LOOP_LAG), *serve]
    root = code if code is not None else Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    # run in the checkout: a check worker (``python -m``) imports from its working directory first
    return Process(command, port, env, name="factcheck-proxy", startup_timeout=startup_timeout,
                   ready_text="factcheck proxy listening", cwd=root)


def relay_processes(workers: int | None, env: dict[str, str], cpus: set[int] | None) -> int:
    """How many relay processes the proxy runs: ``workers``, else its ``server.workers`` as
    ``env`` sets it, else the ``auto`` sizing for ``cpus`` (or this process's CPUs)."""
    if workers is not None:
        return workers
    if (given := env.get("FACTCHECK_SERVER__WORKERS", os.environ.get("FACTCHECK_SERVER__WORKERS"))) not in (None, "auto"):
        return int(given)
    return size_for(Machine(len(cpus) if cpus else usable_cpus(), usable_memory_bytes())).relays


@dataclass
class Target:
    """Where and how to send the load."""

    name: str
    mode: str
    url: str
    headers: dict[str, str]
    process: Process | None
    """The process whose CPU and RSS are reported (the mock upstream for ``direct``)."""
    compare: bool = True
    """Whether the received content must equal the upstream's byte for byte."""


def request_body(text: str) -> dict[str, Any]:
    """The same body for every target: the mock upstream streams ``text``."""
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}], "mock": {"text": text}}


async def one_stream(session: aiohttp.ClientSession, target: Target, body: dict[str, Any], text: str) -> StreamResult:
    result = StreamResult()
    t0 = time.perf_counter()
    last = None
    content: list[str] = []
    length = 0
    reached: list[tuple[int, float]] = []  # (content length, time it was reached)
    try:
        async with session.post(target.url, json=body, headers=target.headers) as response:
            if response.status != 200:
                result.error = f"HTTP {response.status}: {(await response.text())[:200]}"
                return result
            async for line in response.content:
                if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                    continue
                now = time.perf_counter()
                chunk: dict[str, Any] = json.loads(line[5:])
                if "error" in chunk:
                    result.error = str(chunk["error"].get("message", "error event"))
                    break
                piece = "".join((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
                if piece:
                    if result.ttft is None:
                        result.ttft = now - t0
                    elif last is not None:
                        result.gaps.append(now - last)
                    last = now
                    content.append(piece)
                    length += len(piece)
                    result.tokens += 1
                    reached.append((length, now))
                report = (chunk.get("factcheck") or {}).get("report")
                if report:
                    done_at = next((t for n, t in reached if n >= report["end"]), now)
                    result.report_latencies.append(now - done_at)
                    verdict = report["verdict"]
                    reason = f" ({verdict.get('reason')})" if verdict["label"] == "unverified" else ""
                    result.verdicts.append(verdict["label"] + reason)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.duration = time.perf_counter() - t0
    if target.compare and result.error is None:
        result.mismatch = "".join(content) != text
    return result


@dataclass
class Load:
    streams: int
    duration: float
    text: str
    ramp: float
    """Workers start at random offsets within this many seconds."""


@dataclass
class LoadRun:
    """One run of a load against a target."""

    results: list[StreamResult]
    elapsed: float
    driver_cpu: float
    """This driver's CPU, % of one core."""
    cpu: float | None = None
    """The target's processes' CPU, % of one core."""
    main_cpu_s: float | None = None
    """CPU seconds of the target's main process."""
    main_wait_s: float | None = None
    """Seconds the target's main thread waited for a CPU (None where the kernel does not say)."""


async def run_load(target: Target, load: Load) -> LoadRun:
    """Run ``load`` against ``target``, measuring the target's processes and this driver."""
    results: list[StreamResult] = []
    body = request_body(load.text)
    start = time.perf_counter()
    stop_at = start + load.duration
    process = target.process

    async def worker(session: aiohttp.ClientSession) -> None:
        await asyncio.sleep(random.uniform(0, load.ramp))
        first = True
        while time.perf_counter() < stop_at:
            result = await one_stream(session, target, body, load.text)
            result.first, first = first, False
            results.append(result)

    async def sampler() -> None:
        while process is not None:
            process.sample_rss()
            await asyncio.sleep(0.25)

    before = process.usage() if process else None
    me = psutil.Process()
    mine0 = sum(me.cpu_times()[:2])
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        sampling = asyncio.create_task(sampler())
        await asyncio.gather(*(worker(session) for _ in range(load.streams)))
        sampling.cancel()
    elapsed = time.perf_counter() - start
    run = LoadRun(results, elapsed, 100.0 * (sum(me.cpu_times()[:2]) - mine0) / elapsed)
    if process is not None and before is not None:
        after = process.usage()
        run.cpu = 100.0 * (after.cpu_s - before.cpu_s) / elapsed
        run.main_cpu_s = after.main_cpu_s - before.main_cpu_s
        if after.main_wait_s is not None and before.main_wait_s is not None:
            run.main_wait_s = after.main_wait_s - before.main_wait_s
    return run


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


@dataclass
class Pool:
    """Samples of one (target, mode, streams) pooled over rounds."""

    results: list[StreamResult] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: list[float] = field(default_factory=list)
    driver_cpu: list[float] = field(default_factory=list)
    main_cpu_s: float | None = None
    main_wait_s: float | None = None
    peak_rss: int = 0
    lags: list[float] | None = None
    round_ttft_p99: list[float | None] = field(default_factory=list)
    """Each round's TTFT p99, in seconds (None: no stream of the round had a first token)."""

    def add(self, run: LoadRun) -> None:
        ttfts = first_token_times(run.results)
        self.round_ttft_p99.append(_pct(ttfts, 0.99) if ttfts else None)
        self.results += run.results
        self.elapsed += run.elapsed
        self.driver_cpu.append(run.driver_cpu)
        if run.cpu is not None:
            self.cpu.append(run.cpu)
        if run.main_cpu_s is not None:
            self.main_cpu_s = (self.main_cpu_s or 0.0) + run.main_cpu_s
        if run.main_wait_s is not None:
            self.main_wait_s = (self.main_wait_s or 0.0) + run.main_wait_s


def first_token_times(results: Iterable[StreamResult]) -> list[float]:
    """Seconds to the first token of each stream of ``results`` that had one and no error."""
    return [r.ttft for r in results if r.error is None and r.ttft is not None]


def summarise(target: str, mode: str, streams: int, pool: Pool) -> RunSummary:
    results = pool.results
    ok = [r for r in results if r.error is None]
    ttfts = first_token_times(ok)
    burst = first_token_times(r for r in ok if r.first)
    after = first_token_times(r for r in ok if not r.first)
    gaps = [g for r in ok for g in r.gaps]
    reports = [x for r in ok for x in r.report_latencies]
    errors = [r.error for r in results if r.error is not None]
    verdicts = Counter(v for r in ok for v in r.verdicts)
    checked = sum(n for v, n in verdicts.items() if not v.startswith("unverified"))
    lags = sorted(pool.lags) if pool.lags else []
    return RunSummary(
        target=target, mode=mode, streams=streams, requests=len(results),
        errors=len(errors), error_rate=len(errors) / len(results) if results else 0.0,
        mismatches=sum(r.mismatch for r in ok),
        ttft_p50_ms=1000 * statistics.median(ttfts) if ttfts else float("nan"),
        ttft_p99_ms=1000 * _pct(ttfts, 0.99),
        gap_p50_ms=1000 * _pct(gaps, 0.5), gap_p99_ms=1000 * _pct(gaps, 0.99),
        report_p50_ms=1000 * _pct(reports, 0.5) if reports else None,
        report_p95_ms=1000 * _pct(reports, 0.95) if reports else None,
        reports=len(reports),
        tokens_per_s=sum(r.tokens for r in ok) / pool.elapsed if pool.elapsed else 0.0,
        cpu_percent=statistics.median(pool.cpu) if pool.cpu else None,
        peak_rss_mb=pool.peak_rss / 2**20 if pool.peak_rss else None,
        driver_cpu_percent=statistics.median(pool.driver_cpu) if pool.driver_cpu else None,
        first_errors=list(dict.fromkeys(errors))[:3],
        verdicts=dict(verdicts.most_common()),
        lag_p50_ms=1000 * _pct(lags, 0.5) if lags else None,
        lag_p99_ms=1000 * _pct(lags, 0.99) if lags else None,
        lag_max_ms=1000 * lags[-1] if lags else None,
        checks_per_s=checked / pool.elapsed if verdicts and pool.elapsed else None,
        shed=verdicts.get("unverified (overload)", 0),
        timed_out=verdicts.get("unverified (timeout)", 0),
        main_cpu_ms_per_stream=1000 * pool.main_cpu_s / len(results) if pool.main_cpu_s is not None and results
        else None,
        ttft_p99_burst_ms=1000 * _pct(burst, 0.99) if burst else None,
        ttft_p99_after_ms=1000 * _pct(after, 0.99) if after else None,
        main_cpu_wait_percent=100 * pool.main_wait_s / pool.elapsed if pool.main_wait_s is not None and pool.elapsed
        else None,
        ttft_p99_by_round_ms=[1000 * p if p is not None else None for p in pool.round_ttft_p99],
    )


_COLUMNS = (
    ("target", "target"), ("mode", "mode"), ("streams", "streams"), ("requests", "requests"), ("errors", "errors"),
    ("mismatches", "mismatches"), ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p99_ms", "TTFT p99 ms"),
    ("ttft_p99_burst_ms", "TTFT p99 burst ms"), ("ttft_p99_after_ms", "TTFT p99 after ms"),
    ("gap_p50_ms", "gap p50 ms"), ("gap_p99_ms", "gap p99 ms"), ("lag_p50_ms", "loop lag p50 ms"),
    ("lag_p99_ms", "loop lag p99 ms"), ("lag_max_ms", "loop lag max ms"), ("report_p50_ms", "report p50 ms"),
    ("report_p95_ms", "report p95 ms"), ("checks_per_s", "checks/s"), ("shed", "shed"), ("timed_out", "timed out"),
    ("tokens_per_s", "tokens/s"), ("cpu_percent", "CPU % of a core"),
    ("main_cpu_ms_per_stream", "main process CPU ms/stream"),
    ("main_cpu_wait_percent", "main thread waiting for a CPU %"), ("peak_rss_mb", "peak RSS MB"),
    ("driver_cpu_percent", "driver CPU %"),
)
"""The table's columns: each a ``RunSummary`` field and its heading."""


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def markdown(rows: list[RunSummary]) -> str:
    lines = ["| " + " | ".join(heading for _, heading in _COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(getattr(row, name)) for name, _ in _COLUMNS) + " |")
    return "\n".join(lines)


@dataclass
class Comparison:
    """A target against the mock upstream called directly at the same concurrency."""

    target: str
    mode: str
    streams: int
    added_ttft_p50_ms: float
    added_ttft_p99_ms: float
    added_gap_p50_ms: float
    added_gap_p99_ms: float
    tokens_per_s_ratio: float
    cpu_percent_ratio_vs_litellm: float | None = None
    """This proxy's CPU over LiteLLM's at the same load (pass-through rows only)."""
    ttft_p50_ratio_vs_litellm: float | None = None
    """This proxy's added TTFT p50 over LiteLLM's."""

    def text(self) -> str:
        out = (f"{self.target}/{self.mode} @ {self.streams} streams: added TTFT p50 {self.added_ttft_p50_ms:+.2f} ms, "
               f"p99 {self.added_ttft_p99_ms:+.2f} ms; added gap p50 {self.added_gap_p50_ms:+.2f} ms, "
               f"p99 {self.added_gap_p99_ms:+.2f} ms; tokens/s ratio {self.tokens_per_s_ratio:.3f}")
        if self.ttft_p50_ratio_vs_litellm is not None:
            out += f"; added TTFT p50 vs LiteLLM's: x{self.ttft_p50_ratio_vs_litellm:.2f}"
        if self.cpu_percent_ratio_vs_litellm is not None:
            out += f"; CPU vs LiteLLM: x{self.cpu_percent_ratio_vs_litellm:.2f}"
        return out


def comparisons(rows: list[RunSummary]) -> list[Comparison]:
    direct = {r.streams: r for r in rows if r.target == "direct"}
    litellm = {r.streams: r for r in rows if r.target == "litellm"}
    out = []
    for r in rows:
        base = direct.get(r.streams)
        if r.target == "direct" or base is None:
            continue
        out.append(Comparison(
            r.target, r.mode, r.streams,
            r.ttft_p50_ms - base.ttft_p50_ms, r.ttft_p99_ms - base.ttft_p99_ms,
            r.gap_p50_ms - base.gap_p50_ms, r.gap_p99_ms - base.gap_p99_ms,
            r.tokens_per_s / base.tokens_per_s if base.tokens_per_s else float("nan"),
        ))
    for c in out:
        lite = litellm.get(c.streams)
        lite_cmp = next((x for x in out if x.target == "litellm" and x.streams == c.streams), None)
        if c.target != "factcheck" or lite is None or lite_cmp is None:
            continue
        if lite.cpu_percent:
            mine = next(r for r in rows if r.target == c.target and r.mode == c.mode and r.streams == c.streams)
            c.cpu_percent_ratio_vs_litellm = (mine.cpu_percent or 0.0) / lite.cpu_percent
        if lite_cmp.added_ttft_p50_ms > 0:
            c.ttft_p50_ratio_vs_litellm = c.added_ttft_p50_ms / lite_cmp.added_ttft_p50_ms
    return out


@dataclass
class ModeGap:
    """A mode's TTFT p99 against off mode's at the same load, round by round: a round runs
    every target once, one after another, so the two runs of a pair are at most a round
    apart, not the whole invocation; the machine's drift (which moves both) mostly cancels,
    and the median over rounds is the figure. Rounds where either had no first token are
    left out."""

    mode: str
    streams: int
    by_round_ms: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.by_round_ms)

    def text(self) -> str:
        rounds = ", ".join(f"{gap:+.0f}" for gap in self.by_round_ms)
        return (f"factcheck/{self.mode} - factcheck/off @ {self.streams} streams: TTFT p99 by round {rounds} ms "
                f"(median {self.median_ms:+.0f})")


def mode_gaps(rows: list[RunSummary]) -> list[ModeGap]:
    """Every checked mode's ``ModeGap`` against off mode, where both ran."""
    off = {r.streams: r for r in rows if r.target == "factcheck" and r.mode == "off"}
    out = []
    for row in rows:
        base = off.get(row.streams)
        if row.target != "factcheck" or row.mode == "off" or base is None:
            continue
        pairs = zip(row.ttft_p99_by_round_ms, base.ttft_p99_by_round_ms, strict=True)
        gaps = [a - b for a, b in pairs if a is not None and b is not None]
        if gaps:
            out.append(ModeGap(row.mode, row.streams, gaps))
    return out


def _ramp(text: str, token_rate: float, duration: float) -> float:
    """One stream's length (workers start spread over it), at most half the run."""
    stream_s = len(tokenize(text)) / token_rate if token_rate > 0 else 0.05
    return min(stream_s, duration / 2)


def run_all(targets: list[Target], levels: list[int], duration: float, rounds: int, warmup: float,
            token_rate: float, text: str) -> list[RunSummary]:
    pools: dict[tuple[str, str, int], Pool] = {}
    for n in levels:
        if warmup > 0:
            # At the level measured: a process's first burst of n streams is its slowest
            # (connections, memory, the workers' first sessions at that concurrency), which a
            # warm-up of fewer streams left to the first round.
            for target in targets:
                eventloop.run(run_load(target, Load(n, warmup, text, _ramp(text, token_rate, warmup))))
        for round_no in range(rounds):
            shift = round_no % len(targets)
            for target in targets[shift:] + targets[:shift]:
                if target.process is not None:
                    target.process.peak_rss = 0
                    target.process.loop_lag()  # a new window of lag samples
                run = eventloop.run(run_load(target, Load(n, duration, text, _ramp(text, token_rate, duration))))
                pool = pools.setdefault((target.name, target.mode, n), Pool())
                lags = target.process.loop_lag() if target.process is not None else None
                if lags is not None:
                    pool.lags = (pool.lags or []) + lags
                pool.add(run)
                if target.process is not None:
                    pool.peak_rss = max(pool.peak_rss, target.process.peak_rss)
                print(f"  {target.name}/{target.mode} @ {n}: {len(run.results)} streams in {run.elapsed:.1f}s",
                      file=sys.stderr)
    order = {(t.name, t.mode): i for i, t in enumerate(targets)}
    keys = sorted(pools, key=lambda k: (k[2], order[(k[0], k[1])]))
    return [summarise(name, mode, n, pools[(name, mode, n)]) for name, mode, n in keys]


def main(
    streams: Annotated[str, typer.Option(help="comma-separated concurrency levels")] = "1,50",
    duration: Annotated[float, typer.Option(help="seconds per target per round")] = 15.0,
    token_rate: Annotated[float, typer.Option(help="mock upstream tokens/s per stream (0: unlimited)")] = 50.0,
    modes: Annotated[str, typer.Option(help="proxy modes to run: off,annotate,correct")] = "off",
    checker: Annotated[str, typer.Option(help="proxy checker: 'none' (pass-through cost) or 'pipeline'")] = "none",
    litellm: Annotated[bool, typer.Option(help="also run LiteLLM's proxy in pass-through (see litellm_target.py)")] = False,
    rounds: Annotated[int, typer.Option(help="repeat every target this often, rotating the order")] = 1,
    workers: Annotated[int | None, typer.Option(
        help="proxy relay processes (serve --workers; default: the proxy's server.workers, auto)")] = None,
    code: Annotated[Path | None, typer.Option(help="checkout whose middleware the proxy runs (a baseline)")] = None,
    proxy_env: Annotated[list[str] | None, typer.Option(help="KEY=VALUE for the proxy (e.g. "
                                                        "FACTCHECK_CHECK__WORKERS=2), repeatable")] = None,
    warmup: Annotated[float, typer.Option(help="seconds of warm-up per target and level (not measured)")] = 2.0,
    target_cpus: Annotated[str | None, typer.Option(
        help="CPUs (e.g. 0 or 0-1) for the proxy, its check workers and LiteLLM; this driver and the mock "
             "upstream then run on the others, as a deployment's clients and LLM run on other machines "
             "(default: everything shares every CPU)")] = None,
    out: Annotated[Path | None, typer.Option(help="write JSON results here")] = None,
    markdown_out: Annotated[Path | None, typer.Option("--markdown", help="write the markdown table here")] = None,
) -> None:
    """Run the load and print a markdown table plus side-by-side comparisons."""
    levels = [int(s) for s in streams.split(",")]
    on_target, on_load = split_cpus(target_cpus)
    if on_load is not None:
        os.sched_setaffinity(0, on_load)
    upstream = start_mock_upstream(token_rate)
    processes: list[Process] = [upstream]
    try:
        extra = dict(item.split("=", 1) for item in proxy_env or [])
        with spawning_on(on_target):
            proxy = start_proxy(upstream.port, checker, extra, workers=workers, code=code, cpus=on_target)
        processes.append(proxy)
        targets = [Target("direct", "-", f"http://127.0.0.1:{upstream.port}/v1/chat/completions", {}, upstream)]
        for mode in modes.split(","):
            targets.append(Target("factcheck", mode, f"http://127.0.0.1:{proxy.port}/v1/chat/completions",
                                  {"X-Factcheck-Mode": mode}, proxy, compare=mode != "correct"))
        if litellm:
            from load_tests.litellm_target import start_litellm

            with spawning_on(on_target):
                lite = start_litellm(upstream.port)
            processes.append(lite)
            targets.append(Target("litellm", "pass", f"http://127.0.0.1:{lite.port}/v1/chat/completions", {}, lite))
        rows = run_all(targets, levels, duration, rounds, warmup, token_rate, ANSWER)
    finally:
        for process in reversed(processes):
            process.stop()
    table = markdown(rows)
    compared = comparisons(rows)
    gaps = mode_gaps(rows)
    print(table)
    print()
    print("\n".join(c.text() for c in [*compared, *gaps]))
    for row in rows:
        if row.verdicts:
            print(f"verdicts {row.target}/{row.mode} @ {row.streams}: {row.verdicts}")
    config = {"streams": levels, "duration_s": duration, "token_rate": token_rate, "modes": modes.split(","),
              "checker": checker, "rounds": rounds, "workers": workers, "answer_tokens": len(tokenize(ANSWER)),
              "code": str(code) if code else None, "proxy_env": proxy_env or [],
              "cpu_count": os.cpu_count(), "target_cpus": sorted(on_target) if on_target else None}
    if out is not None:
        out.write_text(json.dumps({"config": config, "runs": [asdict(r) for r in rows],
                                   "comparisons": [asdict(c) for c in compared],
                                   "mode_gaps": [{**asdict(g), "median_ms": g.median_ms} for g in gaps]}, indent=2))
    if markdown_out is not None:
        markdown_out.write_text(table + "\n\n" + "\n".join(f"- {c.text()}" for c in [*compared, *gaps]) + "\n")


if __name__ == "__main__":
    typer.run(main)
