"""The planted-error benchmark's runner (``load_tests.quality.planted``): the text an edited report
gives. No model runs here; the benchmark itself is ``python -m load_tests.quality.planted``."""

from __future__ import annotations

import pytest

from load_tests.quality.planted import edited_text
from middleware.types import Edit, SentenceReport, Verdict

pytestmark = pytest.mark.timeout(60)


def _report(corrected: str | None, edits: list[Edit]) -> SentenceReport:
    return SentenceReport(index=0, start=0, end=20, text="She won it in 1915.",
                          verdict=Verdict(label="contradictory"), edits=edits, corrected_text=corrected)


def test_edited_text() -> None:
    edit = Edit(start=14, end=18, original="1915", replacement="1911")
    assert edited_text("She won it in 1915.", _report(None, [])) is None
    assert edited_text("She won it in 1915.", _report(None, [edit])) == "She won it in 1911."
    assert edited_text("She won it in 1915.", _report("She won it in 1903.", [edit])) == "She won it in 1903."
