"""The checkable slots of a sentence: named entities, numbers and quantities with units,
dates, and the relation (main verb, preposition, negation), each with character offsets
and a normalised value, from one spaCy parse per sentence (cached).

Slots are what the offline question generator asks about, what the slots verifier compares
with the evidence, and what the editor replaces."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

from spacy.tokens import Doc, Span, Token

from middleware.text.nlp import get_nlp
from middleware.pipeline.dates import DateValue, dates_match, parse_date
from middleware.evidence.lexical import terms
from middleware.pipeline.lexicon import NEGATORS
from middleware.pipeline.names import TITLES, names_match, normalise_name
from middleware.pipeline.quantities import Quantity, find_unit, parse_quantity, quantities_match
from middleware.runtime.batcher import MicroBatcher

SlotKind = Literal["entity", "number", "quantity", "date"]

ENTITY_LABELS = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW", "LANGUAGE"}
)
"""spaCy labels of the names that are entity slots; also the entities that training corrupts
(``middleware.training.corruption``), so the verifier learns the swaps it is asked to catch."""
NUMBER_LABELS = frozenset({"CARDINAL", "QUANTITY", "PERCENT", "MONEY", "ORDINAL"})
"""spaCy labels of the spans that are number and quantity slots (and number corruptions)."""
# entity labels that may stand for one another (spaCy confuses GPE/LOC/FAC)
_LABEL_GROUP = {
    "PERSON": "person", "ORG": "org", "GPE": "place", "LOC": "place", "FAC": "place", "NORP": "norp",
    "EVENT": "event", "WORK_OF_ART": "work", "PRODUCT": "work", "LAW": "law", "LANGUAGE": "language",
}  # fmt: skip


@dataclass(frozen=True)
class Role:
    """Where a slot sits in its clause: its dependency, the preposition that governs it
    and the lemma it attaches to ('born in Warsaw' -> dep pobj, prep 'in', head 'bear')."""

    dep: str
    prep: str | None
    head: str
    verb: str | None = None  # lemma of the clause's verb ('in Warsaw' attached to a date still has 'bear')
    part: str | None = None  # its part in the verb's event, whatever the voice: 'agent', 'patient', 'to' ...

    def same_part(self, other: Role) -> bool:
        """The same party to the same verb, active or passive: 'chosen ... by Queen Anne' and
        'Queen Victoria chose it' both name who chose."""
        return self.part is not None and self.part == other.part and self.verb == other.verb


@dataclass(frozen=True)
class Slot:
    kind: SlotKind
    label: str  # spaCy label, or PROPN for a proper noun the NER missed
    text: str
    start: int  # character offsets in the analysed text
    end: int
    value: Quantity | DateValue | str  # normalised: Quantity, DateValue, or a normalised name
    role: Role

    @property
    def group(self) -> str:
        """Comparable type: entities by label family, numbers by dimension."""
        if isinstance(self.value, Quantity):
            return f"quantity:{self.value.dimension or 'bare'}"
        if isinstance(self.value, DateValue):
            return "date"
        return _LABEL_GROUP.get(self.label, "propn")


@dataclass(frozen=True)
class Relation:
    """A verb (or copula) of the sentence: lemma, offsets, first preposition, negation."""

    lemma: str
    text: str
    start: int
    end: int
    prep: str | None
    negated: bool
    is_root: bool
    objects: frozenset[str] = frozenset()  # lemmas of its objects and complements ('win' -> {'prize'})


@dataclass
class Analysis:
    """One parsed sentence with everything the pipeline reads from it."""

    text: str
    doc: Doc
    slots: tuple[Slot, ...]
    relations: tuple[Relation, ...]
    subject: tuple[int, int] | None  # main subject's char span
    terms: tuple[str, ...] = field(default=())

    @property
    def relation(self) -> Relation | None:
        """The main (root) relation."""
        return next((r for r in self.relations if r.is_root), self.relations[0] if self.relations else None)

    @property
    def negated(self) -> bool:
        main = self.relation
        return bool(main and main.negated)

    def of_kind(self, *kinds: SlotKind) -> list[Slot]:
        return [s for s in self.slots if s.kind in kinds]

    def without_slots(self, spans: Sequence[tuple[int, int]]) -> Analysis:
        """A copy without the slots that overlap ``spans`` (the cached reading is shared: never changed)."""
        kept = tuple(s for s in self.slots if not any(s.start < end and start < s.end for start, end in spans))
        return replace(self, slots=kept)


_CACHE: OrderedDict[str, Analysis] = OrderedDict()
_CACHE_SIZE = 4096
_CACHE_LOCK = threading.Lock()  # callers may parse in worker threads


def cache_size() -> int:
    return _CACHE_SIZE


def set_cache_size(size: int) -> None:
    """How many parsed texts ``analyse`` keeps (evaluation runs that reread the same texts
    keep them all)."""
    global _CACHE_SIZE
    _CACHE_SIZE = size


def analyse(text: str) -> Analysis:
    """Parse ``text`` once (LRU-cached by text) and extract its slots and relations."""
    hit = _cached(text)
    return hit if hit is not None else _remember(analysis_of(get_nlp()(text)))


def analyse_many(texts: Sequence[str]) -> list[Analysis]:
    """Analyse several texts, parsing those not in the cache in one ``nlp.pipe`` batch."""
    missing = [t for t in dict.fromkeys(texts) if t not in _CACHE]
    if len(missing) > 1:
        for doc in get_nlp().pipe(missing):
            _remember(analysis_of(doc))
    return [analyse(t) for t in texts]


PARSE_BATCH = 16
"""Most texts per ``nlp.pipe`` call of the parse batcher."""
PARSE_WAIT_MS = 2.0
"""Longest wait of a lone text for others to parse with."""


async def analyse_async(texts: Sequence[str]) -> list[Analysis]:
    """``analyse_many`` for the serving path: the texts not in the cache are parsed by the
    process's parse batcher, off the event loop, together with what concurrent checks parse at
    the same moment."""
    found: dict[str, Analysis] = {}
    for text in texts:
        if (hit := _cached(text)) is not None:
            found[text] = hit
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        found.update(zip(missing, await _parser().submit_many(missing), strict=True))
    return [found[t] for t in texts]


@lru_cache(maxsize=1)
def _parser() -> MicroBatcher[str, Analysis]:
    """spaCy behind a micro-batcher, in its own thread: the texts of concurrent checks go
    through one ``nlp.pipe`` (a batch of short sentences costs about half the CPU of an
    ``nlp()`` call each, and parses them the same: checked on 3,000 battery texts), and a text
    already being parsed is waited for, not parsed again."""
    return MicroBatcher(_parse_batch, max_batch=PARSE_BATCH, max_wait_ms=PARSE_WAIT_MS, name="spacy")


def _parse_batch(texts: list[str]) -> list[Analysis]:
    return [_remember(analysis_of(doc)) for doc in get_nlp().pipe(texts)]


def _cached(text: str) -> Analysis | None:
    """The cached analysis of ``text`` (now the most recently used), or None."""
    with _CACHE_LOCK:
        hit = _CACHE.get(text)
        if hit is not None:
            _CACHE.move_to_end(text)
        return hit


def _remember(analysis: Analysis) -> Analysis:
    with _CACHE_LOCK:
        _CACHE[analysis.text] = analysis
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return analysis


def analysis_of(doc: Doc) -> Analysis:
    """Build the analysis of an already parsed doc."""
    text = doc.text
    slots = _dedupe([*_entities(doc), *_numbers(doc), *_dates(doc)])
    return Analysis(
        text=text,
        doc=doc,
        slots=tuple(sorted(slots, key=lambda s: s.start)),
        relations=tuple(_relations(doc)),
        subject=_subject(doc),
        terms=terms(text),
    )


def _role(span: Span | Token, appositive: bool = False) -> Role:
    """With ``appositive``, a name in apposition to a common noun plays that noun's role
    ('with the French painter Georges Braque': the object of 'with')."""
    root = span.root if isinstance(span, Span) else span
    if appositive and root.dep_ == "appos" and root.head.pos_ == "NOUN":
        root = root.head
    head = root.head
    verb = next((t.lemma_.lower() for t in root.ancestors if t.pos_ in ("VERB", "AUX")), None)
    found = _participant_role(_first_conjunct(root))
    part = found[1] if found is not None and found[0] == verb else None
    if head.dep_ in ("prep", "agent", "dative") and head.i != root.i:
        return Role(root.dep_, head.lemma_.lower(), head.head.lemma_.lower(), verb, part)
    return Role(root.dep_, None, head.lemma_.lower(), verb, part)


def _trim_determiner(span: Span) -> Span:
    if len(span) > 1 and span[0].lower_ in ("the", "a", "an"):
        return span[1:]
    return span


def _name_part(ent: Span) -> bool:
    """A lone month name that ends a proper name ('the Salt March', 'the Long March'): a
    capitalised noun before it depends on it. Part of that name, not a date."""
    if ent.label_ != "DATE" or len(ent) != 1 or ent.start == 0:
        return False
    date = parse_date(ent.text)
    before = ent.doc[ent.start - 1]
    return (
        date is not None and date.year is None and before.pos_ == "PROPN" and before.dep_ == "compound"
        and before.head.i == ent.start and before.text[:1].isupper()
    )  # fmt: skip


def _titled(ent: Span) -> bool:
    """A capitalised title the NER left out right before a person's name ('King' of 'King
    Alfonso XIII', 'Queen' of 'Queen Victoria')."""
    if ent.start == 0:
        return False
    before = ent.doc[ent.start - 1]
    return before.ent_type_ == "" and before.text[:1].isupper() and before.lower_ in TITLES


