"""The edit metrics: preservation, F1 of attribution and preservation, and the PURR edit classes."""

from __future__ import annotations

import pytest

from middleware.evaluation.edit_metrics import edit_classes, f1_ap, preservation


def test_preservation_and_f1() -> None:
    assert preservation("abcd", "abcd") == 1.0
    assert preservation("abcd", "abxd") == 0.75
    assert preservation("ab", "a completely different text") == 0.0
    assert f1_ap(0.5, 1.0) == pytest.approx(2 / 3)
    assert f1_ap(0.0, 0.0) == 0.0


def test_purr_edit_classes() -> None:
    assert edit_classes(0.1, 0.9, 0.95) == {"good"}
    assert edit_classes(0.95, 0.2, 0.9) == {"bad", "unnecessary"}
    assert edit_classes(0.5, 0.3, 0.9) == {"bad"}
    assert edit_classes(0.1, 0.9, 0.4) == {"huge"}
    assert edit_classes(0.5, 0.6, 0.9) == set()
