"""Choosing the cut-off for claims checked against structured records, from e2e dump rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from middleware.training import record_threshold as rt


def _row(dataset: str, gold: str, *claims: tuple[str, float | None], records: bool = True) -> dict:
    return {"dataset": dataset, "answer": "a", "mode": "annotate", "gold": gold, "records": records,
            "labels": [c[0] for c in claims], "p_attributable": [c[1] for c in claims]}


def test_only_a_record_holding_answers_claims_move_with_the_cut_off() -> None:
    row = _row("s", "attributable", ("attributable", 0.9), ("extrapolatory", 0.4))
    assert rt.flagged_at(row, 0.5) and not rt.flagged_at(row, 0.4)
    prose = _row("s", "attributable", ("extrapolatory", 0.4), records=False)
    assert rt.flagged_at(prose, 0.4) and rt.flagged_at(prose, 0.1)
    # contradictions and claims without a probability stand at any cut-off; skipped ones never flag
    assert rt.flagged_at(_row("s", "x", ("contradictory", 0.45)), 0.3)
    assert rt.flagged_at(_row("s", "x", ("extrapolatory", None)), 0.0)
    assert not rt.flagged_at(_row("s", "x", ("skipped", None)), 0.9)


def test_rows_from_a_run_at_another_cut_off_are_refused() -> None:
    rt.check_made_at([_row("s", "attributable", ("extrapolatory", 0.49))], 0.5)
    rt.check_made_at([_row("s", "attributable", ("extrapolatory", 0.55), records=False)], 0.5)
    with pytest.raises(ValueError, match="RECORD_THRESHOLD=0.5"):
        rt.check_made_at([_row("s", "attributable", ("extrapolatory", 0.55))], 0.5)


def test_the_choice_weighs_each_set_once_and_stays_high_on_a_tie() -> None:
    # "big": at 0.42 and below one of its two supported sentences is freed (balanced accuracy 50 -> 75)
    big = [_row("big", "attributable", ("extrapolatory", 0.42)), _row("big", "attributable", ("extrapolatory", 0.1)),
           _row("big", "baseless", ("extrapolatory", 0.2))] * 10
    cut, table = rt.choose(big, 0.5, floor=0.3)
    assert cut == 0.42 and table["0.4200"]["big"] == 75.0 and table["0.4300"]["big"] == 50.0
    # "small": below 0.45 its unsupported sentence goes unflagged (100 -> 50); ten times fewer rows, the same weight
    small = [_row("small", "baseless", ("extrapolatory", 0.45)), _row("small", "attributable", ("attributable", 0.9))]
    cut, table = rt.choose(big + small, 0.5, floor=0.3)
    assert cut == 0.5 and table["0.5000"]["mean"] == 75.0 and table["0.4200"]["mean"] == 62.5
    # a set without records counts once, unmoved at every cut-off
    prose = [_row("prose", "attributable", ("extrapolatory", 0.45), records=False),
             _row("prose", "baseless", ("extrapolatory", 0.2), records=False)]
    cut, table = rt.choose(big + prose, 0.5, floor=0.3)
    assert cut == 0.42 and table["0.4200"]["prose"] == table["0.5000"]["prose"] == 50.0


def test_nothing_to_choose_without_records() -> None:
    with pytest.raises(ValueError, match="no answer"):
        rt.choose([_row("s", "attributable", ("extrapolatory", 0.4), records=False)], 0.5)


def test_a_dump_is_read_in_annotate_mode_only_and_must_say_records(tmp_path: Path) -> None:
    path = tmp_path / "dump.jsonl"
    rows = [_row("s", "attributable", ("attributable", 0.9)), _row("s", "attributable", ("attributable", 0.9))]
    rows[1]["mode"] = "correct"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert rt.read_dump(path) == rows[:1]
    del rows[0]["records"]
    path.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(ValueError, match="records"):
        rt.read_dump(path)
