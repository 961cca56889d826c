"""How the edit gate reads a value of a sentence: the slot an edit changes, whether a
replacement is a whole value of the evidence sentence and of the same kind, its era (BC /
AD), the whole name around it, and whether it is the value of the claim's role (a shared
name beside it, else the verbs). Pure readings of text, no model."""

from __future__ import annotations

import re

from middleware.pipeline.lexicon import NAME_WORD
from middleware.pipeline.names import FIRM_SUFFIXES, names_match
from middleware.pipeline.slots import Slot, analyse, slots_agree
from middleware.pipeline.verifiers.fields import swaps_field
from middleware.types import Edit

_NAME_LINKS = frozenset({"the", "of", "de", "von", "van", "da", "del", "la", "le", "du"})
_SINGULAR = frozenset({"one", "1", "a", "an", "single"})


_FIGURES = frozenset({"number", "quantity"})


def is_whole_value(new: str, slot: Slot, old: str) -> bool:
    """``new`` is the evidence's whole value: the slot itself, its figure without the unit or
    qualifier ('330' of '330 metres', '4 degrees' of 'about 4 degrees') for a figure, a coarser date ('1867' of '7 November 1867'), or its last words for as many words of a name
    (a surname for a surname: 'Einstein' of 'Albert Einstein'), or a firm's name without its
    'Company'."""
    if new == slot.text:
        return True
    if slot.kind in _FIGURES or slot.kind == "date":  # '4 degrees' of 'about 4 degrees', '1867' of '7 November 1867'
        return re.search(rf"(?<![\w.,]){re.escape(new)}(?![\w.,]\d|\w)", slot.text) is not None and any(
            c.isdigit() for c in new
        )
    if slot.kind != "entity":
        return False
    words = slot.text.split()
    if words[-1].lower().strip(".") in FIRM_SUFFIXES and " ".join(words[:-1]) == new:
        return True  # a firm's name without its 'Company' ('Thomson-Houston' of 'Thomson-Houston Company')
    tail = " ".join(words[-len(new.split()) :])
    return tail == new and len(new.split()) == len(old.split()) < len(words)


def is_same_kind(mine: Slot, theirs: Slot) -> bool:
    """Names of one type (or one of them untyped), dates, or figures of one dimension."""
    if mine.kind in _FIGURES and theirs.kind in _FIGURES:
        dimensions = {g for g in (mine.group, theirs.group) if g != "quantity:bare" and g.startswith("quantity:")}
        return len(dimensions) <= 1
    if mine.kind != theirs.kind:
        return False
    return mine.kind == "date" or mine.group == theirs.group or "propn" in (mine.group, theirs.group)


def whole_name(sentence: str, edit: Edit) -> str:
    """The claim's whole name the edit changes part of ('Westinghouse Electric Company' for
    'Westinghouse Electric'), so it is looked for as the name it is (a firm's name ends in
    no surname)."""
    whole = claim_slot(sentence, edit, "entity")
    return whole.text if whole is not None else edit.original.strip()


def claim_slot(sentence: str, edit: Edit, kind: str | None = None) -> Slot | None:
    """The slot of ``sentence`` (of ``kind``) that holds the edited span."""
    return next(
        (s for s in analyse(sentence).slots
         if (kind is None or s.kind == kind) and s.start <= edit.start and edit.end <= s.end),
        None,
    )  # fmt: skip


_ERA_WORD = r"(BCE|BC|CE|AD|B\.C\.(?:E\.)?|A\.D\.)"
_ERA_AFTER = re.compile(rf"\s*{_ERA_WORD}(?!\w)", re.IGNORECASE)
_ERA_AT_END = re.compile(rf"\b{_ERA_WORD}\s*$", re.IGNORECASE)


def era(text: str, start: int, end: int) -> str:
    """'BC' or 'AD' for the value ``text[start:end]``: the era written at its end or right
    after it ('2nd century BCE', '753 BC'), AD where none is. A swap must keep it: '2018'
    from 'opened in 2018' would make '2nd century BCE' '2018 BCE', and '1753' for '753 BC'
    would drop the BC."""
    found = _ERA_AT_END.search(text[start:end]) or _ERA_AFTER.match(text, end)
    return "BC" if found is not None and found.group(1).upper().startswith("B") else "AD"


def word_set(text: str) -> set[str]:
    """The lower-cased words of ``text``."""
    return {w.lower() for w in re.findall(r"[\w']+", text)}


def name_run(text: str, start: int, length: int) -> str:
    """The whole capitalised name around ``text[start:start + length]`` ('Ivan IV the Great')."""
    if start < 0:
        return ""
    tokens = [(m.start(), m.end(), m.group()) for m in re.finditer(r"[\w'’.-]+", text)]
    inside = [i for i, (s, e, _) in enumerate(tokens) if s < start + length and start < e]
    if not inside:
        return ""

    def is_name(i: int) -> bool:
        return 0 <= i < len(tokens) and bool(NAME_WORD.fullmatch(tokens[i][2]))

    def linked(i: int, step: int) -> bool:  # 'the' in 'Peter the Great'
        return 0 <= i < len(tokens) and tokens[i][2] in _NAME_LINKS and is_name(i + step)

    def spaced(i: int, j: int) -> bool:  # nothing but spaces between tokens i and j
        return 0 <= i < len(tokens) and 0 <= j < len(tokens) and not text[tokens[i][1] : tokens[j][0]].strip()

    first, last = inside[0], inside[-1]
    while (is_name(first - 1) or linked(first - 1, -1)) and spaced(first - 1, first):
        first -= 1
    while (is_name(last + 1) or linked(last + 1, 1)) and spaced(last, last + 1):
        last += 1
    run = text[tokens[first][0] : tokens[last][1]].rstrip(".")
    return run if NAME_WORD.match(run) else ""


