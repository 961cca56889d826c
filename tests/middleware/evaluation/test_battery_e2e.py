"""Scoring whole answers streamed through the proxy (``eval-battery --e2e``), on canned
reports (no server, no ../shared)."""

from __future__ import annotations

from middleware.evaluation.battery_e2e import Answer, Streamed, score, sentence_outcomes


def _answer() -> Answer:
    return Answer("a1", "lfqa_verification", "q?", ["Cats purr.", "Dogs fly.", "Do it now."],
                  ["attributable", "extrapolatory", "attributable"], ["doc"])  # fmt: skip


def _report(start: int, end: int, label: str, revision: dict | None = None) -> dict:
    return {"start": start, "end": end, "text": "x", "verdict": {"label": label}, "revision": revision}


def test_reports_land_on_the_gold_sentence_they_overlap() -> None:
    answer = _answer()
    assert answer.text == "Cats purr. Dogs fly. Do it now." and answer.spans() == [(0, 10), (11, 20), (21, 31)]
    streamed = Streamed(answer, "annotate", reports=[_report(0, 10, "attributable"), _report(11, 19, "contradictory")])
    outcomes = sentence_outcomes(streamed)
    assert [o["labels"] for o in outcomes] == [["attributable"], ["contradictory"], []]


def test_skipped_sentences_are_not_flags_and_changes_are_listed() -> None:
    applied = {"status": "applied", "suggested": "Dogs run.", "evidence_sentence": "Dogs run."}
    streamed = Streamed(_answer(), "correct", reports=[
        _report(0, 10, "attributable"), _report(11, 20, "contradictory", applied), _report(21, 31, "skipped"),
    ])  # fmt: skip
    result = score([streamed])
    assert result["flagged_balanced_accuracy"] == 100.0 and result["true_sentences_flagged"] == 0.0
    assert result["contradiction_precision"] == 100.0 and result["contradiction_recall"] == 100.0
    assert result["unchecked_sentences"] == 1
    assert result["changes"] == [{"answer": "a1", "original": "x", "suggested": "Dogs run.",
                                  "evidence_sentence": "Dogs run.", "gold_of_original": "extrapolatory"}]  # fmt: skip
