"""Structured data read field by field (``fields.py``: the ``field_polarity`` rule)."""

from __future__ import annotations

import pytest

from middleware.evidence.request_passages import readable
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.verifiers import SlotsVerifier, passages_from_texts
from middleware.pipeline.verifiers.fields import (
    field_mismatches,
    field_value_mismatches,
    swaps_field,
    swaps_field_value,
    yes_no_fields,
)
from tests.support.pipeline_doubles import HashingEmbedder

pytestmark = pytest.mark.usefixtures("warm_spacy")

RECORD = readable(str({
    "name": "Finch & Fork", "city": "Santa Barbara",
    "attributes": {"OutdoorSeating": False, "RestaurantsReservations": True, "WiFi": "free", "Music": False,
                   "BusinessParking": {"street": False, "garage": True}, "Ambience": {"casual": False}},
}))  # fmt: skip
EVIDENCE = passages_from_texts([RECORD])


def test_yes_no_fields_are_read_with_their_parent_object():
    fields = {(f.label, f.parent, f.value) for f in yes_no_fields(EVIDENCE)}
    assert ("Outdoor Seating", "attributes", False) in fields
    assert ("street", "Business Parking", False) in fields and ("garage", "Business Parking", True) in fields
    assert not any(f.label == "WiFi" for f in yes_no_fields(EVIDENCE))  # 'free' is no yes/no


@pytest.mark.parametrize(("claim", "stated"), [
    ("The restaurant offers outdoor seating.", "Outdoor Seating: no"),
    ("Guests can enjoy live music and outdoor seating.", "Outdoor Seating: no"),
    ("It does not take reservations.", "Restaurants Reservations: yes"),
    ("Reservations are not accepted.", "Restaurants Reservations: yes"),
    ("Street parking is available.", "street: no"),
    ("The ambiance is casual.", "casual: no"),
])  # fmt: skip
def test_a_claim_stating_the_opposite_of_a_field_is_a_located_contradiction(claim, stated):
    found = field_mismatches(claim, EVIDENCE)
    assert stated in [m.replacement for m in found]
    first = next(m for m in found if m.replacement == stated)
    assert first.rule == "field_polarity" and first.kind == "negation"
    assert RECORD[first.evidence_span[0]:first.evidence_span[1]] == stated


@pytest.mark.parametrize("claim", [
    "The restaurant has no outdoor seating.",
    "There is no outdoor seating, but it takes reservations.",
    "While it does not offer outdoor seating, it takes reservations.",
    "It doesn't provide street parking, but garage parking is available.",
    "The restaurant is on State Street.",  # a bare 'street' is an address, not the parking field
    "Guests praise the casual staff.",  # 'casual' of Ambience, but no ambiance named
    "It offers free WiFi.",
])  # fmt: skip
def test_claims_that_agree_or_do_not_name_the_field_are_left_alone(claim):
    assert field_mismatches(claim, EVIDENCE) == []


async def test_the_slots_verifier_reports_the_field_and_the_rule_switches_off():
    verdict = await SlotsVerifier(Aligner(HashingEmbedder())).verify("The restaurant offers outdoor seating.", EVIDENCE)
    assert verdict.label == "contradictory" and [r.name for r in verdict.rules] == ["field_polarity"]
    assert verdict.evidence_sentence == "Outdoor Seating: no" and "Outdoor Seating: no" in verdict.reason
    off = SlotsVerifier(Aligner(HashingEmbedder()), disabled=("field_polarity",))
    assert (await off.verify("The restaurant offers outdoor seating.", EVIDENCE)).label != "contradictory"


def test_a_records_line_is_told_from_prose():
    from middleware.pipeline.verifiers.fields import is_record

    assert is_record("name: Kogilicious; address: 956 Embarcadero Del Norte; business stars: 4.0")
    assert not is_record("The tower is 330 metres tall; it was finished in 1889.")
    assert not is_record("Note: the museum closes at 6.")


