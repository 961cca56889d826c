"""The edit gate: an edit is applied only when one evidence sentence contradicts the
original and entails the edited sentence, and the earlier answer does not contradict it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from middleware.evidence.request_passages import readable
from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, SlotsVerifier
from middleware.pipeline.editing import EditResult
from middleware.revise.gate import EditGate, GatePolicy, evidence_premise, same_role
from middleware.revise.gate_rules import CHANGE_RULES, Change, first_refusal, form_refusal, speaks_of_the_claim
from middleware.revise.values import value_problem
from middleware.types import Edit, Passage
from tests.support.pipeline_doubles import RulePairScorer

CHEMISTRY = "She received the 1911 Nobel Prize in Chemistry alone."
PHYSICS = "She shared the 1903 Nobel Prize in Physics, becoming the first woman to win a Nobel Prize."
PASSAGE = f"Marie Curie was a physicist and chemist. {PHYSICS} {CHEMISTRY}"
ORIGINAL = "She received a second Nobel Prize, in Chemistry, in 1915."


def _passages() -> list[Passage]:
    return [Passage(id="curie", text=PASSAGE, provider="index", source="people/marie-curie.md")]


def _result(text: str, edits: Sequence[tuple[str, str, str]]) -> EditResult:
    """An editor's revision of ORIGINAL: (original span, replacement, evidence sentence) per change."""
    out = []
    for old, new, evidence in edits:
        start = ORIGINAL.index(old)
        out.append(Edit(start=start, end=start + len(old), original=old, replacement=new, tag="entity",
                        evidence_id="curie", evidence=evidence))  # fmt: skip
    return EditResult(original=ORIGINAL, text=text, edits=out, evidence_index=0, evidence_id="curie")


def _gate(rule: Callable[[str, str], list[float]], **policy: float) -> EditGate:
    nli = NLIVerifier(RulePairScorer(rule))
    return EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(**policy))


def _entails(needle: str) -> Callable[[str, str], list[float]]:
    """Entails hypotheses containing ``needle``, contradicts the rest."""

    def rule(premise: str, hypothesis: str) -> list[float]:
        return [0.95, 0.03, 0.02] if needle in hypothesis else [0.02, 0.08, 0.9]

    return rule


async def test_applies_an_edit_its_evidence_sentence_entails() -> None:
    edited = ORIGINAL.replace("1915", "1911")
    revision = await _gate(_entails("1911")).review(_result(edited, [("1915", "1911", CHEMISTRY)]), _passages())
    assert revision.status == "applied", revision.reason
    assert revision.evidence_sentence == CHEMISTRY and revision.suggested == edited
    assert revision.scores["evidence_entails_edited"] == pytest.approx(0.95)
    assert revision.scores["evidence_contradicts_original"] == pytest.approx(0.9)


async def test_flags_an_edit_from_two_evidence_sentences() -> None:
    edited = "She received a first Nobel Prize, in Chemistry, in 1911."
    result = _result(edited, [("second", "first", PHYSICS), ("1915", "1911", CHEMISTRY)])
    revision = await _gate(_entails("1911")).review(result, _passages())
    assert revision.status == "flagged" and "one evidence sentence" in revision.reason


async def test_flags_an_edit_the_evidence_does_not_entail() -> None:
    # the Physics sentence's year put into a claim about the Chemistry prize
    edited = ORIGINAL.replace("1915", "1903")
    revision = await _gate(_entails("never")).review(_result(edited, [("1915", "1903", PHYSICS)]), _passages())
    assert revision.status == "flagged"
    assert revision.evidence_sentence == PHYSICS and revision.suggested == edited
    assert "evidence_entails_edited" in revision.scores


async def test_the_entailment_threshold_is_the_policy() -> None:
    def middling(premise: str, hypothesis: str) -> list[float]:
        return [0.7, 0.2, 0.1] if "1911" in hypothesis else [0.02, 0.08, 0.9]

    result = _result(ORIGINAL.replace("1915", "1911"), [("1915", "1911", CHEMISTRY)])
    assert (await _gate(middling, min_entailment=0.6).review(result, _passages())).status == "applied"
    assert (await _gate(middling, min_entailment=0.8).review(result, _passages())).status == "flagged"