def _entities(doc: Doc) -> Iterable[Slot]:
    covered: set[int] = set()
    for ent in doc.ents:
        if _name_part(ent):
            continue
        covered.update(range(ent.start, ent.end))
        if ent.label_ not in ENTITY_LABELS:
            continue
        span = _trim_determiner(ent)
        if ent.label_ == "PERSON" and _titled(ent):  # 'King' + 'Alfonso XIII': one name
            covered.add(ent.start - 1)
            span = Span(doc, ent.start - 1, ent.end, label=ent.label_)
        value = normalise_name(span.text)
        if value:
            yield Slot("entity", ent.label_, span.text, span.start_char, span.end_char, value, _role(ent, True))
    # proper nouns the NER missed ("Einstein did not ...")
    run: list[Token] = []
    for token in [*doc, None]:
        if token is not None and token.i not in covered and token.is_alpha and (
            token.pos_ == "PROPN" or run and _REGNAL.fullmatch(token.text)
        ):
            run.append(token)  # with a regnal number the parse took for a pronoun ('King Francis' + 'I')
            continue
        if run and not (len(run) == 1 and run[0].i == 0 and run[0].is_stop):
            span = doc[run[0].i : run[-1].i + 1]
            yield Slot(
                "entity",
                "PROPN",
                span.text,
                span.start_char,
                span.end_char,
                normalise_name(span.text),
                _role(span, True),
            )
        run = []