async def test_a_value_of_another_field_of_a_record_is_no_contradiction():
    """RAGTruth test, correct mode: '4.0 out of 5 stars' was 'fixed' to '4.0 out of 956 stars',
    the address's number, read from the record's line as if it were one sentence."""
    record = passages_from_texts([readable(str({
        "name": "Kogilicious", "address": "956 Embarcadero Del Norte", "city": "Isla Vista", "state": "CA",
        "categories": "Korean, Restaurants", "business_stars": 4.0}))])  # fmt: skip
    claim = "Kogilicious is a Korean restaurant located in Isla Vista, California, with a rating of 4.0 out of 5 stars."
    verdict = await SlotsVerifier(Aligner(HashingEmbedder())).verify(claim, record)
    assert verdict.label != "contradictory" and "956" not in (verdict.reason or "")


RATED = readable(str({
    "name": "Finch & Fork", "city": "Santa Barbara", "business_stars": 4.0,
    "review_info": [{"review_stars": 5.0, "review_text": "Great brunch."}, {"review_stars": 1.0, "review_text": "Meh."},
                    {"review_stars": 5.0, "review_text": "Lovely."}],
}))  # fmt: skip
RATED_EVIDENCE = passages_from_texts([RATED])


@pytest.mark.parametrize(("claim", "given", "replacement"), [
    ("With an average rating of 4.5 stars out of 5, it is popular.", "4.5", "4.0"),
    ("The business has a rating of 4.5 stars.", "4.5", "4.0"),
    ("It has a 3.5-star rating.", "3.5", "4.0"),
    ("The restaurant has three and a half stars out of five.", "three and a half", "4.0"),
    ("A reviewer gave it three stars.", "three", None),  # one review: which one is not known, flagged only
])  # fmt: skip
def test_a_number_no_field_holds_is_a_located_contradiction(claim, given, replacement):
    found = field_value_mismatches(claim, RATED_EVIDENCE)
    assert [(m.text, m.replacement, m.rule, m.kind) for m in found] == [(given, replacement, "field_value", "number")]


@pytest.mark.parametrize("claim", [
    "It has a 4.0-star rating.",  # the record's own field
    "Rated 4 out of 5 stars by its customers.",
    "One reviewer gave it five stars.",  # a nested field holds it
    "It gets nearly 4.5 stars.",  # approximate
    "One reviewer gave it a perfect rating of 10.",  # another scale
    "The reviews average 3.7 stars.",  # the nested field's mean (5, 1, 5)
    "Its address is 4 State Street.",  # no field's noun
])  # fmt: skip
def test_numbers_a_field_holds_or_that_name_no_field_are_left_alone(claim):
    assert field_value_mismatches(claim, RATED_EVIDENCE) == []


async def test_a_number_a_field_holds_is_supported_and_the_rule_switches_off():
    verifier = SlotsVerifier(Aligner(HashingEmbedder()))
    verdict = await verifier.verify("The business has a rating of 4.5 stars.", RATED_EVIDENCE)
    assert verdict.label == "contradictory" and [r.name for r in verdict.rules] == ["field_value"]
    held = await verifier.verify("The business has a rating of 4.0 stars.", RATED_EVIDENCE)
    assert "4.0" not in ["The business has a rating of 4.0 stars."[s:e] for s, e in held.unsupported]
    off = SlotsVerifier(Aligner(HashingEmbedder()), disabled=("field_value",))
    assert (await off.verify("The business has a rating of 4.5 stars.", RATED_EVIDENCE)).label != "contradictory"


def test_a_field_swap_puts_the_records_own_value_in_place_of_a_number_no_field_holds():
    record = RATED.splitlines()[0].removeprefix("- ")
    claim = "The business has a rating of 4.5 stars."
    at = claim.index("4.5")
    assert swaps_field_value(claim, [(at, at + 3, "4.0")], record)
    assert not swaps_field_value(claim, [(at, at + 3, "5.0")], record)  # not the record's own value
    assert swaps_field_value(claim, [(at + 2, at + 3, "0")], record)  # the editor's minimal form: '5' -> '0'
    held = "The business has a rating of 4.0 stars."
    assert not swaps_field_value(held, [(at, at + 3, "4.0")], record)  # nothing wrong to fix
    assert not swaps_field_value(claim, [(at, at + 3, "4.0")], "The tower is 330 metres tall.")  # no record