async def test_flags_an_edit_that_contradicts_the_earlier_answer() -> None:
    context = "Marie Curie won her second Nobel Prize in 1915, and nothing else."

    def rule(premise: str, hypothesis: str) -> list[float]:
        if premise == context:
            return [0.02, 0.03, 0.95] if "1911" in hypothesis else [0.9, 0.05, 0.05]
        return _entails("1911")(premise, hypothesis)

    result = _result(ORIGINAL.replace("1915", "1911"), [("1915", "1911", CHEMISTRY)])
    revision = await _gate(rule).review(result, _passages(), context)
    assert revision.status == "flagged" and "already said" in revision.reason
    assert revision.scores["context_contradicts_edited"] == pytest.approx(0.95)


async def test_without_nli_every_slot_must_be_stated() -> None:
    gate = EditGate(SlotsVerifier(), None)
    good = _result(ORIGINAL.replace("1915", "1911"), [("1915", "1911", CHEMISTRY)])
    assert (await gate.review(good, _passages())).status == "flagged"  # 'second' is stated nowhere in it
    plain = "She received the Nobel Prize in Chemistry in 1915."
    fixed = EditResult(original=plain, text=plain.replace("1915", "1911"), evidence_index=0, evidence_id="curie",
                       edits=[Edit(start=44, end=48, original="1915", replacement="1911", tag="entity",
                                   evidence_id="curie", evidence=CHEMISTRY)])  # fmt: skip
    assert (await gate.review(fixed, _passages())).status == "applied"


def test_a_pronoun_sentence_takes_the_sentence_before_it() -> None:
    assert evidence_premise(CHEMISTRY, PASSAGE) == f"{PHYSICS} {CHEMISTRY}"
    assert evidence_premise("Marie Curie was a physicist and chemist.", PASSAGE) == (
        "Marie Curie was a physicist and chemist."
    )
    assert evidence_premise(CHEMISTRY, None) == CHEMISTRY


def test_a_pronoun_sentence_takes_the_passage_topic() -> None:
    bach = "In 1721 he dedicated the six Brandenburg Concertos to Christian Ludwig."
    assert evidence_premise(bach, None, "Johann Sebastian Bach") == (
        "In 1721 Johann Sebastian Bach dedicated the six Brandenburg Concertos to Christian Ludwig."
    )
    assert evidence_premise("Its height is 8,849 metres.", None, "Mount Everest") == (
        "Mount Everest's height is 8,849 metres."
    )
    assert evidence_premise(CHEMISTRY, PASSAGE, "Marie Curie") == f"{PHYSICS} {CHEMISTRY.replace('She', 'Marie Curie', 1)}"


def _swap(sentence: str, old: str, new: str) -> EditResult:
    start = sentence.index(old)
    edit = Edit(start=start, end=start + len(old), original=old, replacement=new, tag="entity", evidence="e")
    return EditResult(original=sentence, text=sentence[:start] + new + sentence[start + len(old) :], edits=[edit])


