"""Support read from structured data (``field_support.py``): the mirror of ``field_polarity``."""

from __future__ import annotations

import pytest

from middleware.evidence.request_passages import readable
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, SlotsVerifier, passages_from_texts
from middleware.pipeline.verifiers.field_support import record_fields, supporting_fields
from middleware.pipeline.verifiers.fields import field_mismatches
from tests.support.pipeline_doubles import HashingEmbedder, RulePairScorer

pytestmark = pytest.mark.usefixtures("warm_spacy")

RECORD = readable(str({
    "name": "Finch & Fork", "city": "Santa Barbara", "categories": "Breakfast & Brunch, Bars",
    "attributes": {"OutdoorSeating": False, "RestaurantsReservations": True, "RestaurantsTakeOut": True,
                   "WiFi": "free", "BusinessParking": {"street": True, "valet": False}, "Ambience": {"casual": True}},
}))  # fmt: skip
REVIEW = "- review info — review stars: 5.0; review text: The staff was friendly. Great coffee and a cozy room."
EVIDENCE = passages_from_texts([RECORD + REVIEW])


@pytest.mark.parametrize(("claim", "labels"), [
    ("It does not take reservations but offers takeout.", None),  # reservations: yes -> not support
    ("The restaurant accepts reservations and offers takeout services.",
     {"Restaurants Reservations", "Restaurants Take Out"}),
    ("However, outdoor seating is not available.", {"Outdoor Seating"}),
    ("Street parking is available, but there is no valet parking.", {"street", "valet"}),
    ("Finch & Fork in Santa Barbara offers free Wi-Fi and takeout options.", {"Restaurants Take Out"}),
])  # fmt: skip
def test_fields_stated_as_the_record_states_them_support_the_claim(claim, labels):
    found = {f.label for f in supporting_fields(claim, EVIDENCE)}
    assert found == (labels or set())


@pytest.mark.parametrize("claim", [
    "The restaurant offers takeout and catering services.",  # catering: no field says it
    "It offers takeout and has a cozy atmosphere.",  # a review's words are no field
    "It accepts reservations and is open from 9 AM to 5 PM.",  # hours are the NLI model's to judge
    "It offers takeout and outdoor seating.",  # one field against the record
    "It does not offer WiFi, but it takes reservations.",  # 'WiFi: free' said without its value
    "The staff was friendly.",  # no field named
])  # fmt: skip
def test_a_claim_that_says_more_than_its_fields_is_not_supported_by_them(claim):
    assert supporting_fields(claim, EVIDENCE) == []


def test_record_fields_are_the_short_fields_not_the_reviews():
    fields = {(f.label, f.value) for f in record_fields(EVIDENCE)}
    assert ("city", "Santa Barbara") in fields and ("WiFi", "free") in fields
    assert not any(label == "review text" for label, _ in fields)
    assert not any(value in ("yes", "no") for _, value in fields)


def test_wi_fi_written_apart_names_the_wifi_field():
    evidence = passages_from_texts([readable(str({"name": "Lure", "attributes": {"WiFi": "no"}}))])
    (found,) = field_mismatches("It has free Wi-Fi.", evidence)
    assert evidence[0].text[found.evidence_span[0] : found.evidence_span[1]] == "WiFi: no"
    assert (found.text, found.replacement) == ("free Wi-Fi", "no Wi-Fi")  # the record's own value (fields.value_swap)


async def test_the_hybrid_turns_an_extrapolatory_verdict_attributable_and_the_rule_switches_off():
    claim = "The restaurant accepts reservations and offers takeout services."
    neutral = [0.2, 0.75, 0.05]  # the NLI model does not read the record's fields

    def hybrid(disabled: tuple[str, ...] = ()) -> HybridVerifier:
        slots = SlotsVerifier(Aligner(HashingEmbedder()), disabled=disabled)
        return HybridVerifier(NLIVerifier(RulePairScorer(lambda p, h: neutral)), slots, learned=False)

    verdict = await hybrid().verify(claim, EVIDENCE)
    assert verdict.label == "attributable" and "field_support" in [r.name for r in verdict.rules]
    assert "Restaurants Reservations: yes" in (verdict.evidence_sentence or "")
    assert max(verdict.scores, key=verdict.scores.__getitem__) == "attributable"
    assert (await hybrid(("field_support",)).verify(claim, EVIDENCE)).label == "extrapolatory"
