"""The planted-error benchmark's scoring arithmetic (``middleware.evaluation.planted``), on fabricated
rows and results: per kind, overall, wrong edits. No model runs here."""

from __future__ import annotations

import pytest

from load_tests.quality.planted import table
from middleware.evaluation.planted import Result, score

pytestmark = pytest.mark.timeout(60)


def _row(rid: str, kind: str, sentence: str, fix: str | None = None) -> dict:
    return {"id": rid, "kind": kind, "sentence": sentence, "expected_fix": fix, "context": "",
            "expected_verdict": "", "evidence": f"evidence of {rid}", "source": "x.md"}


FABRICATED = [
    (_row("n1", "number", "It is 10 m.", "It is 12 m."), Result("n1", "contradictory", "It is 12 m.", "e", 0.1)),
    (_row("n2", "number", "It is 3 m.", "It is 4 m."), Result("n2", "contradictory", "It is 5 m.", "e", 0.2)),
    (_row("n3", "number", "It is 7 m.", "It is 8 m."), Result("n3", "attributable", None, None, 0.3)),
    (_row("n4", "number", "It is 1 m.", "It is 2 m."), Result("n4", "contradictory", "It is  2 m. ", "e", 0.4)),
    (_row("r1", "role_swap", "B beat A."), Result("r1", "contradictory", "A beat B.", "e", 0.5)),
    (_row("r2", "role_swap", "D beat C."), Result("r2", "extrapolatory", None, None, 0.6)),
    (_row("a1", "addition", "X, with Y."), Result("a1", "extrapolatory", None, None, 0.7)),
    (_row("a2", "addition", "X, with Z."), Result("a2", "attributable", None, None, 0.8)),
    (_row("t1", "true", "T1."), Result("t1", "attributable", None, None, 0.9)),
    (_row("t2", "true", "T2."), Result("t2", "contradictory", "T2 changed.", "e", 1.0)),
    (_row("t3", "true", "T3."), Result("t3", "extrapolatory", None, None, 1.1)),
    (_row("t4", "true", "T4."), Result("t4", "attributable", "T4.", None, 1.2)),
]


@pytest.fixture(scope="module")
def metrics() -> dict:
    rows, results = zip(*FABRICATED, strict=True)
    return score(list(rows), list(results))


def test_true_rows(metrics: dict) -> None:
    true = metrics["per_kind"]["true"]
    assert true["n"] == 4
    assert true["false_alarm_rate"] == pytest.approx(1 / 4)
    assert true["flagged_rate"] == pytest.approx(2 / 4)
    assert true["edits"] == 1 and true["wrong_edits"] == 1  # t4's "edit" leaves it unchanged
    assert true["wrong_edit_rate"] == pytest.approx(1 / 4)


def test_number_rows(metrics: dict) -> None:
    number = metrics["per_kind"]["number"]
    assert number["recall"] == pytest.approx(3 / 4)
    assert number["precision"] == pytest.approx(0.75 / (0.75 + 0.25))
    assert number["exact_fix_rate"] == pytest.approx(2 / 4)  # n1, and n4 after whitespace normalisation
    assert number["edits"] == 3 and number["wrong_edits"] == 1  # n2 edited to a still-false value


def test_flag_only_kinds(metrics: dict) -> None:
    role, addition = metrics["per_kind"]["role_swap"], metrics["per_kind"]["addition"]
    assert role["recall"] == pytest.approx(1 / 2) and role["exact_fix_rate"] is None
    assert role["wrong_edits"] == 1 and role["wrong_edit_rate"] == pytest.approx(1 / 2)
    assert addition["recall"] == pytest.approx(1 / 2)  # extrapolatory counts, attributable does not
    assert addition["precision"] == pytest.approx(0.5 / (0.5 + 0.5))  # against the true rows' flagged rate
    assert addition["verdict_accuracy"] == pytest.approx(1 / 2)


def test_overall(metrics: dict) -> None:
    overall = metrics["overall"]
    assert overall["n"] == 12
    assert overall["recall"] == pytest.approx(5 / 8)
    assert overall["precision"] == pytest.approx(5 / 6)  # t2 is the one false alarm
    assert overall["wrong_edits"] == 3 and overall["wrong_edit_rate"] == pytest.approx(3 / 12)
    assert overall["exact_fix_rate"] == pytest.approx(2 / 4)
    assert overall["median_latency_ms"] == pytest.approx(650)
    assert [w["id"] for w in metrics["wrong_edits"]] == ["n2", "r1", "t2"]
    assert metrics["wrong_edits"][0]["gold_evidence"] == "evidence of n2"
    assert "| overall | 12 |" in table(metrics)


def test_results_must_match_rows() -> None:
    rows, results = zip(*FABRICATED[:2], strict=True)
    with pytest.raises(ValueError):
        score(list(rows), list(reversed(results)))
