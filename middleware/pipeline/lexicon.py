"""The word lists the pipeline reads text with, in one place: pronouns by what they stand
for, negators, and what a word of a name looks like. Each module that needs one imports it
from here instead of keeping its own copy."""

from __future__ import annotations

import re

PERSONAL_PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
THING_PRONOUNS = frozenset({"it", "its", "itself"})
PLURAL_PRONOUNS = frozenset({"they", "them", "their", "theirs", "themselves"})
FIRST_PERSON_PLURAL = frozenset({"we", "us", "our", "ours", "ourselves"})
DEMONSTRATIVES = frozenset({"this", "these", "those"})
PRONOUNS = PERSONAL_PRONOUNS | THING_PRONOUNS | PLURAL_PRONOUNS | FIRST_PERSON_PLURAL
"""Pronouns a name can be replaced by (an edit must never put one in place of a name)."""
ANAPHORS = PRONOUNS | DEMONSTRATIVES
"""Words that stand for something named elsewhere: never a participant's name in themselves."""

NEGATORS = frozenset({"not", "n't", "never", "no", "neither", "nor", "nobody", "nothing", "none", "nowhere"})
"""Words that negate the verb or the noun they go with."""

NAME_WORD = re.compile(r"[A-Z0-9][\w'’.-]*")
"""One word of a name: capitalised or numbered ('Jørn', 'II', '1st', 'U.S.')."""
