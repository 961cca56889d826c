"""A check worker process (``python -m middleware.checkers.worker``, started by
``pool.CheckWorker``): it reads its settings and the checker's builder from its stdin
(``middleware.composition.build_checker``, sent by reference), builds the configured checker
once (its models loaded once, in this process), lowers its own scheduling priority
(``check.worker_nice``, ``check.worker_idle``) so the relay, which mostly sleeps, is served
first on a small machine,
and then serves the relay's requests on its own event loop: it opens and closes the
requests' checks (``RequestChecks``, the request's shared state, built once here) and runs
their sentence checks and summaries, each answered by its request id. Its stdout is the
channel back (anything the libraries print goes to stderr)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from middleware.checkers.channel import Outbox, frame, read_message
from middleware.interfaces import Checker, RequestChecks
from middleware import eventloop
from middleware.settings import Settings

log = logging.getLogger(__name__)


class Worker:
    """The requests this worker holds, and the checks and summaries running for them."""

    def __init__(self, checker: Checker, writer: asyncio.StreamWriter) -> None:
        self.checker = checker
        self.outbox = Outbox(writer.write)
        self.requests: dict[int, RequestChecks] = {}
        self.answers: dict[int, asyncio.Future[str | None]] = {}
        self.running: dict[int, asyncio.Task[Any]] = {}

    def handle(self, message: tuple[Any, ...]) -> None:
        kind, *args = message
        getattr(self, f"_{kind}")(*args)

    def _open(self, request: int, context: Any, memory: bool) -> None:
        answer = asyncio.get_running_loop().create_future() if memory else None
        if answer is not None:
            self.answers[request] = answer
        self.requests[request] = self.checker.open(context, answer)

    def _answer(self, request: int, text: str | None) -> None:
        answer = self.answers.get(request)
        if answer is not None and not answer.done():
            answer.set_result(text)

    def _check(self, call: int, request: int, sentence: Any, previous: list[str]) -> None:
        self._run(call, self.requests[request].check(sentence, previous))

    def _summarize(self, call: int, request: int, reports: list[Any], mode: Any) -> None:
        self._run(call, self.requests[request].summarize(reports, mode))

    def _cancel(self, call: int) -> None:
        task = self.running.get(call)
        if task is not None:
            task.cancel()

    def _close(self, request: int) -> None:
        checks = self.requests.pop(request, None)
        if checks is not None:
            checks.close()
        answer = self.answers.pop(request, None)
        if answer is not None:
            answer.cancel()

    def _run(self, call: int, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.running[call] = task
        task.add_done_callback(lambda done: self._reply(call, done))

    def _reply(self, call: int, task: asyncio.Task[Any]) -> None:
        self.running.pop(call, None)
        if task.cancelled():  # the relay cancelled it: nobody waits for an answer
            return
        error = task.exception()
        self.outbox.put_frame(_result(call, error is None, task.result() if error is None else error))

    def close_all(self) -> None:
        for task in self.running.values():
            task.cancel()
        for request in list(self.requests):
            self._close(request)


def lower_priority(nice: int, idle: bool) -> None:
    """Every thread of this process niced by ``nice`` and, with ``idle`` (Linux), under
    ``SCHED_IDLE``; threads started later inherit both. Each thread is set: on Linux a
    priority belongs to a thread, and the imports have already started some (one of a
    pipeline worker's six threads) that ``os.nice`` alone left at the relay's priority."""
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the process's priority is all there is to set
        os.nice(nice)
        return
    for tid in threads:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
            if idle and hasattr(os, "SCHED_IDLE"):
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except ProcessLookupError:  # the thread ended meanwhile
            continue


_RELAY_MODULES = ("builtins", "middleware")
"""Where the class of an exception sent to the relay may live: unpickling imports it there,
and the relay does not import the checks' libraries (an onnxruntime error would load
onnxruntime into the relay, on its event loop)."""


def _result(call: int, ok: bool, value: Any) -> bytes:
    """The answer to ``call``. An exception of another library, or one that does not pickle,
    goes as a RuntimeError naming its type."""
    if isinstance(value, BaseException) and type(value).__module__.split(".")[0] not in _RELAY_MODULES:
        value = RuntimeError(f"{type(value).__module__}.{type(value).__qualname__}: {value}")
    try:
        return frame(("result", call, ok, value))
    except Exception:  # noqa: BLE001 - whatever failed to pickle, the relay still gets an answer
        return frame(("result", call, False, RuntimeError(f"{type(value).__name__}: {value}")))


async def serve(channel: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(channel, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    settings: Settings
    build: Callable[[Settings], Checker]
    settings, build = await read_message(reader)
    logging.basicConfig(level=settings.log_level, stream=sys.stderr,
                        format=f"%(asctime)s check-worker[{os.getpid()}] %(levelname)s %(name)s: %(message)s")
    lower_priority(settings.check.worker_nice, settings.check.worker_idle)
    checker = build(settings.model_copy(update={"check": settings.check.model_copy(update={"workers": 0})}))
    writer.write(frame(("ready", os.getpid())))
    worker = Worker(checker, writer)
    try:
        while True:
            try:
                message = await read_message(reader)
            except asyncio.IncompleteReadError:  # the relay has gone
                return
            worker.handle(message)
    finally:
        worker.close_all()


def main() -> None:
    channel = os.dup(1)
    os.dup2(2, 1)  # what libraries print goes to stderr; stdout is the channel alone
    eventloop.run(serve(channel))


if __name__ == "__main__":
    main()
