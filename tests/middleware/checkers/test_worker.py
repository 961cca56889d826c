"""The check worker's side of the channel (middleware/checkers/worker.py): what its answers
carry back to the relay."""

from __future__ import annotations

import asyncio

import pytest

from middleware.checkers.channel import read_message
from middleware.checkers.worker import _result
from middleware.runtime.batcher import BatcherClosed

pytestmark = pytest.mark.timeout(30)


class LibraryError(Exception):
    """An exception class the relay does not import (here: this test module's)."""


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no")


async def _decoded(data: bytes) -> tuple[str, int, bool, object]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return await read_message(reader)


@pytest.mark.parametrize("error", [ValueError("bad"), BatcherClosed("closed")], ids=["builtin", "middleware"])
async def test_an_error_the_relay_can_import_goes_back_as_it_is(error: Exception) -> None:
    _, call, ok, value = await _decoded(_result(7, False, error))
    assert (call, ok, type(value), str(value)) == (7, False, type(error), str(error))


async def test_an_error_of_another_library_goes_back_as_a_runtime_error_naming_it() -> None:
    """Unpickling it would import its library into the relay (onnxruntime's, for one)."""
    _, _, ok, value = await _decoded(_result(1, False, LibraryError("session failed")))
    assert not ok and type(value) is RuntimeError
    assert str(value) == f"{__name__}.LibraryError: session failed"
    _, _, _, value = await _decoded(_result(2, False, Unpicklable("x")))
    assert type(value) is RuntimeError and "Unpicklable" in str(value)


async def test_a_result_goes_back_as_it_is() -> None:
    assert await _decoded(_result(3, True, {"label": "attributable"})) == ("result", 3, True, {"label": "attributable"})
