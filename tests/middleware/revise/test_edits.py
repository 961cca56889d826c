"""Edit bookkeeping: an edit buffer keeps original offsets and merges touching changes, and a
word diff's changes are classified the FAVA way."""

from __future__ import annotations

from middleware.revise.edits import EditBuffer, apply_edits, classify, diff_edits
from tests.middleware.pipeline.test_fava import SENTENCE


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