FORM_CASES = [  # sentence, old, new, evidence sentence, expected problem (substring) or None
    ("Sputnik 1 was launched in 1958.", "1958", "1957", "Sputnik 1 was launched on 4 October 1957.", None),
    ("Hubble was launched aboard Atlantis.", "Atlantis", "Discovery", "Hubble was launched aboard Discovery.", None),
    ("Beethoven's Ninth was first performed on 7 May 1834.", "7 May 1834", "late twenties",
     "His hearing declined from his late twenties; the Ninth was first performed on 7 May 1824.", "figure"),
    ("Tiger Woods's fourth Masters title came in 2019.", "Tiger Woods's fourth", "His fifth",
     "His fifth Masters title came in 2019.", "pronoun"),
    ("In 1888 Nikola Tesla licensed George Westinghouse's patents.", "Nikola Tesla", "George Westinghouse",
     "In 1888 George Westinghouse licensed his patents.", "twice"),
    ("Insulin was discovered by John Macleod and Charles Best.", "John Macleod", "Frederick Banting",
     "Insulin was discovered by Frederick Banting and Charles Best, in the laboratory of John Macleod.", "role"),
    ("The cathedral was built for Tsar Peter the Great.", "Peter", "Ivan IV",
     "The cathedral was built for Tsar Ivan IV, known as Ivan the Terrible.", "does not name"),
    ("Gagarin completed two orbits of the Earth.", "two", "one", "Gagarin completed one orbit of the Earth.",
     "plural"),
    ("Tiger Woods lost the 1997 Masters.", "lost", "won", "Tiger Woods won the 1997 Masters.", "wording"),
    # the value of another verb of the evidence sentence
    ("The Pasteur Institute was founded in 1897.", "1897", "1888",
     "The Pasteur Institute was founded in 1887 and inaugurated in 1888.", "goes with what the claim is about"),
    # no shared name: the verb decides
    ("It was founded in 1897.", "1897", "1888", "It was founded in 1887 and inaugurated in 1888.", "to 'found'"),
    ("The Pasteur Institute was founded in 1897.", "1897", "1887",
     "The Pasteur Institute was founded in 1887 and inaugurated in 1888.", None),
    # the value next to another title in the evidence sentence
    ("Jane Austen's Pride and Prejudice was published in 1823.", "1823", "1811",
     "Her novel Sense and Sensibility was published in 1811, followed by Pride and Prejudice in 1813.",
     "goes with what the claim is about"),
    ("Jane Austen's Pride and Prejudice was published in 1823.", "1823", "1813",
     "Her novel Sense and Sensibility was published in 1811, followed by Pride and Prejudice in 1813.", None),
    # part of a name the evidence writes whole
    ("He spoke at the Washington Monument.", "Washington Monument", "Memorial",
     "He spoke at the Lincoln Memorial during the March on Washington.", "Lincoln Memorial"),
    # a capitalised name the NER misses alone is still a name
    ("Van Gogh was born in Arles.", "Arles", "Zundert", "Van Gogh was born in Zundert.", None),
    ("He won gold in St. Moritz, Switzerland.", "St. Moritz", "Beijing", "He won gold in Beijing.", None),
    # the era stays with the value: '2018' from 'opened in 2018' is no date BCE
    ("The city was founded in the 2nd century BCE.", "2nd century", "2018",
     "The museum opened in 2018 and shows finds from 150 BCE.", "era"),
    ("Rome was founded in 754 BC.", "754", "753", "Rome was founded in 753 BC, according to legend.", None),
    ("Rome was founded in 1753.", "1753", "753", "Rome was founded in 753 BC, according to legend.", "era"),
    ("Rome was founded in 753 BC.", "753 BC", "1753", "The city walls were rebuilt in 1753.", "era"),
    ("The wall was built in 300 bc.", "300", "1300", "The wall was rebuilt in 1300.", "era"),
    # the claim's whole firm name is looked for: 'Electric' of 'Edison General Electric' is not it
    ("Edison General Electric merged with the Westinghouse Electric Company in 1892.", "Westinghouse Electric",
     "Thomson-Houston", "Edison General Electric merged with the Thomson-Houston Company in 1892.", None),
]  # fmt: skip


@pytest.mark.parametrize(("sentence", "old", "new", "evidence", "problem"), FORM_CASES)
def test_only_well_formed_value_swaps_pass(sentence: str, old: str, new: str, evidence: str, problem) -> None:
    found = form_refusal(_swap(sentence, old, new), evidence)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found.reason, found


def test_two_changes_may_not_name_one_place_twice() -> None:
    sentence = "Ernest Hemingway died in Key West, Florida, on 2 July 1961."
    evidence = "Hemingway died in Ketchum, Idaho, on 2 July 1961."
    first, second = sentence.index("Key West"), sentence.index("Florida")
    edits = [
        Edit(start=first, end=first + 8, original="Key West", replacement="Ketchum", tag="entity", evidence=evidence),
        Edit(start=second, end=second + 7, original="Florida", replacement="Ketchum", tag="entity", evidence=evidence),
    ]
    edited = "Ernest Hemingway died in Ketchum, Ketchum, on 2 July 1961."
    result = EditResult(original=sentence, text=edited, edits=edits)
    problem = form_refusal(result, evidence)
    assert problem is not None and "twice" in problem.reason and problem.rule == "name_twice"
    assert form_refusal(result, evidence, frozenset({"name_twice"})) is None


PLAIN = "She received the Nobel Prize in Chemistry in 1915."


def _swap_from(claim: str, old: str, new: str, evidence: str, evidence_id: str = "curie") -> EditResult:
    """One value of ``claim`` swapped for ``new`` from the evidence sentence ``evidence``."""
    start = claim.index(old)
    return EditResult(original=claim, text=claim.replace(old, new), evidence_index=0, evidence_id=evidence_id,
                      edits=[Edit(start=start, end=start + len(old), original=old, replacement=new, tag="entity",
                                  evidence_id=evidence_id, evidence=evidence)])  # fmt: skip


def _plain_fix() -> EditResult:
    return _swap_from(PLAIN, "1915", "1911", CHEMISTRY)


