"""The hand-written dev sets stay consistent with the packaged demo corpus."""

from __future__ import annotations

import json

import pytest

from adapters.demo_upstream import DemoAnswers
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
CORPUS = ROOT / "middleware" / "evidence" / "demo_corpus"
DATA = ROOT / "tests" / "data"


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corpus_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.rglob("*.md")) if p.name != "README.md")


def test_corpus_is_a_few_hundred_titled_documents():
    docs = [p for p in CORPUS.rglob("*.md") if p.name != "README.md"]
    assert len(docs) >= 300
    assert all(p.read_text(encoding="utf-8").startswith("# ") for p in docs)


def test_verify_dev_set_is_consistent(corpus_text):
    rows = _lines("verify_dev.jsonl")
    assert len(rows) >= 80
    types = {r["type"] for r in rows}
    assert types == {"supported", "entity", "number", "date", "relation", "invented", "subjective", "unverifiable"}
    for row in rows:
        if row["wrong"] is not None:
            assert row["wrong"] in row["text"], row["id"]
        if row["doc"] is not None:
            assert (CORPUS / row["doc"]).is_file(), row["id"]


def test_edit_dev_evidence_is_quoted_from_the_corpus(corpus_text):
    rows = _lines("edit_dev.jsonl")
    assert len(rows) >= 30
    for row in rows:
        assert row["text"] != row["original"], row["id"]
        for sentence in row["evidence"]:
            assert sentence in corpus_text, (row["id"], sentence)


def test_demo_answers_load_and_match_keywords():
    answers = DemoAnswers.load()
    assert len(answers.answers) >= 10
    for entry in answers.answers:
        assert answers.answer_for(entry["question"]) == entry["answer"]
