"""The edit gate's FEVER figures (``load_tests.quality.gate_fever``): wrong edits counted on claims
their evidence supports. No model runs here and nothing under ../shared is read."""

from __future__ import annotations

import pytest

from load_tests.quality.gate_fever import figures

pytestmark = pytest.mark.timeout(60)


def test_an_edited_supported_claim_is_a_wrong_edit() -> None:
    rows = [{"id": "a", "label": "SUPPORTS"}, {"id": "b", "label": "REFUTES"}, {"id": "c", "label": "REFUTES"}]
    assert figures(rows, {"a": "x", "b": "y"}) == {"wrong_edits": 1, "refutes_edited": 1}
    assert figures(rows, {}) == {"wrong_edits": 0, "refutes_edited": 0}