def _middling(premise: str, hypothesis: str) -> list[float]:
    """An unsure model: P(entailment) 0.6 for the fixed year, contradiction for the rest."""
    return [0.6, 0.3, 0.1] if "1911" in hypothesis else [0.02, 0.08, 0.9]


async def test_a_clean_swap_the_slots_find_stated_needs_only_the_grounded_entailment() -> None:
    nli = NLIVerifier(RulePairScorer(_middling))
    policy = GatePolicy(min_entailment=0.83, grounded_entailment=0.5)
    grounded = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, policy, SlotsVerifier())
    revision = await grounded.review(_plain_fix(), _passages())
    assert revision.status == "applied", revision.reason
    blind = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, policy)  # no slots verifier: the high bar
    revision = await blind.review(_plain_fix(), _passages())
    assert revision.status == "flagged" and "0.60 < 0.83" in revision.reason
    strict = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, grounded_entailment=0.7),
                      SlotsVerifier())  # fmt: skip
    assert (await strict.review(_plain_fix(), _passages())).status == "flagged"


async def test_the_grounded_bar_needs_every_slot_of_the_edit_stated() -> None:
    nli = NLIVerifier(RulePairScorer(_middling))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, grounded_entailment=0.5),
                    SlotsVerifier())  # fmt: skip
    # 'a second Nobel Prize' is not in the Chemistry sentence
    revision = await gate.review(_result(ORIGINAL.replace("1915", "1911"), [("1915", "1911", CHEMISTRY)]), _passages())
    assert revision.status == "flagged"


def test_a_value_of_another_verb_is_not_in_the_same_role() -> None:
    sentence = "The Moon is moving away from Earth by about 3.8 centimetres a year."
    start = sentence.index("about 3.8 centimetres")
    edit = Edit(start=start, end=start + 21, original="about 3.8 centimetres", replacement="about 3,474 kilometres",
                tag="entity")  # fmt: skip
    assert not same_role(sentence, edit, "Its diameter is about 3,474 kilometres.")
    assert same_role(sentence, edit.model_copy(update={"replacement": "about 3.5 centimetres"}),
                     "It is moving away from Earth by about 3.5 centimetres a year.")  # fmt: skip


async def test_a_name_the_passage_states_for_something_else_is_not_replaced() -> None:
    """'born in Oxford' where he was born in Harrow and died in Oxford: the verb may be what is wrong."""
    born = "Roger Bannister was born in Harrow on 23 March 1929."
    claim = "Roger Bannister was born in Oxford."
    result = _swap_from(claim, "Oxford", "Harrow", born, "rb")
    nli = NLIVerifier(RulePairScorer(_entails("Harrow")))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy())
    both = [Passage(id="rb", text=f"{born} He died in Oxford in 2018.", provider="index", source="rb.md")]
    revision = await gate.review(result, both)
    assert revision.status == "flagged" and "wrong verb" in revision.reason
    alone = [Passage(id="rb", text=born, provider="index", source="rb.md")]
    assert (await gate.review(result, alone)).status == "applied"


def test_a_value_another_claim_slot_states_is_no_rival() -> None:
    """'32 piano sonatas and one opera, Fidelio': 'one' sits nearest the shared name but is the
    claim's own 'one', so 'nine' may stand for 'ten'."""
    claim = "Ludwig van Beethoven wrote ten symphonies, 32 piano sonatas and one opera, Fidelio."
    evidence = "He wrote nine symphonies, 32 piano sonatas and one opera, Fidelio."
    assert value_problem("ten", claim, "nine", evidence) is None


async def test_the_evidence_sentence_is_read_under_its_passage_title() -> None:
    """'The women's singles was added in 1884' under 'Wimbledon Championships' states 'at Wimbledon'."""
    evidence = "The women's singles was added in 1884 and won by Maud Watson."
    claim = "The women's singles was added at Wimbledon in 1894."
    result = _swap_from(claim, "1894", "1884", evidence, "w")
    nli = NLIVerifier(RulePairScorer(_middling_for("1884")))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, grounded_entailment=0.5),
                    SlotsVerifier())  # fmt: skip
    titled = [Passage(id="w", text=evidence, title="Wimbledon Championships", provider="index", source="w.md")]
    assert (await gate.review(result, titled)).status == "applied"
    untitled = [Passage(id="w", text=evidence, provider="index", source="w.md")]
    assert (await gate.review(result, untitled)).status == "flagged"


