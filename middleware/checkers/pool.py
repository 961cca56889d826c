"""The relay's side of the check workers (``check.workers``): a ``Checker`` whose requests
run in worker processes, so the relay's event loop does only I/O and relaying.

Each request is pinned to one worker (the one holding the fewest requests), which builds
the request's shared state once (``Checker.open`` there) and runs its checks; the relay
sends it the request's context, each sentence, the memory check's closed-book answer when
it comes, and cancellations. Budgets, concurrency caps and load shedding stay on the relay
(``middleware.checking``): it knows the queue. A worker that dies fails its requests' checks
(``unverified``, reason ``error: WorkerGone``), the next requests go to the others, and a
replacement is started in its place (it takes requests once its models are loaded)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
import sys
from collections.abc import Callable, Sequence
from typing import Any

from middleware.checkers.channel import Outbox, read_message
from middleware.interfaces import Checker
from middleware.settings import Settings
from middleware.types import CheckContext, Mode, Sentence, SentenceReport, StreamSummary

log = logging.getLogger(__name__)

CheckerBuilder = Callable[[Settings], Checker]
"""Builds the configured checker from the settings (``middleware.composition.build_checker``)."""
WORKER_STARTUP_S = 600.0
"""How long a worker may take to load its models (and build the demo index) at start."""
RESTART_DELAY_S = (1.0, 60.0)
"""Wait before starting a replacement for a dead worker: the first, then doubled after each
replacement that fails to start, up to the second (a worker that cannot start does not spin)."""


class WorkerGone(RuntimeError):
    """The check worker process ended; what it was running has no answer."""


class CheckWorker:
    """One check worker process and its pipe: calls answered by id, in any order."""

    def __init__(self, index: int, on_exit: Callable[[CheckWorker], None] | None = None) -> None:
        self.index = index
        self.on_exit = on_exit
        """Called when the process ends without being stopped."""
        self.requests = 0
        """Requests pinned to this worker now."""
        self.pid: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._calls = itertools.count()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False
        self._outbox = Outbox(self._write)

    @property
    def alive(self) -> bool:
        return self._reader is not None and not self._reader.done()

    async def start(self, settings: Settings, build: CheckerBuilder) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "middleware.checkers.worker",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        assert self._process.stdout is not None
        self.send((settings, build))
        try:
            _, self.pid = await asyncio.wait_for(read_message(self._process.stdout), WORKER_STARTUP_S)
        except (asyncio.IncompleteReadError, TimeoutError):
            await self.stop()
            raise RuntimeError(f"check worker {self.index} did not start (see its log above)") from None
        self._reader = asyncio.create_task(self._read(self._process.stdout), name=f"check-worker-{self.index}")

    def send(self, message: Any) -> None:
        if self._process is None or self._process.stdin is None or self._process.stdin.is_closing():
            raise WorkerGone(f"check worker {self.index} is not running")
        self._outbox.put(message)

    def _write(self, data: bytes) -> None:
        stdin = self._process.stdin if self._process is not None else None
        if stdin is not None and not stdin.is_closing():  # else it is gone: its reader fails its calls
            stdin.write(data)

    async def call(self, message: Callable[[int], tuple[Any, ...]]) -> Any:
        """Send ``message(call id)`` and wait for its answer; cancelled, the worker is told to
        stop the work."""
        if not self.alive:
            raise WorkerGone(f"check worker {self.index} is not running")
        call = next(self._calls)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call] = answer
        try:
            self.send(message(call))
            return await answer
        except asyncio.CancelledError:
            if self.alive:
                self.send(("cancel", call))
            raise
        finally:
            self._pending.pop(call, None)

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        try:
            while True:
                _, call, ok, value = await read_message(stdout)
                answer = self._pending.get(call)
                if answer is None or answer.done():
                    continue
                if ok:
                    answer.set_result(value)
                else:
                    answer.set_exception(value)
        except asyncio.IncompleteReadError:
            if not self._stopping:
                log.error("check worker %d (pid %s) ended; its checks are reported unverified", self.index,
                          self.pid)
        finally:
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(WorkerGone(f"check worker {self.index} ended"))
            if not self._stopping and self.on_exit is not None:
                self.on_exit(self)

    async def stop(self) -> None:
        process = self._process
        if process is None:
            return
        self._stopping = True
        self._outbox.flush()
        if process.stdin is not None:
            process.stdin.close()  # the worker ends when its input does
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


class WorkerPool:
    """``check.workers`` check worker processes behind the ``Checker`` protocol; ``start``
    before the first request (the app's start-up), ``close`` at the end."""

    def __init__(self, settings: Settings, build: CheckerBuilder) -> None:
        try:
            pickle.dumps(build)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise ValueError(f"the checker builder must be a module-level function (it is sent to each "
                             f"worker by name): {build!r}") from exc
        self.settings = settings
        self.build = build
        """Builds the checker in each worker: a module-level function, pickled by name."""
        self.workers = [CheckWorker(i, self._replace) for i in range(settings.check.workers)]
        self._requests = itertools.count()
        self._restarts: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        await asyncio.gather(*(worker.start(self.settings, self.build) for worker in self.workers))
        log.info("%d check workers started (pids %s)", len(self.workers), [w.pid for w in self.workers])

    async def close(self) -> None:
        self._closed = True
        for restart in self._restarts:
            restart.cancel()
        await asyncio.gather(*self._restarts, return_exceptions=True)
        await asyncio.gather(*(worker.stop() for worker in self.workers))

    def _replace(self, dead: CheckWorker) -> None:
        if not self._closed:
            restart = asyncio.create_task(self._restart(dead), name=f"check-worker-{dead.index}-restart")
            self._restarts.add(restart)
            restart.add_done_callback(self._restarts.discard)

    async def _restart(self, dead: CheckWorker) -> None:
        """Start a replacement for ``dead`` and put it in its place; until it is up, requests
        go to the other workers. A replacement that fails to start is tried again, later."""
        await dead.stop()  # reaped: its process has ended
        delay = RESTART_DELAY_S[0]
        while True:
            await asyncio.sleep(delay)
            worker = CheckWorker(dead.index, self._replace)
            try:
                await worker.start(self.settings, self.build)
            except RuntimeError:
                log.error("check worker %d: its replacement did not start; trying again in %.0f s", dead.index,
                          min(2 * delay, RESTART_DELAY_S[1]))
                delay = min(2 * delay, RESTART_DELAY_S[1])
                continue
            except asyncio.CancelledError:  # the pool closes while it starts
                await worker.stop()
                raise
            self.workers[dead.index] = worker
            log.warning("check worker %d replaced (pid %s -> %s)", dead.index, dead.pid, worker.pid)
            return

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> RemoteChecks:
        alive = [worker for worker in self.workers if worker.alive] or self.workers
        worker = min(alive, key=lambda w: w.requests)
        return RemoteChecks(worker, next(self._requests), context, closed_book)


class RemoteChecks:
    """A request's checks in its worker (a ``RequestChecks``): opened there at once; the
    closed-book answer follows when the relay has it."""

    def __init__(self, worker: CheckWorker, request: int, context: CheckContext,
                 closed_book: asyncio.Future[str | None] | None) -> None:
        self.worker = worker
        self.request = request
        self._open = False
        if worker.alive:
            worker.send(("open", request, context, closed_book is not None))
            worker.requests += 1
            self._open = True
        if closed_book is not None:
            closed_book.add_done_callback(self._send_answer)

    async def check(self, sentence: Sentence, previous: Sequence[str]) -> SentenceReport:
        report: SentenceReport = await self.worker.call(lambda call: ("check", call, self.request, sentence,
                                                                      list(previous)))
        return report

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        summary: StreamSummary = await self.worker.call(lambda call: ("summarize", call, self.request,
                                                                      list(reports), mode))
        return summary

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        self.worker.requests -= 1
        if self.worker.alive:
            self.worker.send(("close", self.request))

    def _send_answer(self, answer: asyncio.Future[str | None]) -> None:
        if not self._open or not self.worker.alive:
            return
        text = None if answer.cancelled() or answer.exception() is not None else answer.result()
        self.worker.send(("answer", self.request, text))
