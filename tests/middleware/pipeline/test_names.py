"""Table-driven tests of name normalisation: names with aliases compared, and the mentions of a
name in a text."""

from __future__ import annotations

import pytest

from middleware.pipeline.names import mentions, names_match


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Marie Curie", "Curie", True),  # surname only
        ("Marie Curie", "M. Curie", True),  # initials
        ("J. R. R. Tolkien", "John Ronald Reuel Tolkien", True),
        ("Marie Curie", "Maria Skłodowska-Curie", True),
        ("Marie Curie", "Pierre Curie", False),
        ("the United States", "USA", True),  # aliases and "the"
        ("NASA", "National Aeronautics and Space Administration", True),  # acronym
        ("Harvard", "Harvard University", True),
        ("The Beatles", "Beatles", True),
        ("Penélope Cruz", "Penelope Cruz", True),  # accents
        ("Paris", "Paris Hilton", False),
        ("Warsaw", "Paris", False),
        ("Austria", "Australia", False),
        ("Bombay", "Mumbai", True),
        ("Apple Inc.", "Apple", True),
    ],
)
def test_names_match(a: str, b: str, expected: bool) -> None:
    assert names_match(a, b) is expected
    assert names_match(b, a) is expected


def test_mentions_finds_surname_and_alias() -> None:
    assert mentions("Cruz has modelled for Mango.", "Penélope Cruz")
    assert mentions("He moved to the US in 1933.", "United States")
    assert not mentions("He moved to Canada.", "United States")


def test_mentions_a_generic_head_only_on_its_own() -> None:
    # 'College' of another college, 'Company' of another company, a lowercase verb: no mention
    assert not mentions("Darwin studied at Christ's College, Cambridge.", "Trinity College")
    assert not mentions("It merged with the Thomson-Houston Company in 1892.", "Westinghouse Electric Company")
    # a firm's name without 'Company' ends in no surname; a one-word firm is its word
    assert not mentions("Edison General Electric merged with another firm.", "Westinghouse Electric Company")
    assert mentions("Apple makes phones.", "Apple Inc.")
    assert mentions("Westinghouse Electric merged with it.", "Westinghouse Electric Company")
    assert not mentions("It was built to house the tomb of his wife.", "Sandringham House")
    assert mentions("He taught at the College for ten years.", "Trinity College")
    # a surname after another first name still names a Curie (the pronoun resolution picks which)
    assert mentions("It was named after Poland, Marie Curie's native country.", "Pierre Curie's")
    assert mentions("The physicist Curie shared the prize.", "Marie Curie")
    assert mentions("The canal is about 193 kilometres long.", "Suez Canal")
