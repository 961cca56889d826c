"""The editor prompts' parsers: the agreement verdict and the span and replacement of an edit."""

from __future__ import annotations

from middleware.revise.prompts import parse_agreement, parse_edit


def test_prompt_parsers() -> None:
    assert parse_agreement("Statement says: x\nEvidence says: y\nVerdict: Disagree.") == "disagree"
    assert parse_agreement("**Verdict:** agree") == "agree"
    assert parse_agreement("I think they disagree") is None
    assert parse_edit('Span: "the leader"\nReplacement: a member') == ("the leader", "a member")
    assert parse_edit("Span: not\nReplacement:") == ("not", "")
    assert parse_edit("no idea") is None