def _middling_for(value: str) -> Callable[[str, str], list[float]]:
    def rule(premise: str, hypothesis: str) -> list[float]:
        return [0.6, 0.3, 0.1] if value in hypothesis else [0.02, 0.08, 0.9]

    return rule


async def test_the_nli_also_reads_the_evidence_sentence_under_its_title() -> None:
    """'reduced its tilt to about 4 degrees' says whose tilt only under 'Leaning Tower of Pisa'."""
    evidence = "Stabilisation work between 1990 and 2001 reduced its tilt to about 4 degrees."
    claim = "Stabilisation work reduced the tilt of the Leaning Tower of Pisa to about 2 degrees."
    result = _swap_from(claim, "2 degrees", "4 degrees", evidence, "pisa")

    def rule(premise: str, hypothesis: str) -> list[float]:
        if "4 degrees" not in hypothesis:
            return [0.02, 0.08, 0.9]
        return [0.9, 0.05, 0.05] if premise.startswith("Leaning Tower of Pisa.") else [0.1, 0.8, 0.1]

    nli = NLIVerifier(RulePairScorer(rule))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83))
    titled = [Passage(id="pisa", text=evidence, title="Leaning Tower of Pisa", provider="index", source="p.md")]
    revision = await gate.review(result, titled)
    assert revision.status == "applied", revision.reason
    assert revision.scores["evidence_entails_edited"] == pytest.approx(0.9)
    untitled = [Passage(id="pisa", text=evidence, provider="index", source="p.md")]
    assert (await gate.review(result, untitled)).status == "flagged"


def test_a_name_decides_a_value_beside_it_and_verbs_decide_the_rest() -> None:
    austen = "Her novel Sense and Sensibility was published in 1811, followed by Pride and Prejudice in 1813."
    claim = "Jane Austen's Pride and Prejudice was published in 1823."
    assert value_problem("1823", claim, "1813", austen) is None  # right by the shared name
    fide = "The world chess federation, FIDE, was founded in Paris on 20 July 1924, and it took control of the title in 1948."
    claim = "FIDE took control of the title in 1958."
    assert value_problem("1958", claim, "1924", fide) is not None  # nearer 'FIDE', but the founding's


SYDNEY = (
    "The Sydney Opera House is a performing arts centre in Sydney. It was designed by the Danish architect Jørn "
    "Utzon, whose entry won an international design competition in 1957. It was formally opened by Queen "
    "Elizabeth II on 20 October 1973."
)
TWO_CLAUSES = (
    "The Sydney Opera House was formally opened by Queen Elizabeth II on 20 October 1973, after being designed "
    "by the Swedish architect Jørn Utzon."
)
DESIGNED = "It was designed by the Danish architect Jørn Utzon, whose entry won an international design competition in 1957."


def _entails_with(*needles: str) -> Callable[[str, str], list[float]]:
    """Entails the edited sentence from premises holding every needle; the original is contradicted."""

    def rule(premise: str, hypothesis: str) -> list[float]:
        if "Danish" not in hypothesis:
            return [0.02, 0.08, 0.9]
        return [0.9, 0.05, 0.05] if all(n in premise for n in needles) else [0.05, 0.9, 0.05]

    return rule


async def test_the_rest_of_a_two_clause_sentence_may_be_read_from_its_passage() -> None:
    """The edit of one clause comes from one sentence; the NLI may read the sentences of the
    passage that state the other clause beside it ('opened ... on 20 October 1973')."""
    result = _swap_from(TWO_CLAUSES, "Swedish", "Danish", DESIGNED, "sydney")
    nli = NLIVerifier(RulePairScorer(_entails_with("Danish", "20 October 1973")))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83))
    titled = [Passage(id="sydney", text=SYDNEY, title="Sydney Opera House", provider="index", source="s.md")]
    revision = await gate.review(result, titled)
    assert revision.status == "applied", revision.reason
    assert revision.evidence_sentence == DESIGNED and revision.scores["evidence_entails_edited"] == pytest.approx(0.9)
    # the other clause stated nowhere in the passage: no such reading, the sentence is flagged
    alone = SYDNEY.replace(" It was formally opened by Queen Elizabeth II on 20 October 1973.", "")
    passage = [Passage(id="sydney", text=alone, title="Sydney Opera House", provider="index", source="s.md")]
    assert (await gate.review(result, passage)).status == "flagged"


