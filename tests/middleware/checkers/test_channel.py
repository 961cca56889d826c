"""The relay-worker channel: framed pickles, and an ``Outbox`` that writes one turn's messages
in one write, in order."""

from __future__ import annotations

import asyncio

import pytest

from middleware.checkers.channel import Outbox, read_message

pytestmark = pytest.mark.timeout(30)


async def test_the_messages_of_one_turn_go_out_in_one_write_in_order():
    writes: list[bytes] = []
    outbox = Outbox(writes.append)
    for i in range(5):
        outbox.put(("check", i))
    assert writes == []  # nothing before the turn ends
    await asyncio.sleep(0)
    assert len(writes) == 1
    outbox.put(("close", 9))
    outbox.flush()  # at once, e.g. before the pipe closes
    assert len(writes) == 2
    await asyncio.sleep(0)
    assert len(writes) == 2  # the scheduled flush found nothing left
    reader = asyncio.StreamReader()
    reader.feed_data(b"".join(writes))
    reader.feed_eof()
    assert [await read_message(reader) for _ in range(6)] == [("check", i) for i in range(5)] + [("close", 9)]
    with pytest.raises(asyncio.IncompleteReadError):
        await read_message(reader)
