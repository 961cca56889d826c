"""The planted-error benchmark's data (``load_tests.quality.data``, ``planted.jsonl``): the corpus is
the packaged one, the hand-written rows are well formed and reach the minimum counts, each fix
changes one span, and the row checks find what is wrong. No model runs here."""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path

import pytest

from load_tests.quality.data import CORPUS, MIN_PER_KIND, data_problems, load_rows, row_problems
from load_tests.quality.planted import DATA
from middleware.evaluation.planted import FIX_KINDS, KINDS

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
