"""Framed messages between the relay and a check worker: a 4-byte length, then a pickle.

Both ends are this package's own code, started from the same installation, so pickle carries
the shared pydantic types (sentences, contexts, reports) as they are. Each end sends through
an ``Outbox``: the messages of one turn of its event loop go out in one write."""

from __future__ import annotations

import asyncio
import pickle
import struct
from collections.abc import Callable
from typing import Any

_LENGTH = struct.Struct("!I")


def frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


async def read_message(reader: asyncio.StreamReader) -> Any:
    """The next message; ``asyncio.IncompleteReadError`` when the other end has gone."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(length))


class Outbox:
    """Messages to one pipe, written together once per turn of the event loop (under load the
    relay sends hundreds of checks a second: one write, not one system call, per turn).
    ``write`` is the pipe's; ``flush`` writes what is waiting now (before the pipe closes)."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._frames: list[bytes] = []

    def put(self, message: Any) -> None:
        self.put_frame(frame(message))

    def put_frame(self, data: bytes) -> None:
        """A message already framed."""
        if not self._frames:
            asyncio.get_running_loop().call_soon(self.flush)
        self._frames.append(data)

    def flush(self) -> None:
        if self._frames:
            frames, self._frames = self._frames, []
            self._write(b"".join(frames))