async def test_a_value_from_a_sentence_about_something_else_is_not_put_in() -> None:
    """'The UN, over 2008, conducted a study' gives no year to 'began work on the Last Supper
    in 1490', however sure the NLI model is (a real answer's year was rewritten so)."""
    unrelated = "The UN, over 2008, conducted a study of water use in the region."
    claim = "Leonardo da Vinci began work on the Last Supper in 1490."
    result = _swap_from(claim, "1490", "2008", unrelated, "un")
    passages = [Passage(id="un", text=f"{unrelated} Leonardo da Vinci painted the Last Supper in Milan.",
                        provider="index", source="un.md")]  # fmt: skip
    revision = await _gate(_entails("2008")).review(result, passages)
    assert revision.status == "flagged" and "not about" in revision.reason
    # a sentence about it, read under its passage title, is
    tower = _swap_from("The Eiffel Tower is 300 metres tall.", "300", "330", "It is 330 metres tall.", "t")
    assert speaks_of_the_claim(tower, "It is 330 metres tall.", "Eiffel Tower")


async def test_a_value_from_a_passage_about_another_subject_is_not_put_in() -> None:
    """'Its surface lies about 28 metres below sea level' under 'Caspian Sea' shares most words
    of 'Machu Picchu lies about 3,430 metres above sea level' and the NLI model may find it
    entails the edit (planted benchmark, with a linear combiner): the titled passage never
    names the sentence's subject, so no value of it goes in."""
    caspian = "Its surface lies about 28 metres below sea level."
    claim = "Machu Picchu lies about 3,430 metres above sea level."
    result = _swap_from(claim, "3,430", "28", caspian, "caspian")
    other = [Passage(id="caspian", title="Caspian Sea", text=f"The Caspian Sea is a lake. {caspian}",
                     provider="index", source="caspian-sea.md")]  # fmt: skip
    revision = await _gate(_entails("28 metres")).review(result, other)
    assert revision.status == "flagged" and "never names 'Machu Picchu'" in revision.reason and revision.rule == "subject_named"
    # under a title naming it, or with no title (a pronoun may be its subject), this check passes
    for title in ("Machu Picchu", None):
        same = [other[0].model_copy(update={"title": title, "text": caspian})]
        revision = await _gate(_entails("28 metres")).review(result, same)
        assert "never names" not in (revision.reason or "")


def test_a_sentence_supporting_a_value_must_be_about_the_claim() -> None:
    """'In 1859 he married Marie' does not state the 1859 of 'born in Paris in 1859'; a
    sentence about the birth does."""
    from middleware.revise.gate import _with_support

    born = "Pierre Curie was born in Paris."
    edited = "Pierre Curie was born in Paris in 1859."
    assert _with_support(born, f"{born} In 1859 he married Marie.", None, edited) is None
    supported = _with_support(born, f"{born} He was born in 1859.", None, edited)
    assert supported == f"{born} He was born in 1859."


# --- edits of the right kind only -----------------------------------------------------------


def _edit_of(sentence: str, old: str, new: str) -> Edit:
    start = sentence.index(old)
    return Edit(start=start, end=start + len(old), original=old, replacement=new)


@pytest.mark.parametrize(
    ("sentence", "old", "new", "evidence", "problem"),
    [
        # a heading cut from an unrelated page is no whole value of the evidence sentence
        ("Transformers changed NLP research in 2017.", "NLP", "Meme Status Submission Type",
         "Meme Status Submission Type Image Macro Year 2012 Origin Reddit.", "no number, date or name"),
        # a date in place of a quantity
        ("The Eiffel Tower is 300 metres tall.", "300 metres", "1889",
         "The Eiffel Tower is 330 metres tall and was completed in 1889.", "would put a date in place of"),
        # a figure of another dimension
        ("The bridge is 300 metres long.", "300 metres", "40 tonnes",
         "The bridge is 40 tonnes heavier and 320 metres long.", "would put a"),
        # well-formed swaps: the whole value, its figure, a coarser date, a surname for a surname
        ("The Eiffel Tower is 300 metres tall.", "300 metres", "330 metres",
         "The Eiffel Tower is 330 metres tall and was completed in 1889.", None),
        ("The Eiffel Tower is 300 metres tall.", "300", "330",
         "The Eiffel Tower is 330 metres tall and was completed in 1889.", None),
        ("Marie Curie was born in Warsaw in 1868.", "1868", "1867",
         "Marie Curie was born on 7 November 1867 in Warsaw, Poland.", None),
        ("Marie Curie was born in Paris in 1867.", "Paris", "Warsaw",
         "Marie Curie was born on 7 November 1867 in Warsaw, Poland.", None),
    ],
)  # fmt: skip
def test_kind_problem(sentence: str, old: str, new: str, evidence: str, problem: str | None) -> None:
    edit = _edit_of(sentence, old, new)
    change = Change(sentence, sentence[: edit.start] + new + sentence[edit.end :], edit, evidence)
    kind_rules = {name: CHANGE_RULES[name] for name in ("whole_value", "same_kind")}
    found = first_refusal(kind_rules, change, frozenset())
    assert (found is None) if problem is None else (found is not None and problem in found.reason)


