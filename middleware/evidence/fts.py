"""The BM25 half of the local index: SQLite FTS5 queries with a bounded cost.

FTS5's ``bm25()`` costs a few microseconds per matching row, and an OR query over common
words matches tens of thousands of rows in a 100k-passage index (40 ms and more). The
query's rarest words carry nearly all of its BM25 weight (IDF falls with document
frequency), so each query keeps its words in order of rising document frequency while
their matches fit in ``budget`` scored rows; when even the rarest word is too common, all
words must match (AND) instead. Document frequencies come from FTS5 itself (a count per
quoted word, exact for its tokenizer and stemmer) and are cached per index generation.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from functools import cache

SCORED_ROWS = 2000
MAX_QUERY_TERMS = 32
_CACHE_LIMIT = 100_000
_BM25 = "bm25(passages_fts, 0.5, 1.0)"
"""Title matches count half as much as text matches: every passage of a document has its title."""
_WORD = re.compile(r"\w+")


def query_terms(query: str) -> list[str]:
    """The query's distinct words, lower-cased, stop words dropped unless nothing else is
    left. Each is later quoted, so no word is ever read as FTS5 syntax."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    stop = _stop_words()
    return ([w for w in words if w not in stop] or words)[:MAX_QUERY_TERMS]


@cache
def _stop_words() -> frozenset[str]:
    """spaCy's English stop words, imported at the first query: a process that only opens an
    index (the relay checking the demo index at start-up) does not load spaCy."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def _quoted(term: str) -> str:
    return f'"{term}"'  # \w+ words hold no double quote


class LexicalSearch:
    """BM25 search over the ``passages_fts`` table with at most about ``budget`` rows scored."""

    def __init__(self, budget: int = SCORED_ROWS) -> None:
        self.budget = budget
        self._df: dict[str, int] = {}
        self._generation: int | None = None
        self._lock = threading.Lock()

    def search(self, db: sqlite3.Connection, generation: int, query: str, n: int) -> list[int]:
        """Rowids of the ``n`` best BM25 matches for ``query``."""
        frequencies = sorted((df, t) for t in query_terms(query) if (df := self.doc_freq(db, generation, t)) > 0)
        if not frequencies:
            return []
        kept, scored = [frequencies[0][1]], frequencies[0][0]
        for df, term in frequencies[1:]:
            if scored + df > self.budget:
                break
            kept.append(term)
            scored += df
        if scored > self.budget and len(frequencies) > 1:
            rows = self._run(db, " AND ".join(_quoted(t) for _, t in frequencies), n)
            if rows:
                return rows
        return self._run(db, " OR ".join(_quoted(t) for t in kept), n)

    def doc_freq(self, db: sqlite3.Connection, generation: int, term: str) -> int:
        """Passages holding ``term`` (as FTS5 tokenises and stems it)."""
        with self._lock:
            if generation != self._generation or len(self._df) > _CACHE_LIMIT:
                self._df.clear()
                self._generation = generation
            cached = self._df.get(term)
        if cached is not None:
            return cached
        df = db.execute("SELECT count(*) FROM passages_fts WHERE passages_fts MATCH ?", (_quoted(term),)).fetchone()[0]
        with self._lock:
            if generation == self._generation:
                self._df[term] = df
        return df

    @staticmethod
    def _run(db: sqlite3.Connection, expression: str, n: int) -> list[int]:
        rows = db.execute(
            f"SELECT rowid FROM passages_fts WHERE passages_fts MATCH ? ORDER BY {_BM25} LIMIT ?", (expression, n)
        )
        return [r[0] for r in rows]
