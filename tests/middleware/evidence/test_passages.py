"""The passage splitter: windows, heading breaks, offsets, titles, ids."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from middleware.evidence.passages import embedding_text, heading_text, document_passages, windows
from middleware.types import Passage


@given(st.integers(0, 40), st.integers(1, 6), st.integers(1, 6))
def test_windows_cover_every_unit_and_every_adjacent_pair(n: int, window: int, stride: int) -> None:
    spans = windows(n, window, stride)
    covered = {i for first, last in spans for i in range(first, last + 1)}
    assert covered == set(range(n))
    assert all(last - first + 1 <= window for first, last in spans)
    assert all(last - first + 1 == min(window, n) for first, last in spans)
    assert len({s for s, _ in spans}) == len(spans)
    if stride < window:
        pairs = {(i, i + 1) for first, last in spans for i in range(first, last)}
        assert pairs == {(i, i + 1) for i in range(n - 1)}


def test_windows_examples() -> None:
    assert windows(0, 4, 2) == []
    assert windows(3, 4, 2) == [(0, 2)]
    assert windows(5, 4, 1) == [(0, 3), (1, 4)]
    assert windows(7, 4, 2) == [(0, 3), (2, 5), (3, 6)]
    assert windows(8, 4, 4) == [(0, 3), (4, 7)]


DOC = """# Solar System

The Sun is a star. Mercury is the closest planet to the Sun. Venus is the hottest planet.
Earth has one moon. Mars has two moons. Jupiter is the largest planet.

## Outer planets

Saturn has rings. Uranus rotates on its side.

```python
print("Not a sentence. Never indexed.")
```

Neptune is the farthest planet.
"""


def test_offsets_point_into_the_source_and_passages_keep_source_and_title() -> None:
    passages = document_passages(DOC, "docs/solar.md", url="https://example.org/solar")
    assert passages
    for p in passages:
        assert DOC[p.start : p.end] == p.text
        assert p.source == "docs/solar.md" and p.url == "https://example.org/solar"
        assert p.title == "Solar System" and p.provider == "index"


def test_windows_of_four_sentences_break_at_headings_and_code() -> None:
    texts = [p.text for p in document_passages(DOC, "s", window=4, stride=2)]
    assert texts[0] == (
        "The Sun is a star. Mercury is the closest planet to the Sun. Venus is the hottest planet.\nEarth has one moon."
    )
    assert texts[1].startswith("Venus is the hottest planet.") and texts[1].endswith("Jupiter is the largest planet.")
    assert "Saturn has rings. Uranus rotates on its side." in texts
    assert "Neptune is the farthest planet." in texts
    assert not any("#" in t or "print" in t or "Outer planets" in t for t in texts)
    assert len(texts) == 4


def test_stride_one_is_rarr_sliding_window() -> None:
    texts = [p.text for p in document_passages(DOC, "s", window=4, stride=1)]
    assert sum(t.startswith("Mercury is") for t in texts) == 1
    assert sum(t.startswith("Venus is") for t in texts) == 1
    assert len(texts) == 3 + 1 + 1


def test_title_falls_back_to_default_and_given_title_wins() -> None:
    plain = "Just a sentence. Another one."
    assert document_passages(plain, "a.txt", default_title="a")[0].title == "a"
    assert document_passages(plain, "a.txt")[0].title is None
    assert document_passages(DOC, "s", title="Given")[0].title == "Given"


def test_ids_are_stable_and_unique() -> None:
    first = document_passages(DOC, "s")
    again = document_passages(DOC, "s")
    assert [p.id for p in first] == [p.id for p in again]
    assert len({p.id for p in first}) == len(first)
    assert {p.id for p in document_passages(DOC, "other")}.isdisjoint(p.id for p in first)


def test_context_provider_and_empty_text() -> None:
    assert document_passages("", "messages[0]") == []
    assert document_passages("   \n\n", "messages[0]") == []
    p = document_passages("The request says so.", "messages[0]", provider="context")[0]
    assert p.provider == "context" and p.start == 0 and p.end == len(p.text)


def test_heading_text() -> None:
    assert heading_text("## Early life ##\n") == "Early life"
    assert heading_text("# Title") == "Title"


def test_embedding_text_prefixes_a_missing_title() -> None:
    p = Passage(id="1", text="It is 0 kelvin.", provider="index", source="s", title="Absolute zero")
    assert embedding_text(p) == "Absolute zero. It is 0 kelvin."
    named = p.model_copy(update={"text": "Absolute zero is 0 kelvin."})
    assert embedding_text(named) == "Absolute zero is 0 kelvin."
