"""FAVA markup: edits rendered inside sentence tags at message offsets, model output parsed
tolerantly, overlapping spans dropped, and a round trip of any text with edits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.pipeline.fava import edited_text, original_text, parse, render
from middleware.revise.edits import apply_edits
from middleware.types import Edit, Tag

SENTENCE = "The Eiffel Tower was completed in 1899 by Gustave Eiffel's company."


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
