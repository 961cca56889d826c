"""Opening hours read as a schedule (``hours.py``: the ``field_hours`` rule)."""

from __future__ import annotations

import pytest

from middleware.evidence.request_passages import readable
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.verifiers import SlotsVerifier, passages_from_texts
from middleware.pipeline.verifiers.hours import hours_mismatches, is_time_of_day, read_hours, schedules, swaps_hours
from tests.support.pipeline_doubles import HashingEmbedder

pytestmark = pytest.mark.usefixtures("warm_spacy")

WEEK = {"Monday": "11:0-20:0", "Tuesday": "11:0-20:0", "Wednesday": "11:0-20:0", "Thursday": "11:0-20:0",
        "Friday": "11:0-21:0", "Saturday": "11:0-21:0", "Sunday": "12:0-20:0"}  # fmt: skip
EVIDENCE = passages_from_texts([readable(str({"name": "Blaze Pizza", "hours": WEEK}))])
WEEKDAYS = passages_from_texts([readable(str({"name": "Cafe", "hours": {
    d: "7:0-14:0" for d in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")}}))])  # fmt: skip


def test_the_schedule_is_read_per_day_in_minutes():
    (schedule,) = schedules(EVIDENCE)
    assert schedule.on("monday") == (11 * 60, 20 * 60) and schedule.on("sunday") == (12 * 60, 20 * 60)


@pytest.mark.parametrize(("claim", "wrong", "replacement"), [
    ("The hours of operation are from 11am to 10pm, Monday through Sunday.", "11am to 10pm", None),
    ("It is open Monday to Thursday from 11 am to 9 pm.", "9 pm", "8 pm"),
    ("On Sundays, they open from 11:00 AM to 8:00 PM.", "11:00 AM", "12:00 PM"),
    ("The restaurant is open seven days a week from 7am to 2pm.", "seven days a week", None),  # five days listed
])  # fmt: skip
def test_hours_the_schedule_states_otherwise_are_a_located_contradiction(claim, wrong, replacement):
    evidence = WEEKDAYS if "seven days" in claim else EVIDENCE
    found = hours_mismatches(claim, evidence)
    assert (wrong, replacement) in [(m.text, m.replacement) for m in found]
    assert {m.rule for m in found} == {"field_hours"}


@pytest.mark.parametrize("claim", [
    "It is open Monday to Thursday from 11 am to 8 pm.",
    "Blaze Pizza operates from 11:00 am to 8:00 pm Monday through Thursday, until 9 pm on Fridays and Saturdays.",
    "It opens from 11 am to 9 pm on Friday and Saturday, and from 12 pm to 8 pm on Sunday.",
    "Customers love the daily specials.",  # no opening hours said
    "The business hours are 11 am to 8 pm on Monday, with later hours on weekends.",
])  # fmt: skip
def test_hours_the_schedule_gives_or_that_say_no_hours_are_left_alone(claim):
    assert hours_mismatches(claim, EVIDENCE) == []


def test_only_the_half_of_the_day_differing_is_flagged_not_rewritten():
    """'2:00 PM' against a closing at 2:00 (RAGTruth): the data may be on a 12-hour clock."""
    late = passages_from_texts([readable(str({"name": "Bar", "hours": {d: "8:0-2:0" for d in WEEK}}))])
    (found,) = hours_mismatches("They are open every day from 8:00 AM to 2:00 PM.", late)
    assert found.replacement is None


def test_a_range_the_schedule_gives_is_held_and_a_swap_to_its_time_is_checked_against_it():
    claim = "It is open Monday to Thursday from 11 am to 9 pm."
    assert read_hours(claim.replace("9 pm", "8 pm"), EVIDENCE).held and not read_hours(claim, EVIDENCE).held
    line = EVIDENCE[0].text.splitlines()[1]
    at = claim.index("9 pm")
    assert swaps_hours(claim, [(at, at + 4, "8 pm")], line)
    assert not swaps_hours(claim, [(at, at + 4, "10 pm")], line)
    # the editor's minimal form of the same swap ('9' -> '8' of '9 pm' -> '8 pm')
    assert swaps_hours(claim, [(at, at + 1, "8")], line) and not swaps_hours(claim, [(at, at + 1, "7")], line)
    assert is_time_of_day("10pm") and is_time_of_day("11:00 AM") and not is_time_of_day("10 stars")


async def test_the_slots_verifier_reports_the_hours_and_the_rule_switches_off():
    claim = "It is open Monday to Thursday from 11 am to 9 pm."
    verdict = await SlotsVerifier(Aligner(HashingEmbedder())).verify(claim, EVIDENCE)
    assert verdict.label == "contradictory" and [r.name for r in verdict.rules] == ["field_hours"]
    off = SlotsVerifier(Aligner(HashingEmbedder()), disabled=("field_hours",))
    assert (await off.verify(claim, EVIDENCE)).label != "contradictory"


SHORT_MONDAY = passages_from_texts([readable(str({"name": "Bouchon", "hours": {
    "Monday": "17:30-23:0", **{d: "17:0-21:0" for d in ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")},
    "Sunday": "9:0-14:0"}}))])  # fmt: skip
EARLY_SATURDAY = passages_from_texts([readable(str({"name": "Shop", "hours": {
    **{d: "9:0-18:0" for d in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")}, "Saturday": "8:0-18:0",
    "Sunday": "9:0-17:0"}}))])  # fmt: skip


@pytest.mark.parametrize(("claim", "evidence", "day", "replacement"), [
    ("The restaurant operates from Monday to Saturday from 17:00-21:00 and on Sunday from 9:00-14:00.",
     SHORT_MONDAY, "Monday", "Tuesday"),  # RAGTruth train
    ("It is open from 9:00 AM to 6:00 PM from Monday to Saturday, and 9:00 AM to 5:00 PM on Sunday.",
     EARLY_SATURDAY, "Saturday", "Friday"),  # RAGTruth train
    ("It is open 9 am to 6 pm Mondays through Saturdays.", EARLY_SATURDAY, "Saturdays", "Fridays"),
    ("Hours: Mon-Sat 9:00 AM to 6:00 PM.", EARLY_SATURDAY, "Sat", "Fri"),
    ("It is open monday through saturday from 5 pm to 9 pm.", SHORT_MONDAY, "monday", "tuesday"),
    ("It is open Tues to Sun from 9 am to 6 pm.", passages_from_texts([readable(str({"name": "Shop", "hours": {
        "Tuesday": "10:0-18:0", **{d: "9:0-18:0" for d in ("Wednesday", "Thursday", "Friday", "Saturday",
                                                            "Sunday")}}}))]), "Tues", "Wed"),  # fmt: skip
])  # fmt: skip
def test_the_one_end_day_of_a_span_with_other_hours_is_moved_in(claim, evidence, day, replacement):
    """A day span whose days but one end day all have the claim's hours: the day is what the
    data states otherwise, so the finding is the day, with the next day in, written alike."""
    (found,) = hours_mismatches(claim, evidence)
    assert (found.text, found.replacement, claim[slice(*found.span)]) == (day, replacement, day)
    assert found.rule == "field_hours"


@pytest.mark.parametrize(("claim", "evidence", "flagged"), [
    # a list of days, not a span
    ("It is open Monday, Tuesday, Wednesday, Thursday, Friday and Saturday from 9:00 AM to 6:00 PM.",
     EARLY_SATURDAY, "9:00 AM to 6:00 PM"),
    # seven days a week is no span
    ("It is open seven days a week from 5 pm to 9 pm.", SHORT_MONDAY, "5 pm to 9 pm"),
    # a middle day differs
    ("It is open Monday to Saturday from 5 pm to 9 pm.", passages_from_texts([readable(str({"name": "Bar", "hours": {
        **{d: "17:0-21:0" for d in ("Monday", "Tuesday", "Thursday", "Friday", "Saturday")},
        "Wednesday": "17:0-23:0"}}))]), "5 pm to 9 pm"),  # fmt: skip
    # two days differ: Monday and Sunday
    ("It is open Monday through Sunday from 5 pm to 9 pm.", SHORT_MONDAY, "5 pm to 9 pm"),
    # the shrunken span would be one day: Saturday to Sunday -> Sunday alone
    ("On Saturday to Sunday it is open from 9:00 AM to 5:00 PM.", EARLY_SATURDAY, "9:00 AM to 5:00 PM"),
    # a partial range: only the closing time is said
    ("It is open Monday to Saturday until 9 pm.", SHORT_MONDAY, "until 9 pm"),
])  # fmt: skip
def test_a_day_is_moved_only_at_one_end_of_a_span_that_keeps_two_days(claim, evidence, flagged):
    """Where the day move would not state the data, the time range is flagged as before,
    without a replacement."""
    (found,) = hours_mismatches(claim, evidence)
    assert (found.text, found.replacement) == (flagged, None)


def test_a_day_moved_in_is_checked_as_the_swap_of_the_schedule():
    claim = "The restaurant operates from Monday to Saturday from 17:00-21:00 and on Sunday from 9:00-14:00."
    line = SHORT_MONDAY[0].text.splitlines()[1]
    at = claim.index("Monday")
    assert swaps_hours(claim, [(at, at + 6, "Tuesday")], line)
    assert swaps_hours(claim, [(at, at + 3, "Tues")], line)  # the editor's minimal form
    assert not swaps_hours(claim, [(at, at + 6, "Wednesday")], line)
    saturday = claim.index("Saturday")
    assert not swaps_hours(claim, [(saturday, saturday + 8, "Friday")], line)
