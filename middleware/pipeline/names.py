"""Names of people, places and organisations: the same referent is written many ways
("Marie Curie", "Curie", "M. Curie", "Maria Skłodowska-Curie"; "the United States",
"US", "USA"; "NASA", "National Aeronautics and Space Administration")."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rapidfuzz import fuzz

_ALIAS_GROUPS = (
    ("united states", "united states of america", "us", "usa", "u s", "u s a", "america"),
    (
        "united kingdom",
        "uk",
        "u k",
        "britain",
        "great britain",
        "united kingdom of great britain and northern ireland",
    ),
    ("soviet union", "ussr", "union of soviet socialist republics"),
    ("united nations", "un"),
    ("european union", "eu"),
    ("new york city", "nyc", "new york"),
    ("los angeles", "la"),
    ("people's republic of china", "china", "prc"),
    ("republic of china", "taiwan", "roc"),
    ("russian federation", "russia"),
    ("holland", "netherlands", "the netherlands"),
    ("czechia", "czech republic"),
    ("myanmar", "burma"),
    ("eswatini", "swaziland"),
    ("turkiye", "turkey"),
    ("ivory coast", "cote d'ivoire", "cote divoire"),
    ("mumbai", "bombay"),
    ("beijing", "peking"),
    ("kolkata", "calcutta"),
    ("chennai", "madras"),
    ("world war ii", "world war 2", "second world war", "ww2", "wwii"),
    ("world war i", "world war 1", "first world war", "great war", "ww1", "wwi"),
)
_ALIASES = {name: i for i, group in enumerate(_ALIAS_GROUPS) for name in group}
_STOP = {"the", "of", "and", "for", "de", "la", "le", "von", "van", "der", "du", "&"}
_TITLES = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "sir",
    "dame",
    "lord",
    "lady",
    "prof",
    "professor",
    "saint",
    "st",
    "king",
    "queen",
}
TITLES = frozenset(_TITLES)
"""Titles before a name ('King', 'Sir', 'Dr')."""
_GENERIC_HEADS = {
    "university", "college", "school", "institute", "city", "county", "state", "province", "district",
    "river", "mount", "mountain", "mountains", "lake", "island", "islands", "tower", "bridge", "company",
    "group", "party", "republic", "kingdom", "empire", "airport", "station", "park", "museum", "church",
    "cathedral", "club", "fc", "band", "records", "studios", "prize", "award", "festival", "foundation",
}  # fmt: skip
FIRM_SUFFIXES = frozenset({"inc", "ltd", "llc", "plc", "co", "corp", "corporation", "company"})
_SUFFIXES = {
    "jr",
    "sr",
    "ii",
    "iii",
    "iv",
    "inc",
    "ltd",
    "llc",
    "plc",
    "co",
    "corp",
    "corporation",
    "company",
}


@lru_cache(maxsize=8192)
def normalise_name(text: str) -> str:
    """Lower case, no accents, no leading 'the', no possessive, punctuation to spaces."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    lowered = ascii_text.lower().replace("\u2019", "'")
    lowered = re.sub(r"'s\b|\b's$", "", lowered)
    lowered = re.sub(r"[^\w\s']|_", " ", lowered).replace("'", "")
    words = lowered.split()
    while words and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


