"""QUIP Data Portrait: n-grams, normalisation, scores, persistence, and upkeep by the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware.evidence.index import LocalIndex
from middleware.evidence.passages import document_passages
from middleware.evidence.portrait import DataPortrait, covered_regions, ngrams, normalise
from tests.support.evidence_doubles import HashEmbedder, write_corpus

CORPUS_TEXT = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."


def test_normalise_and_ngrams() -> None:
    assert normalise("  The\tEiffel \n\n TOWER ") == "the eiffel tower"
    assert normalise("ﬁne") == "fine"  # NFKC folds the ligature
    assert list(ngrams("abcdef", 3)) == ["abc", "bcd", "cde", "def"]
    assert len(list(ngrams("x" * 30))) == 6
    assert list(ngrams("x" * 24)) == []


def test_quip_score() -> None:
    portrait = DataPortrait()
    assert portrait.add_text(CORPUS_TEXT) == len(normalise(CORPUS_TEXT)) - 24
    assert portrait.quip_score("The Eiffel Tower was completed in 1889") == 1.0
    assert portrait.quip_score("the eiffel   TOWER was\ncompleted in 1889") == 1.0
    assert portrait.quip_score("Quantum chromodynamics describes the strong force.") == 0.0
    half = "The Eiffel Tower was completed in 1889, says an unrelated long tail of words"
    assert 0.2 < portrait.quip_score(half) < 0.8
    assert portrait.quip_score("too short") is None
    assert portrait.quip_score(" " * 40 + "short" + " " * 40) is None


def test_save_and_load(tmp_path: Path) -> None:
    portrait = DataPortrait(generation=7)
    portrait.add_text(CORPUS_TEXT)
    portrait.save(tmp_path)
    loaded = DataPortrait.load(tmp_path)
    assert loaded is not None and loaded.generation == 7 and len(loaded) == len(portrait)
    assert loaded.quip_score("completed in 1889 for the World's Fair") == 1.0
    assert DataPortrait.load(tmp_path / "missing") is None


def test_covered_regions_rebuild_each_section_once() -> None:
    doc = "# T\n\nOne is here. Two is here. Three is here. Four is here. Five is here.\n\n## S\n\nSix is here."
    passages = document_passages(doc, "d.md", window=4, stride=2)
    assert len(passages) == 3
    assert list(covered_regions(passages)) == [
        "One is here. Two is here. Three is here. Four is here. Five is here.",
        "Six is here.",
    ]
    other = document_passages("Seven is here.", "e.md")
    assert list(covered_regions(passages + other))[-1] == "Seven is here."


def test_index_builds_adds_to_and_rebuilds_the_portrait(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    directory = tmp_path / "index"
    with LocalIndex(directory, HashEmbedder()) as local:
        local.update([corpus])
        portrait = DataPortrait.load(directory)
        assert portrait is not None and portrait.generation == local.generation
        assert portrait.quip_score("Lake Baikal in Siberia is the deepest lake in the world") == 1.0
        assert portrait.quip_score("Absolute zero is 0 kelvin. It equals minus 273.15 degrees Celsius.") == 1.0

        (corpus / "extra.txt").write_text("Venus has no moons and rotates backwards.")
        local.update([corpus])
        added = DataPortrait.load(directory)
        assert added is not None and added.generation == local.generation
        assert added.quip_score("Venus has no moons and rotates backwards.") == 1.0
        assert added.quip_score("Lake Baikal in Siberia is the deepest lake") == 1.0

        (corpus / "rivers.jsonl").unlink()
        local.update([corpus])
        rebuilt = DataPortrait.load(directory)
        assert rebuilt is not None
        assert rebuilt.quip_score("Lake Baikal in Siberia is the deepest lake") == pytest.approx(0.0, abs=0.1)
        assert rebuilt.quip_score("Venus has no moons and rotates backwards.") == 1.0


def test_index_can_skip_the_portrait(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    with LocalIndex(tmp_path / "index", portrait=False) as local:
        local.update([corpus])
    assert DataPortrait.load(tmp_path / "index") is None
