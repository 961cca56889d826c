"""The planted-error benchmark (load_tests/quality): its hand-written data is well formed and
its scoring arithmetic is right. No model runs here; the benchmark itself is
``python -m load_tests.quality.planted``."""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path

import pytest

from load_tests.quality.data import CORPUS, MIN_PER_KIND, data_problems, load_rows, row_problems
from load_tests.quality.planted import DATA, edited_text, table
from middleware.evaluation.planted import FIX_KINDS, KINDS, Result, score
from middleware.types import Edit, SentenceReport, Verdict

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_rows(DATA)


def test_corpus_is_the_packaged_one() -> None:
    assert CORPUS.is_dir() and "shared" not in CORPUS.parts
    assert (CORPUS / "people" / "marie-curie.md").is_file()


def test_data_has_no_problems(rows: list[dict]) -> None:
    assert data_problems(rows) == []


def test_counts_reach_the_minimums(rows: list[dict]) -> None:
    kinds = Counter(row["kind"] for row in rows)
    assert set(kinds) == set(KINDS)
    assert all(kinds[k] >= n for k, n in MIN_PER_KIND.items()), kinds
    assert sum(n for k, n in kinds.items() if k != "true") >= 230
    assert len({row["source"] for row in rows}) >= 40


def test_fix_exactly_for_slot_kinds(rows: list[dict]) -> None:
    for row in rows:
        has_fix = row["expected_fix"] is not None
        assert has_fix == (row["kind"] in FIX_KINDS), row["id"]
        if has_fix:
            assert row["expected_fix"] != row["sentence"], row["id"]


def _changed_spans(a: str, b: str) -> int:
    ops = difflib.SequenceMatcher(a=a.split(), b=b.split(), autojunk=False).get_opcodes()
    return sum(tag != "equal" for tag, *_ in ops)


def test_fix_changes_one_span(rows: list[dict]) -> None:
    """The expected fix replaces one contiguous stretch of the planted sentence."""
    for row in rows:
        if row["expected_fix"] is not None:
            assert _changed_spans(row["sentence"], row["expected_fix"]) == 1, row["id"]


def test_row_problems_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nAda was born in 1815.\n", encoding="utf-8")
    good = {"id": "a-1", "kind": "date", "sentence": "Ada was born in 1816.", "context": "",
            "expected_verdict": "contradictory", "expected_fix": "Ada was born in 1815.",
            "evidence": "Ada was born in 1815.", "source": "a.md"}
    assert row_problems(good, tmp_path) == []
    assert row_problems({**good, "evidence": "Ada was born in 1816."}, tmp_path)
    assert row_problems({**good, "expected_fix": None}, tmp_path)
    assert row_problems({**good, "kind": "relation"}, tmp_path)
    assert row_problems({**good, "expected_verdict": "extrapolatory"}, tmp_path)
    assert any("duplicate" in p for p in data_problems([good, good], tmp_path))


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


def _report(corrected: str | None, edits: list[Edit]) -> SentenceReport:
    return SentenceReport(index=0, start=0, end=20, text="She won it in 1915.",
                          verdict=Verdict(label="contradictory"), edits=edits, corrected_text=corrected)


def test_edited_text() -> None:
    edit = Edit(start=14, end=18, original="1915", replacement="1911")
    assert edited_text("She won it in 1915.", _report(None, [])) is None
    assert edited_text("She won it in 1915.", _report(None, [edit])) == "She won it in 1911."
    assert edited_text("She won it in 1915.", _report("She won it in 1903.", [edit])) == "She won it in 1903."