def is_singular_before_plural(text: str, new: str) -> bool:
    """'completing one orbits': a singular number swapped in before a plural noun."""
    at = text.find(new)
    if at < 0 or new.strip().lower() not in _SINGULAR:
        return False
    doc = analyse(text).doc
    following = [t for t in doc if t.idx >= at + len(new)]
    return bool(following) and following[0].tag_ in ("NNS", "NNPS")


def role_mismatch(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """Why ``new`` (a value of the evidence sentence) is not the value of ``old``'s role: the
    evidence gives ``new`` to another verb while another value of the same kind belongs to
    the verb ``old`` hangs on ('founded in 1897' with 'founded in 1887 and inaugurated in
    1888': 1887, not 1888). None when roles agree or cannot be told."""
    claim = analyse(sentence)
    mine = next((s for s in claim.slots if s.text == old.strip() or old.strip() in s.text), None)
    if mine is None or mine.role.verb is None:
        return None
    stated = analyse(evidence).slots
    holding = [s for s in stated if s.text == new.strip() or new.strip() in s.text]
    if not holding or any(s.role.verb in (None, mine.role.verb) for s in holding):
        return None  # the value (somewhere in the sentence) belongs to the claim's verb, or roles are unknown
    theirs = holding[0]
    rival = next((s for s in stated if s is not theirs and s.group == theirs.group and s.role.verb == mine.role.verb), None)
    if rival is None:
        return None
    return f"the evidence gives '{new.strip()}' to '{theirs.role.verb}' and '{rival.text}' to '{mine.role.verb}'"


def value_problem(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """Why ``new`` (a value of the evidence sentence) is not the value the claim's ``old``
    stands for, or None. What the claim is about decides first: when a name the claim and the
    evidence share stands right by ``new`` it is the value ('... followed by Pride and
    Prejudice in 1813'), when every shared name sits nearest another value it is not;
    otherwise verbs decide (``role_mismatch``: 'FIDE, was founded in Paris on 20 July 1924,
    and it took control of the championship in 1948' gives 'took control' 1948, though
    'FIDE' sits nearer 1924). In a record's line the field decides: the record's own value of
    the field whose noun the claim gives ``old`` (``fields.swaps_field``) is the value."""
    at = sentence.find(old)
    if at >= 0 and swaps_field(sentence, [(at, at + len(old), new)], evidence):
        return None
    anchored = _anchored_value(old, sentence, new, evidence)
    if anchored == "beside":
        return None
    if anchored == "elsewhere":
        return f"in the evidence sentence another value than '{new.strip()}' goes with what the claim is about"
    return role_mismatch(old, sentence, new, evidence)


_BESIDE = 5
"""Characters at most between a shared name and its value for the name to decide alone ('Pride
and Prejudice in 1813', 'A Tale of Two Cities (1859)')."""


def _anchored_value(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """'beside': a name the claim and the evidence share stands right by ``new`` and nearer it
    than any other value; 'near': such a name is nearest ``new``, further off; 'elsewhere':
    every shared name is nearest another value; None: no shared name or no choice."""
    claim = analyse(sentence)
    mine = next((s for s in claim.slots if old.strip() and old.strip() in s.text), None)
    stated = analyse(evidence).slots
    others = [c for c in claim.slots if c is not mine]
    # the evidence's values of the claim's type, but for those that state another slot of the
    # claim ('32 piano sonatas and one opera, Fidelio': 'one' is the claim's own 'one')
    values = [
        s for s in stated
        if mine is not None and s.kind != "entity" and s.group == mine.group
        and not any(slots_agree(c, s) for c in others)
    ]  # fmt: skip
    chosen = [s for s in values if new.strip() and new.strip() in s.text]
    if mine is None or len(values) < 2 or not chosen:
        return None
    anchors = [
        e for e in stated
        if e.kind == "entity" and any(c.kind == "entity" and names_match(c.text, e.text) for c in claim.slots)
    ]  # fmt: skip
    if not anchors:
        return None

    def distance(value: Slot, anchor: Slot) -> int:
        return value.start - anchor.end if value.start >= anchor.end else anchor.start - value.end

    nearest = {a: min(values, key=lambda v, a=a: distance(v, a)) for a in anchors}
    mine_near = [a for a, v in nearest.items() if any(c is v for c in chosen)]
    if not mine_near:
        return "elsewhere"
    return "beside" if any(distance(v, a) <= _BESIDE for a in mine_near for v in chosen) else "near"
