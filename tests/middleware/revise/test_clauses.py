"""The clause an edit changes: read alone by the gate beside the whole sentence."""

from __future__ import annotations

import pytest

from middleware.revise.clauses import edited_clause
from middleware.types import Edit


def _edit(sentence: str, old: str, new: str) -> Edit:
    start = sentence.index(old)
    return Edit(start=start, end=start + len(old), original=old, replacement=new, tag="entity")


@pytest.mark.parametrize(
    ("sentence", "old", "new", "clause"),
    [
        ("Four alleged attackers were killed, but their affiliation remains unclear.", "Four", "Three",
         ("Four alleged attackers were killed", "Three alleged attackers were killed")),
        ("Thirty-one passengers were evaluated at the airport, but none were transported to the hospital.",
         "Thirty-one", "Fifteen",
         ("Thirty-one passengers were evaluated at the airport", "Fifteen passengers were evaluated at the airport")),
        # a conjoined verb with no subject of its own takes the one it shares
        ("The company was founded in 1998 and is headquartered in Boston.", "Boston", "Austin",
         ("The company is headquartered in Boston", "The company is headquartered in Austin")),
        ("The company was founded in 1998 and is headquartered in Boston.", "1998", "1999",
         ("The company was founded in 1998", "The company was founded in 1999")),
    ],
)  # fmt: skip
def test_the_clause_holding_the_edit_is_read_as_written_and_as_edited(sentence, old, new, clause) -> None:
    assert edited_clause(sentence, [_edit(sentence, old, new)]) == clause


@pytest.mark.parametrize(
    ("sentence", "old"),
    [
        ("The bridge opened in 1931.", "1931"),  # one clause: the sentence itself
        ("Neil Armstrong, who was born in 1931, walked on the Moon.", "1931"),  # a relative clause reads badly alone
    ],
)
def test_no_clause_where_the_sentence_is_one_or_the_edit_is_subordinate(sentence: str, old: str) -> None:
    assert edited_clause(sentence, [_edit(sentence, old, "1928")]) is None


def test_edits_in_two_clauses_have_no_one_clause() -> None:
    sentence = "The company was founded in 1998 and is headquartered in Boston."
    assert edited_clause(sentence, [_edit(sentence, "1998", "1999"), _edit(sentence, "Boston", "Austin")]) is None