_REGNAL = re.compile(r"[IVX]{1,4}")


def _numbers(doc: Doc) -> Iterable[Slot]:
    in_entity = {i for ent in doc.ents for i in range(ent.start, ent.end)}
    spans = [ent for ent in doc.ents if ent.label_ in NUMBER_LABELS]
    spans += [doc[t.i : t.i + 1] for t in doc if t.like_num and t.i not in in_entity and _is_numeric(t)]
    for span in spans:
        label = span.label_ if span.label_ else "CARDINAL"
        span = _with_currency(_with_unit(span))
        value = parse_quantity(span.text, label)
        if value is None:
            continue
        kind: SlotKind = "quantity" if value.dimension not in (None, "ordinal") else "number"
        yield Slot(kind, label, span.text, span.start_char, span.end_char, value, _role(span))


def _is_numeric(token: Token) -> bool:
    return bool(re.search(r"\d", token.text)) or token.lower_ in ("twelve", "eleven", "dozen")


def _with_unit(span: Span) -> Span:
    """Extend a number span over a unit the NER left out ('8,849' + 'm', '45' + '° C')."""
    parsed = parse_quantity(span.text, span.label_ or None)
    if parsed is not None and parsed.unit is not None:
        return span
    doc = span.doc
    best = span
    for k in range(1, 4):
        if span.end + k > len(doc):
            break
        tail = doc[span.end : span.end + k]
        collapsed = re.sub(r"\s+", " ", tail.text.lower())
        unit = find_unit(collapsed, money=span.label_ == "MONEY")
        if unit and (collapsed == unit[0] or collapsed.replace(" ", "") == unit[0].replace(" ", "")):
            best = doc[span.start : span.end + k]
    if best is not span:
        return Span(doc, best.start, best.end, label=span.label_ or "QUANTITY")
    return span


def _with_currency(span: Span) -> Span:
    doc = span.doc
    if span.start > 0 and doc[span.start - 1].text in ("$", "€", "£", "¥", "₹", "US$"):
        return Span(doc, span.start - 1, span.end, label="MONEY")
    return span


_DECADE = re.compile(
    r"\b(?:the )?(?:(?:early|mid|late)[- ])?(?:\d{3}0s|(?:twen|thir|for|fif|six|seven|eigh|nine)ties)\b",
    re.IGNORECASE,
)


