"""The RARR guards: how much of a sentence an edit may change, and an editor that only edits
contradicted or unsupported sentences and keeps the original when refused."""

from __future__ import annotations

import pytest

from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.pipeline.editing import EditResult
from middleware.revise.guards import EditGuard, GuardedEditor
from middleware.types import Passage
from tests.middleware.pipeline.test_fava import SENTENCE


def test_guard_limits() -> None:
    guard = EditGuard()
    long = "x" * 200
    assert guard.check(long, "y" * 50 + long[50:]) is None
    assert "50" in guard.check(long, "y" * 51 + long[51:])
    short = "Paris is big."
    assert guard.check(short, "Rome is big.") is None
    assert guard.check(short, "It rains a lot.") is not None  # more than half of a short sentence


class _Rewriter:
    """An editor double that returns a fixed text."""

    name = "fixed"

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    async def edit(self, sentence, verdict, evidence, context=None) -> EditResult:
        self.calls += 1
        return EditResult(original=sentence, text=self.text, backend=self.name)


EVIDENCE = [Passage(id="0", text="The tower was completed in 1889.", provider="input", source="evidence[0]")]


@pytest.mark.parametrize("label", ["attributable", "skipped", "unverified"])
async def test_guard_never_edits_unless_contradicted_or_unsupported(label: str) -> None:
    inner = _Rewriter("Something else entirely.")
    result = await GuardedEditor(inner).edit(SENTENCE, DetailedVerdict(label=label), EVIDENCE)
    assert result.text == SENTENCE and not result.changed and label in (result.rejected or "")
    assert inner.calls == 0


async def test_guard_refuses_large_rewrites_and_keeps_the_original() -> None:
    big = GuardedEditor(_Rewriter("A completely different sentence about something else, long enough."))
    result = await big.edit(SENTENCE, DetailedVerdict(label="contradictory"), EVIDENCE)
    assert result.text == SENTENCE and result.original == SENTENCE and "too large" in result.rejected
    small = GuardedEditor(_Rewriter(SENTENCE.replace("1899", "1889")))
    assert (await small.edit(SENTENCE, DetailedVerdict(label="extrapolatory"), EVIDENCE)).changed
    no_evidence = await small.edit(SENTENCE, DetailedVerdict(label="contradictory"), [])
    assert not no_evidence.changed
