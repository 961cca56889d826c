"""The edit gate's rules by name: each refusal records the rule that made it, and a rule
switched off (``pipeline.rules.gate_disabled``) no longer refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, SlotsVerifier
from middleware.pipeline.verifiers.base import DetailedVerdict, Mismatch
from middleware.render import corrections_text
from middleware.pipeline.editing import EditResult
from middleware.composition.editor import build_gate
from middleware.revise.gate import RECHECK_RULES, EditGate, GatePolicy
from middleware.revise.gate_rules import CHANGE_RULES, GATE_RULES, PROPOSAL_RULES, Change, form_refusal
from middleware.revise.guards import GuardedEditor
from middleware.settings import Settings
from middleware.types import Edit, Passage, Revision, SentenceReport, Verdict
from tests.support.pipeline_doubles import RulePairScorer

pytestmark = pytest.mark.timeout(120)

CHEMISTRY = "She received the 1911 Nobel Prize in Chemistry alone."
PHYSICS = "She shared the 1903 Nobel Prize in Physics, becoming the first woman to win a Nobel Prize."
PASSAGE = f"Marie Curie was a physicist and chemist. {PHYSICS} {CHEMISTRY}"
PLAIN = "She received the Nobel Prize in Chemistry in 1915."


def _passages(text: str = PASSAGE, pid: str = "curie") -> list[Passage]:
    return [Passage(id=pid, text=text, provider="index", source=f"{pid}.md")]


def _swap(claim: str, old: str, new: str, evidence: str, pid: str = "curie") -> EditResult:
    start = claim.index(old)
    edit = Edit(start=start, end=start + len(old), original=old, replacement=new, tag="entity", evidence_id=pid,
                evidence=evidence)  # fmt: skip
    return EditResult(original=claim, text=claim[:start] + new + claim[start + len(old) :], edits=[edit],
                      evidence_index=0, evidence_id=pid)  # fmt: skip


def _scorer(rule: Callable[[str, str], list[float]]) -> NLIVerifier:
    return NLIVerifier(RulePairScorer(rule))


def _entails(needle: str) -> Callable[[str, str], list[float]]:
    """Entails hypotheses containing ``needle``, contradicts the rest."""

    def rule(premise: str, hypothesis: str) -> list[float]:
        return [0.95, 0.03, 0.02] if needle in hypothesis else [0.02, 0.08, 0.9]

    return rule


def _gate(rule: Callable[[str, str], list[float]], disabled: tuple[str, ...] = (), **policy: float) -> EditGate:
    nli = _scorer(rule)
    return EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(**policy), disabled=disabled)


def test_every_rule_is_registered_once_in_the_order_it_is_applied() -> None:
    staged = ["swapped_roles", "one_evidence_sentence", *CHANGE_RULES, *PROPOSAL_RULES, *RECHECK_RULES]
    assert staged == list(GATE_RULES)
    assert all(GATE_RULES[name].strip() for name in GATE_RULES)


def test_an_unknown_rule_name_is_an_error_that_lists_the_rules() -> None:
    with pytest.raises(ValueError, match=r"unknown edit gate rule\(s\) \['no_such_rule'\].*about_the_claim"):
        _gate(_entails("1911"), disabled=("no_such_rule",))
    settings = Settings()
    settings.pipeline.rules.gate_disabled = ["about_the_claim", "typo"]
    with pytest.raises(ValueError, match="typo"):
        build_gate(settings, SlotsVerifier())


def test_the_setting_switches_the_gate_rules_off() -> None:
    settings = Settings()
    settings.pipeline.rules.gate_disabled = ["about_the_claim"]
    assert build_gate(settings, SlotsVerifier()).disabled == {"about_the_claim"}
    settings.pipeline.edit_wording = True  # the older switch for values_only
    assert build_gate(settings, SlotsVerifier()).disabled == {"about_the_claim", "values_only"}


CHANGE_CASES = [  # sentence, old, new, evidence sentence, the rule that refuses it
    ("Tiger Woods lost the 1997 Masters.", "lost", "won", "Tiger Woods won the 1997 Masters.", "values_only"),
    ("Tiger Woods's fourth Masters title came in 2019.", "Tiger Woods's fourth", "His fifth",
     "His fifth Masters title came in 2019.", "pronoun_for_name"),
    ("Beethoven's Ninth was first performed on 7 May 1834.", "7 May 1834", "late twenties",
     "His hearing declined from his late twenties; the Ninth was first performed on 7 May 1824.", "words_for_figure"),
    ("Rome was founded in 1753.", "1753", "753", "Rome was founded in 753 BC, according to legend.", "same_era"),
    ("In 1888 Nikola Tesla licensed George Westinghouse's patents.", "Nikola Tesla", "George Westinghouse",
     "In 1888 George Westinghouse licensed his patents.", "name_already_in_sentence"),
    ("Insulin was discovered by John Macleod and Charles Best.", "John Macleod", "Frederick Banting",
     "Insulin was discovered by Frederick Banting and Charles Best, in the laboratory of John Macleod.",
     "name_in_another_role"),
    ("The cathedral was built for Tsar Peter the Great.", "Peter", "Ivan IV",
     "The cathedral was built for Tsar Ivan IV, known as Ivan the Terrible.", "name_as_written"),
    ("The Eiffel Tower is 300 metres tall.", "300", "30", "The Eiffel Tower is 330 metres tall.", "whole_value"),
    ("The Eiffel Tower is 300 metres tall.", "300 metres", "1889",
     "The Eiffel Tower is 330 metres tall and was completed in 1889.", "same_kind"),
    ("The Pasteur Institute was founded in 1897.", "1897", "1888",
     "The Pasteur Institute was founded in 1887 and inaugurated in 1888.", "value_of_the_role"),
    ("Gagarin completed two orbits of the Earth.", "two", "one", "Gagarin completed one orbit of the Earth.",
     "singular_before_plural"),
]  # fmt: skip


@pytest.mark.parametrize(("sentence", "old", "new", "evidence", "rule"), CHANGE_CASES)
def test_a_change_rule_names_its_refusal_and_off_it_refuses_nothing(
    sentence: str, old: str, new: str, evidence: str, rule: str
) -> None:
    result = _swap(sentence, old, new, evidence)
    refusal = form_refusal(result, evidence)
    assert refusal is not None and refusal.rule == rule, refusal
    assert refusal.reason == CHANGE_RULES[rule](_change(result, evidence))
    without = form_refusal(result, evidence, frozenset({rule}))
    assert without is None or without.rule != rule


def _change(result: EditResult, evidence: str) -> Change:
    return Change(result.original, result.text, result.edits[0], evidence)


async def test_one_evidence_sentence() -> None:
    original = "She received a second Nobel Prize, in Chemistry, in 1915."
    at, year = original.index("second"), original.index("1915")
    edits = [Edit(start=at, end=at + 6, original="second", replacement="first", tag="entity", evidence=PHYSICS),
             Edit(start=year, end=year + 4, original="1915", replacement="1911", tag="entity", evidence=CHEMISTRY)]
    result = EditResult(original=original, text="She received a first Nobel Prize, in Chemistry, in 1911.",
                        edits=edits, evidence_index=0, evidence_id="curie")  # fmt: skip
    refused = await _gate(_entails("1911")).review(result, _passages())
    assert refused.status == "flagged" and refused.rule == "one_evidence_sentence"
    reviewed = await _gate(_entails("1911"), ("one_evidence_sentence",)).review(result, _passages())
    assert reviewed.rule != "one_evidence_sentence" and reviewed.evidence_sentence == PHYSICS


async def test_about_the_claim() -> None:
    unrelated = "The UN, over 2008, conducted a study of water use in the region."
    result = _swap("Leonardo da Vinci began work on the Last Supper in 1490.", "1490", "2008", unrelated, "un")
    passages = _passages(f"{unrelated} Leonardo da Vinci painted the Last Supper in Milan.", "un")
    refused = await _gate(_entails("2008")).review(result, passages)
    assert refused.status == "flagged" and refused.rule == "about_the_claim"
    assert (await _gate(_entails("2008"), ("about_the_claim",)).review(result, passages)).status == "applied"


async def test_subject_named() -> None:
    caspian = "Its surface lies about 28 metres below sea level."
    result = _swap("Machu Picchu lies about 3,430 metres above sea level.", "3,430", "28", caspian, "cs")
    passages = [Passage(id="cs", title="Caspian Sea", text=f"The Caspian Sea is a lake. {caspian}", provider="index",
                        source="cs.md")]  # fmt: skip
    refused = await _gate(_entails("28 metres")).review(result, passages)
    assert refused.status == "flagged" and refused.rule == "subject_named"
    assert (await _gate(_entails("28 metres"), ("subject_named",)).review(result, passages)).rule != "subject_named"


async def test_name_stated_elsewhere() -> None:
    born = "Roger Bannister was born in Harrow on 23 March 1929."
    result = _swap("Roger Bannister was born in Oxford.", "Oxford", "Harrow", born, "rb")
    passages = _passages(f"{born} He died in Oxford in 2018.", "rb")
    refused = await _gate(_entails("Harrow")).review(result, passages)
    assert refused.status == "flagged" and refused.rule == "name_stated_elsewhere"
    assert (await _gate(_entails("Harrow"), ("name_stated_elsewhere",)).review(result, passages)).status == "applied"


def _everything_entailed(premise: str, hypothesis: str) -> list[float]:
    return [0.95, 0.03, 0.02]


async def test_contradicts_original() -> None:
    """A wording edit (values_only off) of a sentence the evidence does not contradict."""
    result = _swap("She received the 1911 Nobel Prize in Chemistry.", "received", "won", CHEMISTRY)
    gate = _gate(_everything_entailed, ("values_only",))
    refused = await gate.review(result, _passages())
    assert refused.status == "flagged" and refused.rule == "contradicts_original", refused
    lenient = _gate(_everything_entailed, ("values_only", "contradicts_original"))
    assert (await lenient.review(result, _passages())).rule != "contradicts_original"


class _Contradicting:
    """A verifier double that finds every sentence contradicted."""

    name = "contradicting"

    async def verify(self, claim, evidence, context=None) -> DetailedVerdict:  # noqa: ANN001
        return DetailedVerdict(label="contradictory", scores={"contradictory": 0.9})


async def test_edit_not_contradicted() -> None:
    result = _swap(PLAIN, "1915", "1911", CHEMISTRY)
    nli = _scorer(_entails("1911"))
    refused = await EditGate(_Contradicting(), nli).review(result, _passages())
    assert refused.rule == "edit_not_contradicted", refused
    lenient = EditGate(_Contradicting(), nli, disabled=("edit_not_contradicted",))
    assert (await lenient.review(result, _passages())).status == "applied"


async def test_entails_edit() -> None:
    result = _swap(PLAIN, "1915", "1903", PHYSICS)
    refused = await _gate(_entails("never")).review(result, _passages())
    assert refused.rule == "entails_edit" and "P=0.02" in refused.reason, refused
    assert (await _gate(_entails("never"), ("entails_edit",)).review(result, _passages())).status == "applied"


async def test_edit_supported() -> None:
    result = _swap(PLAIN, "1915", "1911", CHEMISTRY)
    refused = await _gate(_entails("1911"), supported_edit=0.999).review(result, _passages())
    assert refused.rule == "edit_supported", refused
    lenient = _gate(_entails("1911"), ("edit_supported",), supported_edit=0.999)
    assert (await lenient.review(result, _passages())).status == "applied"


async def test_slots_stated() -> None:
    """Without an NLI model every slot of the edit must be stated: 'second' is not."""
    original = "She received a second Nobel Prize, in Chemistry, in 1915."
    result = _swap(original, "1915", "1911", CHEMISTRY)
    refused = await EditGate(SlotsVerifier(), None).review(result, _passages())
    assert refused.rule == "slots_stated", refused
    lenient = EditGate(SlotsVerifier(), None, disabled=("slots_stated",))
    assert (await lenient.review(result, _passages())).status == "applied"


def _contradicting_context(context: str):  # noqa: ANN202
    """An NLI rule under which ``context`` contradicts any sentence saying 1911, which the
    evidence entails."""

    def rule(premise: str, hypothesis: str) -> list[float]:
        if premise == context:
            return [0.02, 0.03, 0.95] if "1911" in hypothesis else [0.9, 0.05, 0.05]
        return _entails("1911")(premise, hypothesis)

    return rule


async def test_context_consistent() -> None:
    context = "Marie Curie won her second Nobel Prize in 1915, and nothing else."
    rule = _contradicting_context(context)
    result = _swap(PLAIN, "1915", "1911", CHEMISTRY)
    refused = await _gate(rule).review(result, _passages(), context)
    assert refused.rule == "context_consistent" and "context_contradicts_edited" in refused.scores
    assert (await _gate(rule, ("context_consistent",)).review(result, _passages(), context)).status == "applied"


async def test_context_consistent_needs_the_answer_to_have_stated_the_replaced_value() -> None:
    """The demo's case: the answer said she shared the 1903 Physics prize; the NLI model
    reads a contradiction into 1911 for Chemistry, which is no reason to refuse the fix."""
    context = "She shared the 1903 Nobel Prize in Physics with Pierre Curie and Henri Becquerel."
    result = _swap(PLAIN, "1915", "1911", CHEMISTRY)
    assert (await _gate(_contradicting_context(context)).review(result, _passages(), context)).status == "applied"


class _RecordingEditor:
    """An inner editor double that records being asked and proposes nothing."""

    name = "recording"

    def __init__(self) -> None:
        self.asked = 0

    async def edit(self, sentence, verdict, evidence, context=None) -> EditResult:  # noqa: ANN001
        self.asked += 1
        return EditResult.unchanged(sentence, "nothing to propose", self.name)


async def test_swapped_roles() -> None:
    sentence = "Aldrin remained in lunar orbit while Collins walked on the Moon."
    role = Mismatch(kind="role", span=(0, 6), text="Aldrin", replacement=None, evidence_index=0)
    verdict = DetailedVerdict(label="contradictory", mismatches=[role])
    inner = _RecordingEditor()
    flagged = await GuardedEditor(inner, gate=_gate(_entails("x"))).edit(sentence, verdict, _passages())
    assert flagged.revision is not None and flagged.revision.rule == "swapped_roles" and inner.asked == 0
    await GuardedEditor(inner, gate=_gate(_entails("x"), ("swapped_roles",))).edit(sentence, verdict, _passages())
    assert inner.asked == 1


def test_the_printed_decision_names_the_refusing_rule() -> None:
    revision = Revision(status="flagged", reason="the evidence names 'Harrow' for something else",
                        rule="name_stated_elsewhere", suggested="Roger Bannister was born in Harrow.")  # fmt: skip
    report = SentenceReport(index=0, start=0, end=35, text="Roger Bannister was born in Oxford.",
                            verdict=Verdict(label="contradictory"), revision=revision)  # fmt: skip
    assert "why (gate rule name_stated_elsewhere): the evidence names 'Harrow'" in corrections_text([report]).plain