def _dates(doc: Doc) -> Iterable[Slot]:
    in_entity = [(ent.start_char, ent.end_char) for ent in doc.ents]
    for match in _DECADE.finditer(doc.text):  # decades the NER missed ('born in the forties')
        if any(s < match.end() and match.start() < e for s, e in in_entity):
            continue
        span = doc.char_span(match.start(), match.end(), alignment_mode="expand")
        date = parse_date(match.group())
        if span is not None and date is not None:
            span = _trim_determiner(span)
            yield Slot("date", "DATE", span.text, span.start_char, span.end_char, date, _role(span))
    for ent in doc.ents:
        if _name_part(ent):
            continue
        if ent.label_ == "TIME":  # a duration ('in 49 seconds'); clock times are no slots
            duration = parse_quantity(ent.text, "TIME")
            if duration is not None and duration.dimension == "time":
                yield Slot("quantity", "TIME", ent.text, ent.start_char, ent.end_char, duration, _role(ent))
            continue
        if ent.label_ != "DATE":
            continue
        span = _trim_determiner(ent)
        pair = _date_pair(span)
        if pair:
            yield from (
                Slot("date", "DATE", text, start, end, date, _role(ent)) for text, start, end, date in pair
            )
            continue
        date = parse_date(span.text)
        if date is not None:
            yield Slot("date", "DATE", span.text, span.start_char, span.end_char, date, _role(ent))
            continue
        duration = parse_quantity(span.text, "DATE")
        if duration is not None and duration.dimension == "time":
            yield Slot("quantity", "DATE", span.text, span.start_char, span.end_char, duration, _role(ent))
        elif (age := _age(span)) is not None:
            yield age


_AGE_CUES = frozenset({"age", "aged", "old"})


def _age(span: Span) -> Slot | None:
    """An age the NER tagged DATE ('died ..., aged 45', 'at the age of 25', '25 years old'):
    a quantity of its own dimension on the number alone, so that 45 and 42 disagree and an
    edit swaps only the number."""
    numbers = [t for t in span if t.like_num and _is_numeric(t)]
    doc = span.doc
    around = {t.lower_ for t in doc[max(0, span.start - 2) : min(len(doc), span.end + 2)]}
    if len(numbers) != 1 or not around & _AGE_CUES:
        return None
    number = numbers[0]
    value = parse_quantity(number.text, "CARDINAL")
    if value is None or value.dimension is not None:
        return None
    age = Quantity(value.value, value.raw, "age", None, value.step, value.approx, value.bound)
    return Slot("quantity", "DATE", number.text, number.idx, number.idx + len(number), age, _role(number))


_DATE_SEPARATOR = re.compile(r"\s*(?:--|[-–—−]|\bto\b|\buntil\b)\s*")


def _date_pair(span: Span) -> list[tuple[str, int, int, DateValue]]:
    """'April 8, 1974 – February 2, 2013' (a lifespan) is two dates, not one interval."""
    text = span.text
    for sep in _DATE_SEPARATOR.finditer(text):
        left, right = text[: sep.start()], text[sep.end() :]
        first, last = parse_date(left), parse_date(right)
        if first and last and first.granularity in ("day", "month") and last.granularity in ("day", "month"):
            base = span.start_char
            return [(left, base, base + len(left), first), (right, base + sep.end(), base + len(text), last)]
    return []


def _dedupe(slots: list[Slot]) -> list[Slot]:
    """Drop slots nested in a longer slot (a PROPN run inside a date, etc.)."""
    kept: list[Slot] = []
    for slot in sorted(slots, key=lambda s: (s.start, -(s.end - s.start))):
        if any(k.start <= slot.start and slot.end <= k.end for k in kept):
            continue
        kept.append(slot)
    return kept


def _relations(doc: Doc) -> Iterable[Relation]:
    for token in doc:
        is_root = token.dep_ == "ROOT"
        if token.pos_ != "VERB" and not (is_root and token.pos_ == "AUX"):
            continue
        negated = any(c.dep_ == "neg" or c.lower_ in NEGATORS for c in token.children)
        negated = negated or any(
            c.lower_ in ("no", "none", "nothing") and c.dep_ == "det" for c in token.children
        )
        prep = next((c.lemma_.lower() for c in token.children if c.dep_ in ("prep", "agent", "dative")), None)
        yield Relation(
            token.lemma_.lower(),
            token.text,
            token.idx,
            token.idx + len(token),
            prep,
            negated,
            is_root,
            _objects(token),
        )