async def test_a_clean_swap_the_slots_find_stated_needs_only_the_decision_threshold_of_support() -> None:
    """edit_supported: the combiner's edit threshold for any edit, its decision threshold for a
    clean swap the slots verifier finds wholly stated (a paraphrased verb beside the fixed
    figure keeps the verifier below the edit threshold: 'evaluated' for 'examined')."""
    nli = NLIVerifier(RulePairScorer(_middling))
    policy = GatePolicy(min_entailment=0.5, supported_edit=0.99, grounded_supported=0.3)
    grounded = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, policy, SlotsVerifier())
    revision = await grounded.review(_plain_fix(), _passages())
    assert revision.status == "applied", revision.reason
    blind = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, policy)  # no slots verifier: the edit threshold
    revision = await blind.review(_plain_fix(), _passages())
    assert revision.status == "flagged" and revision.rule == "edit_supported", revision.reason
    # a swap the slots verifier does not find wholly stated keeps the edit threshold
    partial = _result(ORIGINAL.replace("1915", "1911"), [("1915", "1911", CHEMISTRY)])
    assert (await grounded.review(partial, _passages())).rule in ("edit_supported", "entails_edit")


async def test_a_figure_at_the_start_of_a_sentence_is_no_name_stated_elsewhere() -> None:
    """RAGTruth train: 'Four alleged attackers were killed' against a passage with 'four
    militants who crossed' and 'Three of the alleged attackers were killed': 'Four' is a count,
    not a name the passage states for something else."""
    from middleware.revise.gate_rules import Proposal, name_stated_elsewhere

    evidence = "Three of the alleged attackers were killed, Israeli media reported."
    passage = Passage(id="g", text=f"The airstrikes targeted four militants who crossed. {evidence}", provider="t", source="t")
    result = _swap_from("Four alleged attackers were killed.", "Four", "Three", evidence, "g")
    assert name_stated_elsewhere(Proposal(result, evidence, passage)) is None
    born = "Roger Bannister was born in Harrow."
    named = _swap_from("Oxford was where Roger Bannister was born.", "Oxford", "Harrow", born, "rb")
    rb = Passage(id="rb", text=f"{born} He died in Oxford in 2018.", provider="t", source="t")
    assert name_stated_elsewhere(Proposal(named, born, rb)) is not None


async def test_the_clause_an_edit_changes_is_read_alone_beside_the_sentence() -> None:
    """'Four alleged attackers were killed, but their affiliation remains unclear.': the
    evidence sentence states the count, another sentence of the source the affiliation. The
    model entails the edited clause, not the whole sentence; the edit goes through on the clause."""
    evidence = "Three of the alleged attackers were killed, Israeli media reported."
    claim = "Four alleged attackers were killed, but their affiliation remains unclear."

    def rule(premise: str, hypothesis: str) -> list[float]:
        if "Three" not in hypothesis:
            return [0.02, 0.08, 0.9]
        return [0.3, 0.6, 0.1] if "affiliation" in hypothesis else [0.95, 0.03, 0.02]

    nli = NLIVerifier(RulePairScorer(rule))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.8))
    passage = [Passage(id="g", text=f"The airstrikes targeted militants. {evidence}", provider="t", source="t")]
    revision = await gate.review(_swap_from(claim, "Four", "Three", evidence, "g"), passage)
    assert revision.status == "applied", revision.reason
    assert revision.scores["evidence_entails_edited"] < 0.8 <= revision.scores["evidence_entails_edited_clause"]


RECORD_LINE = "name: Finch & Fork; address: 31 W Carrillo St; city: Santa Barbara; business stars: 4.0"
RATING = "With an average rating of 4.5 stars out of 5, this restaurant has received glowing reviews."


def _unsure(premise: str, hypothesis: str) -> list[float]:
    """A model that reads a record's figures as neither support nor contradiction."""
    return [0.2, 0.75, 0.05]


