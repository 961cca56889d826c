"""Scoring whole answers streamed through the proxy (``eval-battery --e2e``), on canned
reports (no server, no ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

from middleware.evaluation.battery_e2e import (
    Answer,
    Streamed,
    by_task,
    dump,
    gold_label,
    ragtruth_answers,
    regressions,
    score,
    sentence_outcomes,
)


def _answer() -> Answer:
    return Answer.joined("a1", "lfqa_verification", "q?", ["Cats purr.", "Dogs fly.", "Do it now."],
                         ["attributable", "extrapolatory", "attributable"], ["doc"])  # fmt: skip


def _report(start: int, end: int, label: str, revision: dict | None = None, edits: list | None = None) -> dict:
    return {"start": start, "end": end, "text": "x", "verdict": {"label": label}, "revision": revision,
            "edits": edits or []}


def test_reports_land_on_the_gold_sentence_they_overlap() -> None:
    answer = _answer()
    assert answer.text == "Cats purr. Dogs fly. Do it now." and answer.units == [(0, 10), (11, 20), (21, 31)]
    streamed = Streamed(answer, "annotate", reports=[_report(0, 10, "attributable"), _report(11, 19, "contradictory")])
    outcomes = sentence_outcomes(streamed)
    assert [o["labels"] for o in outcomes] == [["attributable"], ["contradictory"], []]


def test_skipped_sentences_are_not_flags_and_changes_are_listed() -> None:
    applied = {"status": "applied", "suggested": "Dogs run.", "evidence_sentence": "Dogs run."}
    edit = {"start": 16, "end": 19, "original": "fly", "replacement": "run"}
    streamed = Streamed(_answer(), "correct", reports=[
        _report(0, 10, "attributable"), _report(11, 20, "contradictory", applied, [edit]), _report(21, 31, "skipped"),
    ])  # fmt: skip
    result = score([streamed])
    assert result["flagged_balanced_accuracy"] == 100.0 and result["true_sentences_flagged"] == 0.0
    # no gold contradiction in the set: a contradiction is scored against the unsupported sentences
    assert result["contradiction_precision"] == 100.0 and result["contradiction_recall"] == 100.0
    assert result["unchecked_sentences"] == 1
    assert result["response_precision"] == 100.0 and result["response_f1"] == 100.0
    assert result["changes"] == [{"answer": "a1", "original": "x", "suggested": "Dogs run.",
                                  "evidence_sentence": "Dogs run.", "gold_of_original": "extrapolatory",
                                  "grounded": False, "in_gold_span": None, "wrong": False, "spans": []}]  # fmt: skip
    assert result["changes_made"] == 1 and result["wrong_edits"] == 0 and result["grounded_fixes"] == 0


def test_the_verifier_alone_is_scored_on_the_same_sentences() -> None:
    streamed = Streamed(_answer(), "annotate", reports=[_report(0, 10, "extrapolatory"), _report(11, 20, "attributable")])
    result = score([streamed], {"a1": ["attributable", "contradictory", "attributable"]})
    assert result["flagged_balanced_accuracy"] == 25.0
    assert result["verifier_alone"]["flagged_balanced_accuracy"] == 100.0
    assert result["verifier_alone"]["unchecked_sentences"] == 0


SPANS = [{"start": 10, "end": 20, "kind": "baseless"}, {"start": 30, "end": 35, "kind": "conflict"},
         {"start": 33, "end": 40, "kind": "baseless"}]  # fmt: skip


def test_ragtruth_sentences_take_the_worst_span_they_overlap() -> None:
    assert gold_label(0, 10, SPANS) == "attributable"  # touching a span's start is no overlap
    assert gold_label(0, 11, SPANS) == "extrapolatory"
    assert gold_label(25, 45, SPANS) == "contradictory"
    assert gold_label(36, 50, SPANS) == "extrapolatory"


def _ragtruth(tmp_path: Path) -> Path:
    response = "The cafe opens at 9. It serves tea. It has free WiFi."
    rows = [
        {"id": "ragtruth-1", "split": "test", "task_type": "Data2txt", "question": None, "context": ["{'hours': '8-5'}"],
         "response": response, "spans": [{"start": 18, "end": 19, "kind": "conflict", "text": "9"},
                                         {"start": 36, "end": 53, "kind": "baseless", "text": "It has free WiFi."}]},
        {"id": "ragtruth-2", "split": "train", "task_type": "QA", "question": "Why?", "context": ["a"],
         "response": "Because.", "spans": []},
    ]  # fmt: skip
    (tmp_path / "ragtruth").mkdir()
    (tmp_path / "ragtruth" / "ragtruth.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return tmp_path


def test_ragtruth_answers_are_cut_by_the_proxys_segmenter_and_labelled_by_span(tmp_path: Path) -> None:
    [answer] = ragtruth_answers(_ragtruth(tmp_path), "test")
    assert answer.sentences == ["The cafe opens at 9.", "It serves tea.", "It has free WiFi."]
    assert answer.gold == ["contradictory", "attributable", "extrapolatory"]
    assert answer.task == "Data2txt" and answer.hallucinated and answer.question  # an instruction for the model
    streamed = Streamed(answer, "annotate", reports=[
        _report(0, 20, "contradictory"), _report(21, 35, "extrapolatory"), _report(36, 53, "skipped")])  # fmt: skip
    result = score([streamed])
    # against gold contradictions where the set has them: one reported, one right
    assert result["contradiction_precision"] == 100.0 and result["contradiction_recall"] == 100.0
    assert result["true_sentences_flagged"] == 100.0 and result["unchecked_sentences"] == 1
    assert list(by_task([streamed])) == ["Data2txt"]


def test_the_gate_holds_every_figure_it_names_within_the_tolerance() -> None:
    before = {"ragtruth/annotate": {"flagged_balanced_accuracy": 70.0, "response_f1": 60.0, "true_sentences_flagged": 30.0}}
    same = {"ragtruth/annotate": {"flagged_balanced_accuracy": 69.2, "response_f1": None, "true_sentences_flagged": 30.9}}
    assert regressions(same, before) == []
    assert regressions(same, before | {"_about": "a note", "expertqa/annotate": before["ragtruth/annotate"]}) == []
    worse = {"ragtruth/annotate": {"flagged_balanced_accuracy": 68.9, "response_f1": 60.0, "true_sentences_flagged": 31.5}}
    drops = regressions(worse, before)
    assert len(drops) == 2 and "flagged_balanced_accuracy" in drops[0] and "true_sentences_flagged" in drops[1]


def test_a_ragtruth_change_is_judged_against_the_spans_and_the_documents(tmp_path: Path) -> None:
    [answer] = ragtruth_answers(_ragtruth(tmp_path), "test")
    answer.documents = ["The cafe opens at 8."]
    fix = {"start": 18, "end": 19, "original": "9", "replacement": "8"}
    wrong = {"start": 24, "end": 30, "original": "serves", "replacement": "sells"}
    applied = {"status": "applied", "suggested": "s", "evidence_sentence": "e"}
    streamed = Streamed(answer, "correct", reports=[
        _report(0, 20, "contradictory", applied, [fix]), _report(21, 35, "contradictory", applied, [wrong])])
    result = score([streamed])
    first, second = result["changes"]
    assert first["grounded"] and first["in_gold_span"] and not first["wrong"]
    assert not second["grounded"] and second["in_gold_span"] is False and second["wrong"]  # a right sentence changed
    assert (result["changes_made"], result["grounded_fixes"], result["wrong_edits"]) == (2, 1, 1)
    assert result["conflict_spans_fixed"] == 100.0
    # the conflict '9' is a figure: one of the value conflicts correct mode can fix, and fixed
    assert (result["value_conflicts"], result["value_conflicts_fixed"]) == (1, 100.0)
    unfixed = score([Streamed(answer, "correct", reports=[_report(21, 35, "contradictory", applied, [wrong])])])
    assert (unfixed["value_conflicts"], unfixed["value_conflicts_fixed"]) == (1, 0.0)


def test_a_time_is_a_value_conflict_and_a_time_written_differently_is_stated() -> None:
    from middleware.evaluation.battery_e2e import stated, value_conflicts

    text = "The ambiance is casual. It is open from 11 am to 7 pm."
    spans = [(16, 22, "conflict"), (40, 53, "conflict")]
    answer = Answer("a", "ragtruth", "q", text, [(0, 23), (24, 54)], ["contradictory"] * 2, [], spans=spans)
    # 'casual' parsed alone is a proper noun; in its sentence it is no name
    assert value_conflicts(answer) == [(40, 53)]
    assert stated("5 pm", "monday: 11:00-17:00 (11:00 am to 5:00 pm)") and stated("4.0", "stars: 4.0")
    assert not stated("6 pm", "monday: 11:00-17:00 (11:00 am to 5:00 pm)")


def test_a_dump_row_says_whether_its_answers_documents_hold_records(tmp_path: Path) -> None:
    """What ``factcheck fit-record-threshold`` relabels: a record (a dict as Python prints it, read
    as the proxy reads a request's documents) against prose."""
    record = Answer.joined("r1", "ragtruth", "q?", ["It has WiFi."], ["attributable"],
                           ["{'name': 'Cafe Uno', 'attributes': {'WiFi': 'free', 'OutdoorSeating': False}}"])  # fmt: skip
    streamed = {("ragtruth", "annotate"): [Streamed(record, "annotate"), Streamed(_answer(), "annotate")]}
    path = tmp_path / "dump.jsonl"
    dump(streamed, {}, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["answer"], r["records"]) for r in rows] == [("r1", True)] + [("a1", False)] * 3