def _objects(verb: Token) -> frozenset[str]:
    out = set()
    for child in verb.children:
        if child.dep_ in ("dobj", "attr", "acomp", "oprd", "dative", "xcomp"):
            out.add(child.lemma_.lower())
        elif child.dep_ in ("prep", "agent"):
            out.update(g.lemma_.lower() for g in child.children if g.dep_ == "pobj")
    return frozenset(out)


def _subject(doc: Doc) -> tuple[int, int] | None:
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return None
    subject = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass", "csubj", "expl")), None)
    if subject is None:
        return None
    tokens = [t for t in subject.subtree if t.dep_ not in ("punct", "appos", "relcl", "acl") or t is subject]
    left = min(t.i for t in tokens)
    right = max(t.i for t in tokens) + 1
    span = doc[left:right]
    return span.start_char, span.end_char


def slots_agree(a: Slot, b: Slot) -> bool | None:
    """True if two slots say the same thing, False if they are comparable and differ, None
    if they cannot be compared (different kinds, dimensions or entity families)."""
    if isinstance(a.value, Quantity) and isinstance(b.value, Quantity):
        return quantities_match(a.value, b.value)
    if isinstance(a.value, DateValue) and isinstance(b.value, DateValue):
        return dates_match(a.value, b.value)
    if a.kind == "entity" and b.kind == "entity":
        if names_match(a.text, b.text):
            return True
        if a.group == b.group or "propn" in (a.group, b.group) or _same_series(a.text, b.text):
            return False
        return None
    if (
        isinstance(a.value, DateValue)
        and isinstance(b.value, Quantity)
        or isinstance(a.value, Quantity)
        and isinstance(b.value, DateValue)
    ):
        return _year_number_agree(a, b)
    return None


def _same_series(a: str, b: str) -> bool:
    """Two names of one series or kind that the NER may label differently: the same first or
    last word, the rest different ('Gemini 12' / 'Gemini 8', 'Wake Island' / 'Howland Island',
    'King Louis XII' / 'King Francis I')."""
    x, y = a.split(), b.split()
    if len(x) < 2 or len(y) < 2 or x == y:
        return False
    return x[0] == y[0] or x[-1] == y[-1]


def role_similarity(a: Slot, b: Slot) -> float:
    """How alike two slots' roles are: the same governing word or clause verb (2), the same
    preposition (1), dependency (0.5) and label (0.5). The verifier picks the evidence slot
    that plays the claim slot's role by it, the editor the slot that may replace it."""
    score = 0.0
    if a.role.head == b.role.head or a.role.verb is not None and a.role.verb == b.role.verb:
        score += 2.0
    same_part = a.role.same_part(b.role)  # 'by Queen Anne' (passive) plays 'Queen Victoria chose'
    if a.role.prep is not None and a.role.prep == b.role.prep or same_part:
        score += 1.0
    if a.role.dep == b.role.dep or same_part:
        score += 0.5
    if a.label == b.label:
        score += 0.5
    return score


def _year_number_agree(a: Slot, b: Slot) -> bool | None:
    """A year tagged CARDINAL on one side and DATE on the other ('in 1889')."""
    date = a.value if isinstance(a.value, DateValue) else b.value
    number = b.value if isinstance(b.value, Quantity) else a.value
    assert isinstance(date, DateValue) and isinstance(number, Quantity)
    if number.dimension is not None or date.year is None or date.granularity != "year":
        return None
    if not number.raw.is_integer() or not 1000 <= number.raw <= 2100:
        return None  # 'three films' is not a year
    return date.year == int(number.raw)


ParticipantRole = str
"""'agent', 'patient', or 'from' / 'to' / 'into' / 'against' for those prepositions' objects."""
_ROLE_PREPOSITIONS = frozenset({"from", "to", "into", "against"})


@dataclass(frozen=True)
class Participant:
    """A named party to a verb's event: who does it (``agent``: the active subject, or the
    ``by`` phrase of a passive), to whom it is done (``patient``: the direct object, or the
    passive subject), or where it goes from or to (``from``, ``to`` ...). Conjuncts share
    their head's role ('carrying Neil Armstrong and Buzz Aldrin': both patients of 'carry').
    ``slot`` is None for a pronoun resolved to the passage's topic."""

    verb: str  # lemma
    role: ParticipantRole
    name: str
    slot: Slot | None = None