def test_a_number_given_to_the_nested_field_is_flagged_not_replaced_by_the_records_own():
    """RAGTruth train, correct mode: 'an average of 4.5-star reviews' (reviews 5, 1, 5) became
    'an average of 4.0-star reviews', the business's own rating: a wrong edit."""
    (found,) = field_value_mismatches("With a rating of 4.0 stars and an average of 4.5-star reviews, it is loved.",
                                      RATED_EVIDENCE)  # fmt: skip
    assert (found.text, found.replacement) == ("4.5", None)


NO_WIFI = readable(str({"name": "Blaze Pizza", "attributes": {"WiFi": "no", "OutdoorSeating": True,
                                                              "RestaurantsTakeOut": True}}))
NO_WIFI_EVIDENCE = passages_from_texts([NO_WIFI])


@pytest.mark.parametrize(("claim", "given"), [
    ("The restaurant has a cozy atmosphere with outdoor seating and free Wi-Fi.", "free Wi-Fi"),
    ("It provides free WiFi for its customers.", "free WiFi"),
    ("Customers can eat outdoors, with complimentary Wi-Fi available.", "complimentary Wi-Fi"),
])  # fmt: skip
def test_a_value_the_claim_gives_a_no_field_is_swapped_for_the_records_no(claim, given):
    """RAGTruth train: "free Wi-Fi" against "WiFi: no" (4 gold conflicts) was only flagged,
    the field's name with 'WiFi: no' as its replacement, which no edit can put in."""
    (found,) = field_mismatches(claim, NO_WIFI_EVIDENCE)
    name = given.split()[-1]
    assert (found.text, found.replacement, found.rule) == (given, f"no {name}", "field_polarity")
    assert NO_WIFI[found.evidence_span[0]:found.evidence_span[1]] == "WiFi: no"


@pytest.mark.parametrize(("claim", "name"), [
    ("The business offers free WiFi, takeout, and outdoor seating.", "WiFi"),  # 'no' would deny the whole list
    ("It offers a free WiFi connection.", "WiFi"),  # 'a no WiFi connection'
    ("WiFi is available for customers to enjoy while they dine.", "WiFi"),  # no value given: a negation to write
])  # fmt: skip
def test_a_no_field_without_a_value_to_swap_is_flagged_by_its_name(claim, name):
    (found,) = field_mismatches(claim, NO_WIFI_EVIDENCE)
    assert (found.text, found.replacement) == (name, "WiFi: no")


@pytest.mark.parametrize("claim", [
    "The restaurant has outdoor seating but no Wi-Fi.",
    "It does not offer free WiFi.",
    "There is no free Wi-Fi, but the patio is lovely.",
])  # fmt: skip
def test_a_claim_that_states_the_no_field_as_the_record_does_is_left_alone(claim):
    assert field_mismatches(claim, NO_WIFI_EVIDENCE) == []


def test_a_yes_no_swap_puts_the_records_no_in_place_of_the_claims_value_and_nothing_else():
    line = NO_WIFI.splitlines()[1]  # '- attributes — WiFi: no; Outdoor Seating: yes; ...'
    claim = "The restaurant has outdoor seating and free Wi-Fi."
    at = claim.index("free")
    assert swaps_field(claim, [(at, at + 4, "no")], line)  # the editor's minimal form
    assert swaps_field(claim, [(at, at + 10, "no Wi-Fi")], line)
    assert not swaps_field(claim, [(at, at + 4, "paid")], line)  # not the record's value
    assert not swaps_field(claim, [(claim.index("outdoor"), claim.index("outdoor") + 7, "no")], line)  # a field held
    assert not swaps_field(claim.replace("free", "no"), [(at, at + 2, "no")], line)  # nothing wrong to fix
    listed = "The business offers free WiFi, takeout, and outdoor seating."
    assert not swaps_field(listed, [(listed.index("free"), listed.index("free") + 4, "no")], line)
    assert not swaps_field(claim, [(at, at + 4, "no")], "The café has no Wi-Fi at all.")  # no record
