"""Framed messages between the relay and a check worker: a 4-byte length, then a pickle.

Both ends are this package's own code, started from the same installation, so pickle carries
the shared pydantic types (sentences, contexts, reports) as they are."""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

_LENGTH = struct.Struct("!I")


def frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


async def read_message(reader: asyncio.StreamReader) -> Any:
    """The next message; ``asyncio.IncompleteReadError`` when the other end has gone."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(length))