async def test_a_records_own_field_value_fixes_the_number_no_field_holds() -> None:
    """RAGTruth train: '4.5 stars' against 'business stars: 4.0' was refused as 'not about the
    sentence' (a record shares few words with a sentence about it) and by the NLI thresholds,
    which read a record's figures loosely; the field itself is the check."""
    nli = NLIVerifier(RulePairScorer(_unsure))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, supported_edit=0.9),
                    SlotsVerifier())  # fmt: skip
    record = [Passage(id="finch", text=RECORD_LINE, provider="context", source="context[0]")]
    revision = await gate.review(_swap_from(RATING, "4.5", "4.0", RECORD_LINE, "finch"), record)
    assert revision.status == "applied", revision.reason
    wrong = await gate.review(_swap_from(RATING, "4.5", "31", RECORD_LINE, "finch"), record)  # the address's number
    assert wrong.status == "flagged"


ATTRIBUTES_LINE = "- attributes — Restaurants Reservations: yes; Outdoor Seating: yes; WiFi: no; Restaurants Take Out: yes"


async def test_a_records_no_replaces_the_value_a_claim_gives_a_yes_no_field() -> None:
    """RAGTruth train: 'has free Wi-Fi' against 'WiFi: no' (4 gold conflicts) could not be
    fixed: 'free' -> 'no' reads as wording to ``values_only``, the parser reads 'free' as a
    name a review also writes (``name_stated_elsewhere``), and the NLI model cannot read the
    record. The field is the check: its own 'no' goes in, nothing else does."""
    nli = NLIVerifier(RulePairScorer(_unsure))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, supported_edit=0.9),
                    SlotsVerifier())  # fmt: skip
    text = f"{ATTRIBUTES_LINE}\n- review info — review stars: 5.0; review text: Free refills and great pizza."
    record = [Passage(id="blaze", text=text, provider="context", source="context[0]")]
    claim = "Lure Fish House also offers outdoor seating, takes reservations, and has free Wi-Fi."
    fixed = await gate.review(_swap_from(claim, "free", "no", ATTRIBUTES_LINE, "blaze"), record)
    assert fixed.status == "applied", fixed.reason
    assert fixed.suggested == claim.replace("free", "no")
    paid = await gate.review(_swap_from(claim, "free", "paid", ATTRIBUTES_LINE, "blaze"), record)
    assert paid.status == "flagged"  # not the record's value
    listed = "The business offers free WiFi, takeout, and outdoor seating."  # 'no' would deny the list
    refused = await gate.review(_swap_from(listed, "free", "no", ATTRIBUTES_LINE, "blaze"), record)
    assert refused.status == "flagged"


HOURS_RECORD = readable(str({"name": "Bouchon", "hours": {
    "Monday": "17:30-23:0", **{d: "17:0-21:0" for d in ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")},
    "Sunday": "9:0-14:0"}}))  # fmt: skip


@pytest.mark.parametrize(("old", "new", "applied"), [
    ("Monday", "Tuesday", True),  # the end day the record gives other hours, moved one day in
    ("Mon", "Tues", True),  # the editor's minimal form of the same swap
    ("Monday", "Wednesday", False),  # not the day next in: Tuesday holds the claim's hours too
    ("Saturday", "Friday", False),  # a day that holds the claim's hours
])  # fmt: skip
async def test_the_day_a_record_gives_other_hours_is_moved_in_and_no_other_day_swap_passes(old, new, applied) -> None:
    """RAGTruth train: 'from Monday to Saturday from 17:00-21:00' against a Monday of
    17:30-23:00. The schedule is the check (``hours.swaps_hours``): the NLI model cannot read it."""
    nli = NLIVerifier(RulePairScorer(_unsure))
    gate = EditGate(HybridVerifier(nli, SlotsVerifier()), nli, GatePolicy(min_entailment=0.83, supported_edit=0.9),
                    SlotsVerifier())  # fmt: skip
    line = next(line for line in HOURS_RECORD.splitlines() if "hours" in line)
    record = [Passage(id="bouchon", text=HOURS_RECORD, provider="context", source="context[0]")]
    claim = "The restaurant operates from Monday to Saturday from 17:00-21:00 and on Sunday from 9:00-14:00."
    revision = await gate.review(_swap_from(claim, old, new, line, "bouchon"), record)
    assert (revision.status == "applied") is applied, revision.reason