def participants(
    analysis: Analysis, topic: str | None = None, pronouns: frozenset[str] = frozenset()
) -> list[Participant]:
    """Who-did-what-to-whom of a parsed sentence among its entities; with ``topic`` (what the
    passage is about, e.g. its title), a subject or object pronoun of ``pronouns`` ('he',
    'she' for a person, 'it' for a thing) stands for it (evidence sentences are
    decontextualised this way: 'He moved to Vienna in 1792')."""
    out = []
    doc = analysis.doc
    for slot in analysis.slots:
        if slot.kind != "entity":
            continue
        span = doc.char_span(slot.start, slot.end, alignment_mode="expand")
        if span is None:
            continue
        found = _participant_role(_first_conjunct(span.root))
        if found is not None:
            out.append(Participant(found[0], found[1], slot.text, slot))
    if topic:
        for token in doc:
            if token.lower_ in pronouns and token.tag_ == "PRP" and not _named_subject_before(analysis, token):
                found = _participant_role(_first_conjunct(token))
                if found is not None:
                    out.append(Participant(found[0], found[1], topic))
    return out


def clause_subject_token(analysis: Analysis, slot: Slot) -> Token | None:
    """The subject word of the clause ``slot`` sits in: the subject of its verb, or of the
    verb that verb is conjoined to ('Isaac Newton studied and taught at Trinity College':
    'Newton' for 'Trinity College'). None without a subject or where the slot is the
    subject itself."""
    span = analysis.doc.char_span(slot.start, slot.end, alignment_mode="expand")
    if span is None:
        return None
    verb = next((t for t in span.root.ancestors if t.pos_ in ("VERB", "AUX")), None)
    while verb is not None:
        subject = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subject is not None:
            return None if slot.start <= subject.idx < slot.end else subject
        verb = verb.head if verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX") else None
    return None


def clause_subject(analysis: Analysis, slot: Slot) -> Slot | None:
    """The named subject of the clause ``slot`` sits in ('Isaac Newton' for 'Trinity
    College' above). None for a pronoun or a common noun, no subject, or the slot being the
    subject itself."""
    subject = clause_subject_token(analysis, slot)
    if subject is None:
        return None
    return next((s for s in analysis.slots if s.kind == "entity" and s.start <= subject.idx < s.end), None)


def _named_subject_before(analysis: Analysis, pronoun: Token) -> bool:
    """A name earlier in the sentence is a clause's subject (or in apposition to it): the
    pronoun refers back to it, not to the passage's topic ('The world chess federation,
    FIDE, was founded in Paris ..., and it took control of the championship')."""
    for slot in analysis.slots:
        if slot.kind != "entity" or slot.end > pronoun.idx:
            continue
        span = analysis.doc.char_span(slot.start, slot.end, alignment_mode="expand")
        root = span.root if span is not None else None
        while root is not None and root.dep_ == "appos":
            root = root.head
        if root is not None and root.dep_ in ("nsubj", "nsubjpass"):
            return True
    return False


def _first_conjunct(token: Token) -> Token:
    while token.dep_ == "conj" and token.head.i != token.i:
        token = token.head
    return token


def _participant_role(token: Token) -> tuple[str, ParticipantRole] | None:
    head = token.head
    if token.dep_ == "nsubj" and head.pos_ in ("VERB", "AUX"):
        return head.lemma_.lower(), "agent"
    if token.dep_ == "pobj" and head.dep_ == "agent" and head.head.pos_ == "VERB":
        return head.head.lemma_.lower(), "agent"
    if token.dep_ == "nsubjpass" and head.pos_ == "VERB" and any(c.dep_ == "dobj" for c in head.children):
        return head.lemma_.lower(), "to"  # the recipient: 'Bohr was awarded it' is 'awarded it to Bohr'
    if token.dep_ in ("dobj", "nsubjpass") and head.pos_ == "VERB":
        return head.lemma_.lower(), "patient"
    if token.dep_ == "pobj" and head.lower_ in _ROLE_PREPOSITIONS and head.head.pos_ == "VERB":
        return head.head.lemma_.lower(), head.lower_
    return None


def named_subject(analysis: Analysis) -> Slot | None:
    """The subject of the main verb, where it is a name ('After Newton left, Darwin studied
    ...': Darwin)."""
    if analysis.subject is None:
        return None
    start, end = analysis.subject
    return next((c for c in analysis.slots if c.kind == "entity" and start <= c.start and c.end <= end), None)
