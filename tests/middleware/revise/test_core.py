"""FAVA markup, edit bookkeeping, the RARR guards and the edit metrics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.evaluation.edit_metrics import edit_classes, f1_ap, preservation
from middleware.pipeline.editing import EditResult
from middleware.pipeline.fava import edited_text, original_text, parse, render
from middleware.revise.edits import apply_edits, diff_edits, EditBuffer
from middleware.revise.guards import EditGuard, GuardedEditor
from middleware.revise.edits import classify
from middleware.types import Edit, Passage, Tag

SENTENCE = "The Eiffel Tower was completed in 1899 by Gustave Eiffel's company."


# ------------------------------------------------------------------ FAVA


def test_render_entity_edit_inside_sentence_tag() -> None:
    start = SENTENCE.index("1899")
    edit = Edit(start=start, end=start + 4, original="1899", replacement="1889", tag="entity")
    markup = render(SENTENCE, [edit], [Tag(type="contradictory", start=0, end=len(SENTENCE), text=SENTENCE)])
    assert markup == (
        "<contradictory>The Eiffel Tower was completed in <entity><delete>1899</delete><mark>1889</mark></entity>"
        " by Gustave Eiffel's company.</contradictory>"
    )
    parsed = parse(markup)
    assert parsed.original == SENTENCE
    assert parsed.edited == SENTENCE.replace("1899", "1889")
    assert [(s.type, s.text, s.replacement) for s in parsed.spans] == [
        ("contradictory", SENTENCE, None), ("entity", "1899", "1889"),
    ]  # fmt: skip
    assert [(e.start, e.original, e.replacement, e.tag) for e in parsed.edits] == [(start, "1899", "1889", "entity")]


def test_render_with_message_offset_and_tag_suggestion() -> None:
    offset = 96  # the sentence's offset in its message; tags are in message offsets
    tag = Tag(type="relation", start=offset + 10, end=offset + 15, text="flows", replacement="runs")
    assert render("The river flows.", tags=[tag], offset=offset) == (
        "The river <relation><delete>flows</delete><mark>runs</mark></relation>."
    )


def test_parse_fava_model_output_with_deletions_insertions_and_sentence_tags() -> None:
    markup = (
        "<entity><delete>Ronaldo</delete><mark>Messi</mark></entity> won the 2022 World Cup. "
        "<subjective>It was the best final ever.</subjective> "
        "<unverifiable><delete>He cried for hours.</delete></unverifiable> He did <relation><mark>not </mark></relation>retire."
    )
    parsed = parse(markup)
    assert parsed.original == (
        "Ronaldo won the 2022 World Cup. It was the best final ever. He cried for hours. He did retire."
    )
    assert parsed.edited == "Messi won the 2022 World Cup. It was the best final ever.  He did not retire."
    kinds = [(s.type, s.replacement) for s in parsed.spans]
    assert kinds == [("entity", "Messi"), ("subjective", None), ("unverifiable", ""), ("relation", "not ")]
    assert apply_edits(parsed.original, parsed.edits) == parsed.edited


def test_parse_is_tolerant() -> None:
    assert edited_text("a </entity>b <Entity><delete>x</delete><mark>y</mark>") == "a b y"
    assert original_text("<unknown>keep</unknown> <mark>new</mark>") == "<unknown>keep</unknown> "


def test_overlapping_spans_are_dropped_not_garbled() -> None:
    text = "abcdefghij"
    edits = [Edit(start=2, end=5, original="cde", replacement="X", tag="entity")]
    tags = [Tag(type="invented", start=4, end=8, text="efgh")]
    markup = render(text, edits, tags)
    assert parse(markup).original == text


_TEXT = st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=60)


@st.composite
def text_with_edits(draw: st.DrawFn) -> tuple[str, list[Edit]]:
    text = draw(_TEXT)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    edits, at = [], 0
    for a, b in zip(cuts[::2], cuts[1::2], strict=False):
        if a < at:
            continue
        replacement = draw(_TEXT.filter(lambda r, a=a, b=b: r != text[a:b]))
        kind = draw(st.sampled_from(["entity", "relation"]))
        edits.append(Edit(start=a, end=b, original=text[a:b], replacement=replacement, tag=kind))
        at = b + 1  # keep edits apart, as an EditBuffer does
    return text, edits


@settings(max_examples=150, deadline=None)
@given(text_with_edits())
def test_fava_round_trip(case: tuple[str, list[Edit]]) -> None:
    text, edits = case
    markup = render(text, edits)
    parsed = parse(markup)
    assert parsed.original == text
    assert parsed.edited == apply_edits(text, edits)
    assert render(parsed.original, parsed.edits) == markup


# ------------------------------------------------------------------ edits


def test_edit_buffer_tracks_original_offsets_and_merges() -> None:
    buffer = EditBuffer(SENTENCE)
    at = SENTENCE.index("1899")
    buffer.replace(at, at + 4, "1889", tag="entity", evidence_index=0)
    current = buffer.text
    company = current.index("Gustave Eiffel's")
    buffer.replace(company, company + len("Gustave Eiffel's"), "the Sauvestre", tag="entity")
    assert buffer.text == SENTENCE.replace("1899", "1889").replace("Gustave Eiffel's", "the Sauvestre")
    assert apply_edits(SENTENCE, buffer.edits()) == buffer.text
    assert [e.original for e in buffer.edits()] == ["1899", "Gustave Eiffel's"]
    # touching an earlier change merges with it; restoring the original removes it
    at = buffer.text.index("1889")
    buffer.replace(at, at + 4, "1899")
    assert [e.original for e in buffer.edits()] == ["Gustave Eiffel's"]
    at = buffer.text.index("the Sauvestre")
    buffer.replace(at + 4, at + 4, "architect ")
    [edit] = buffer.edits()
    assert (edit.original, edit.replacement) == ("Gustave Eiffel's", "the architect Sauvestre")


def test_diff_edits_merges_words_separated_by_space() -> None:
    before = "Edmund Hillary was the leader of the expedition in 1953."
    after = "Edmund Hillary was a member of the expedition in 1953."
    [change] = diff_edits(before, after)
    assert before[change.start : change.end] == "the leader" and change.replacement == "a member"
    assert classify(before, change.start, change.end, change.replacement) == "entity"  # FAVA: nouns
    river = "The Volga flows out of the Caspian Sea."
    [verb] = diff_edits(river, "The Volga flows into the Caspian Sea.")
    assert (river[verb.start : verb.end], verb.replacement) == ("out of", "into")
    assert classify(river, verb.start, verb.end, verb.replacement) == "relation"
    [year] = diff_edits(SENTENCE, SENTENCE.replace("1899", "1889"))
    assert classify(SENTENCE, year.start, year.end, year.replacement) == "entity"


# ------------------------------------------------------------------ guards


def test_guard_limits() -> None:
    guard = EditGuard()
    long = "x" * 200
    assert guard.check(long, "y" * 50 + long[50:]) is None
    assert "50" in guard.check(long, "y" * 51 + long[51:])
    short = "Paris is big."
    assert guard.check(short, "Rome is big.") is None
    assert guard.check(short, "It rains a lot.") is not None  # more than half of a short sentence


class _Rewriter:
    """An editor double that returns a fixed text."""

    name = "fixed"

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    async def edit(self, sentence, verdict, evidence, context=None) -> EditResult:
        self.calls += 1
        return EditResult(original=sentence, text=self.text, backend=self.name)


EVIDENCE = [Passage(id="0", text="The tower was completed in 1889.", provider="input", source="evidence[0]")]


@pytest.mark.parametrize("label", ["attributable", "skipped", "unverified"])
async def test_guard_never_edits_unless_contradicted_or_unsupported(label: str) -> None:
    inner = _Rewriter("Something else entirely.")
    result = await GuardedEditor(inner).edit(SENTENCE, DetailedVerdict(label=label), EVIDENCE)
    assert result.text == SENTENCE and not result.changed and label in (result.rejected or "")
    assert inner.calls == 0


async def test_guard_refuses_large_rewrites_and_keeps_the_original() -> None:
    big = GuardedEditor(_Rewriter("A completely different sentence about something else, long enough."))
    result = await big.edit(SENTENCE, DetailedVerdict(label="contradictory"), EVIDENCE)
    assert result.text == SENTENCE and result.original == SENTENCE and "too large" in result.rejected
    small = GuardedEditor(_Rewriter(SENTENCE.replace("1899", "1889")))
    assert (await small.edit(SENTENCE, DetailedVerdict(label="extrapolatory"), EVIDENCE)).changed
    no_evidence = await small.edit(SENTENCE, DetailedVerdict(label="contradictory"), [])
    assert not no_evidence.changed


# ------------------------------------------------------------------ metrics


def test_preservation_and_f1() -> None:
    assert preservation("abcd", "abcd") == 1.0
    assert preservation("abcd", "abxd") == 0.75
    assert preservation("ab", "a completely different text") == 0.0
    assert f1_ap(0.5, 1.0) == pytest.approx(2 / 3)
    assert f1_ap(0.0, 0.0) == 0.0


def test_purr_edit_classes() -> None:
    assert edit_classes(0.1, 0.9, 0.95) == {"good"}
    assert edit_classes(0.95, 0.2, 0.9) == {"bad", "unnecessary"}
    assert edit_classes(0.5, 0.3, 0.9) == {"bad"}
    assert edit_classes(0.1, 0.9, 0.4) == {"huge"}
    assert edit_classes(0.5, 0.6, 0.9) == set()
