"""The attribution report read from the sentence reports: only passages that decided a
sentence's verdict, each linked to the sentences it supports or contradicts, chosen to cover
the claims' questions; auto-AIS against the report."""

from __future__ import annotations

import numpy as np
import pytest

from middleware.pipeline.attribution import attribution_report, select_report
from middleware.types import Passage, Question, SentenceReport, Verdict

CURIE = Passage(id="curie", text="Marie Curie was born in Warsaw in 1867.", provider="index", source="curie.md")
NOBEL = Passage(id="nobel", text="Curie won the Nobel Prize in Chemistry in 1911.", provider="index", source="nobel.md")
UNIX = Passage(id="unix", text="Unix was developed at Bell Labs in 1969.", provider="index", source="unix.md")
"""The distractor: found for a sentence (a shared year, a shared word), deciding nothing."""


def report(index: int, label: str, decided_by: Passage | None, evidence: list[Passage], p: float = 0.9,
           questions: int = 1) -> SentenceReport:
    scores = {"attributable": p if label == "attributable" else 0.05, "extrapolatory": 0.05,
              "contradictory": p if label == "contradictory" else 0.05}
    return SentenceReport(
        index=index, start=0, end=1, text=f"sentence {index}", evidence=evidence,
        verdict=Verdict(label=label, scores=scores, evidence_id=decided_by.id if decided_by else None),
        questions=[Question(text=f"q{index}.{i}") for i in range(questions)],
    )


def test_a_distractor_passage_is_not_in_the_report():
    reports = [
        report(0, "attributable", CURIE, [CURIE, UNIX]),
        report(1, "contradictory", NOBEL, [UNIX, NOBEL]),
        report(2, "extrapolatory", UNIX, [UNIX], p=0.6),  # its best passage neither supports nor contradicts it
        report(3, "skipped", None, []),
        report(4, "attributable", NOBEL, [NOBEL, CURIE], p=0.8),
    ]
    result = attribution_report(reports)
    assert [p.id for p in result.passages] == ["curie", "nobel"]
    assert [(link.passage_id, link.supports, link.contradicts) for link in result.links] == [
        ("curie", [0], []), ("nobel", [4], [1])]
    assert result.alignment == {0: ["curie"], 4: ["nobel"]}
    # mean over the four checked sentences of P(attributable) against the deciding passage, 0 when not in the report
    assert result.attr_auto == pytest.approx((0.9 + 0.05 + 0.0 + 0.8) / 4)


def test_no_passage_decided_anything_no_report():
    reports = [report(0, "extrapolatory", UNIX, [UNIX]), report(1, "unverified", None, [])]
    result = attribution_report(reports)
    assert result.passages == [] and result.links == [] and result.alignment == {}
    assert result.attr_auto == 0.0
    assert attribution_report([report(0, "skipped", None, [])]).attr_auto is None


def test_a_verdict_decided_by_a_passage_outside_its_evidence_links_nothing():
    assert attribution_report([report(0, "attributable", CURIE, [NOBEL])]).passages == []


def test_more_passages_than_room_the_report_covers_the_most_questions():
    passages = [Passage(id=f"p{i}", text=f"fact {i}", provider="web", source=f"https://x/{i}") for i in range(7)]
    # p0 decides sentences 0 and 1; p5 a sentence of four questions; p6 one of low confidence
    reports = [report(0, "attributable", passages[0], passages[:1]), report(1, "contradictory", passages[0], passages[:1])]
    reports += [report(i, "attributable", passages[i - 1], [passages[i - 1]]) for i in range(2, 6)]
    reports += [report(6, "attributable", passages[5], [passages[5]], questions=4),
                report(7, "attributable", passages[6], [passages[6]], p=0.3)]
    result = attribution_report(reports, m=3)
    assert [p.id for p in result.passages] == ["p0", "p1", "p5"]  # in the order of the first sentence each decides
    assert result.links[0].supports == [0] and result.links[0].contradicts == [1]


def test_select_report_maximises_the_cover_of_the_questions():
    relevance = np.array([[0.9, 0.0, 0.2], [0.0, 0.1, 0.8], [0.0, 0.1, 0.7]])
    assert select_report(relevance, m=2) == [0, 2]
    assert select_report(np.zeros((0, 2)), m=5) == [0, 1] and select_report(np.zeros((3, 0))) == []
