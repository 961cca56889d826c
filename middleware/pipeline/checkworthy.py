"""Check-worthiness: which sentences state a checkable fact. Questions, greetings,
instructions, hedged opinions and meta text (about the answer or its sources, a list's
lead-in line) are not searched; opinions and value
judgements are marked subjective (the FAVA ``subjective`` type). One spaCy parse, shared
with the rest of the pipeline through ``slots.analyse``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from middleware.pipeline.slots import Analysis, analyse
from middleware.types import Verdict

_META = re.compile(
    r"^(?:as an? (?:ai|language model|large language model|assistant)|i(?:'m| am) (?:an? )?(?:ai|language model)"
    r"|here(?:'s| is| are)\b|below (?:is|are)\b|the following\b|i hope (?:this|that) helps|hope (?:this|that) helps"
    r"|let me know\b|feel free\b|i(?:'d| would) be (?:happy|glad)|i (?:can|could|will|'ll) (?:help|explain|provide)"
    r"|(?:sure|certainly|of course|absolutely|great question|good question|okay|ok)\W*$"
    r"|in (?:summary|conclusion|short)\b|to (?:summarize|summarise|sum up)\b|(?:please )?note that\b"
    r"|i (?:don't|do not|cannot|can't) (?:have|browse|access)|my (?:knowledge|training)\b|i apologi[sz]e)",
    re.IGNORECASE,
)
_SOURCES = (
    r"(?:the |these |this |those |both |all )?(?:provided |given |above |available |structured |supplied |retrieved )*"
    r"(?:passages?|data|context|documents?|article|text|sources?|search results|information)(?: \d+)?"
)
_OPENING = (
    r"^(?:\W*(?:note|passage \d+|document \d+)\s*:\s*)?"
    r"(?:(?:however|therefore|thus|unfortunately|additionally|also|but|so|overall)\W+)*"
)
_ABOUT_SOURCES = re.compile(
    _OPENING + r"(?:i|we|it)(?: am| is|'m)? (?:(?:still )?(?:unable|not able|not possible|impossible)(?: to)?|cannot"
    r"|can't|can not|could not|couldn't) (?:answer|provide|determine|give|say|tell|find)\b"
    r"[^.]*\b(?:question|passages?|data|context|information|documents?|sources?)\b"
    r"|^unable to answer\b"
    r"|" + _OPENING + _SOURCES + r" (?:also |only |however |further )?(?:do|does|did)(?:n't| not)(?: \w+ly)? "
    r"(?:provide|mention|contain|include|specify|state|say|give|discuss|address|describe|explain|indicate|list"
    r"|cover|detail)\b"
    r"|" + _OPENING + r"[\w\s'-]{1,60} (?:is|are|was|were) not (?:mentioned|specified|stated|provided|given|listed"
    r"|included|described|discussed) (?:in|by) " + _SOURCES + r"\W*$",
    re.IGNORECASE,
)
"""What the answer says about its sources rather than the world: "Unable to answer based on
given passages.", "The passages do not provide specific cutoff values.", "Reservations are
not mentioned in the data." An NLI model cannot find an absence in the documents; on
RAGTruth's train answers, 37 of the 39 such sentences the checker flagged were judged fine
(docs/verdicts.md)."""
_GREETING = re.compile(
    r"^(?:hi|hello|hey|greetings|thanks|thank you|good (?:morning|afternoon|evening)|you(?:'re| are) welcome"
    r"|glad to help|happy to help|cheers|goodbye|bye|welcome)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:i (?:think|believe|feel|guess|suppose|reckon|would say|'d say)|in my (?:opinion|view|experience)"
    r"|personally|it seems to me|to me\b|imho|imo)\b",
    re.IGNORECASE,
)
_EVALUATIVE = frozenset(
    """beautiful great amazing awesome wonderful terrible awful best worst good bad excellent fantastic
    incredible stunning boring interesting fascinating impressive remarkable brilliant magnificent delicious
    lovely ugly nice perfect horrible overrated underrated breathtaking charming elegant exciting
    disappointing enjoyable pleasant unpleasant mediocre superb outstanding iconic inspiring beloved
    spectacular gorgeous dull fun funny cool better worse greatest finest favourite favorite""".split()
)


GROUNDED_REASONS = frozenset({"instruction", "subjective"})
"""What is checked after all when the request brings its own documents: a step of a procedure
("Remove the pan from the heat after 9 minutes.") and a judgement ("Customers praised its
margaritas.") are stated or not by the documents an answer was asked to follow. Checking them
there raised RAGTruth's and ExpertQA's end-to-end flagged balanced accuracy on their train
rows (docs/verdicts.md); without documents they stay skipped (nothing states "Click Save.")."""


@dataclass(frozen=True)
class Worthiness:
    """Whether a sentence is worth checking; ``reason`` says why not (or 'subjective')."""

    checkworthy: bool
    reason: str | None = None

    @property
    def subjective(self) -> bool:
        return self.reason == "subjective"

    def given_documents(self) -> Worthiness:
        """The assessment for a request that brings its own documents (:data:`GROUNDED_REASONS`)."""
        return Worthiness(True) if self.reason in GROUNDED_REASONS else self


def assess(text: str | Analysis) -> Worthiness:
    """Decide check-worthiness from one parse. Reasons: empty, meta, greeting, question,
    instruction, hedged, subjective."""
    analysis = analyse(text) if isinstance(text, str) else text
    stripped = analysis.text.strip().lstrip("-*•>#0123456789.) ").strip()
    words = [t for t in analysis.doc if t.is_alpha]
    for reason, test in (
        ("meta", lambda: _META.match(stripped) or _ABOUT_SOURCES.search(stripped) or _is_lead_in(stripped)),
        ("greeting", lambda: _GREETING.match(stripped)),
        ("question", lambda: stripped.rstrip("\"')» ").endswith("?")),
        ("instruction", lambda: _is_instruction(analysis)),
        ("hedged", lambda: _HEDGE.search(stripped)),
        ("subjective", lambda: _is_subjective(analysis)),
        ("empty", lambda: len(words) < 2 and not analysis.slots),
    ):
        if test():
            return Worthiness(False, reason)
    return Worthiness(True)


def _is_lead_in(text: str) -> bool:
    """A line that announces what follows ("To cook brats, follow these steps:", "Based on
    the provided data, here is an overview of Sublime:"): the items after it carry the facts."""
    return text.rstrip().endswith(":")


def _is_instruction(analysis: Analysis) -> bool:
    """An imperative ('Click Save.', 'Please make sure ...') or advice to the reader."""
    doc = analysis.doc
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return False
    subjects = [c for c in root.children if c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj")]
    first = next((t for t in doc if not t.is_punct and not t.is_space), None)
    leads = ("please", "just", "then", "first", "also", "now", "simply", "next", "finally")
    if (
        not subjects
        and root.tag_ == "VB"
        and first is not None
        and (first.i == root.i or first.lower_ in leads)
    ):
        return True
    modal = any(c.tag_ == "MD" for c in root.children)
    return modal and any(s.lower_ in ("you", "we") for s in subjects)


def _is_subjective(analysis: Analysis) -> bool:
    """A value judgement: an evaluative word or a normative 'should' and nothing checkable
    besides (no number or date, at most one named entity)."""
    doc = analysis.doc
    if analysis.of_kind("number", "quantity", "date") or len(analysis.of_kind("entity")) > 1:
        return False
    evaluative = any(
        t.lemma_.lower() in _EVALUATIVE or t.lower_ in _EVALUATIVE for t in doc if t.pos_ in ("ADJ", "ADV")
    )
    normative = any(t.lower_ in ("should", "ought") for t in doc)
    return evaluative or normative


def skipped_verdict(worthiness: Worthiness) -> Verdict:
    """The verdict of a sentence that is not checked."""
    return Verdict(label="skipped", reason=worthiness.reason, backend="checkworthy")