def _tail_alone(text: str, tokens: list[str], capitalised: bool = False) -> bool:
    """The name's last word occurs in ``text`` on its own. A generic head ('College',
    'Company') must not end another name: the word before it is no capitalised word that
    the name lacks, sentence starts and titles aside ('College' in 'Christ's College' does
    not stand for 'Trinity College', nor 'Company' in 'Thomson-Houston Company' for
    'Westinghouse Electric Company'); a surname may ('Curie' in 'Pierre Curie' still names a
    Curie: which one is for the pronoun resolution to say). With ``capitalised`` (the name's
    last word is), the word must be too, or follow 'the' ('the canal' for 'the Suez Canal'):
    'to house the tomb' does not name 'Sandringham House'."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = list(re.finditer(r"[A-Za-z0-9]+(?:'s\b)?", folded.replace("\u2019", "'")))
    for k, word in enumerate(words):
        if word.group().lower().removesuffix("'s") != tokens[-1]:
            continue
        if k == 0:
            return True
        before = words[k - 1]
        lowered = before.group().lower().removesuffix("'s")
        if capitalised and not word.group()[:1].isupper():
            if lowered in ("the", "this", "that"):
                return True  # 'the canal' for 'the Suez Canal'
            continue
        sentence_start = re.search(r"(?:^|[.!?]\s+)$", folded[: before.start()]) is not None
        joined = folded[before.end() : word.start()] in (" ", "-", "' ")
        generic = tokens[-1] in _GENERIC_HEADS  # a person's surname may follow a first name the name lacks
        if not generic or not (before.group()[:1].isupper() and lowered not in tokens and lowered not in _TITLES and joined) or sentence_start:
            return True
    return False


def _tokens(normal: str) -> list[str]:
    return [w for w in normal.split() if w not in _TITLES and w not in _SUFFIXES]


def _acronym(tokens: list[str]) -> str:
    return "".join(w[0] for w in tokens if w not in _STOP)


def _initials_match(short: list[str], long: list[str]) -> bool:
    """'m curie' ~ 'marie curie', 'j r r tolkien' ~ 'john ronald reuel tolkien'."""
    if len(short) != len(long) or short[-1] != long[-1]:
        return False
    return all(
        s == w or (len(s) == 1 and w.startswith(s)) for s, w in zip(short[:-1], long[:-1], strict=True)
    )


@lru_cache(maxsize=16384)
def names_match(a: str, b: str) -> bool:
    """True if ``a`` and ``b`` plausibly name the same referent: equal after
    normalisation, known aliases, surname or sub-name ('Curie' ~ 'Marie Curie', 'Harvard'
    ~ 'Harvard University'), initials, acronyms, or a near-identical spelling."""
    na, nb = normalise_name(a), normalise_name(b)
    if not na or not nb:
        return False
    if na == nb:
        return True
    if na in _ALIASES and nb in _ALIASES:
        return _ALIASES[na] == _ALIASES[nb]
    ta, tb = _tokens(na), _tokens(nb)
    if not ta or not tb:
        return False
    if ta == tb:
        return True
    short, long = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    if _sub_name(short, long) or _initials_match(short, long) or _initials_match(long, short):
        return True
    if len(short) == 1 and len(short[0]) >= 2 and short[0] == _acronym(long):
        return True
    if len(short) >= 2 and short[-1] == long[-1] and len(short[-1]) > 2:
        # same surname, compatible first names: "Marie Curie" ~ "Maria Sklodowska Curie"
        return (
            fuzz.ratio(short[0], long[0]) >= 80
            or short[0][0] == long[0][0]
            and min(len(short[0]), len(long[0])) == 1
        )
    joined_a, joined_b = " ".join(ta), " ".join(tb)
    return min(len(joined_a), len(joined_b)) >= 8 and fuzz.ratio(joined_a, joined_b) >= 88


def _sub_name(short: list[str], long: list[str]) -> bool:
    """The shorter name is a contiguous run of the longer one that keeps its last word
    (a surname) or its distinctive head ('harvard' in 'harvard university')."""
    content = [w for w in short if w not in _STOP]
    if not content:
        return False
    n = len(short)
    for i in range(len(long) - n + 1):
        if long[i : i + n] == short:
            rest = long[:i] + long[i + n :]
            return i + n == len(long) or all(w in _GENERIC_HEADS or w in _STOP for w in rest)
    return False


def mentions(text: str, name: str) -> bool:
    """Whether ``name`` (or an alias-compatible sub-name of it) occurs in ``text``."""
    normal_text = " " + normalise_name(text) + " "
    normal_name = normalise_name(name)
    if not normal_name:
        return False
    if f" {normal_name} " in normal_text:
        return True
    tokens = _tokens(normal_name)
    # a firm's name without its 'Company' ends in no surname: 'Electric' of 'Edison General
    # Electric' does not name 'Westinghouse Electric Company'
    firm = len(tokens) > 1 and normal_name.split()[-1] in FIRM_SUFFIXES
    if firm and f" {' '.join(tokens)} " in normal_text:
        return True  # the firm's name without its 'Company' ('Westinghouse Electric')
    if tokens and not firm and len(tokens[-1]) > 2 and f" {tokens[-1]} " in normal_text and _tail_alone(text, tokens, name.rstrip()[-1:].isalpha() and name.split()[-1][:1].isupper()):
        return True
    group = _ALIASES.get(normal_name)
    return group is not None and any(f" {alias} " in normal_text for alias in _ALIAS_GROUPS[group])
