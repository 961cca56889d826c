"""Edits against a fixed original: applying changes step by step in the current text's
coordinates while keeping them expressed in the original's (``EditBuffer``), recovering
edits from an edited string (``diff_edits``), and naming an edit's FAVA type (``classify``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from middleware.pipeline.editing import EditResult
from middleware.pipeline.slots import analyse
from middleware.types import Edit, TagType, Verdict

_TOKEN = re.compile(r"\w+(?:[.,'’-]\w+)*|\s+|[^\w\s]")
_ENTITY_POS = frozenset({"NOUN", "PROPN", "NUM"})


@dataclass(frozen=True)
class Change:
    """One edit in original offsets, with where it came from."""

    start: int
    end: int
    replacement: str
    tag: TagType | None = None
    evidence_index: int | None = None
    evidence_id: str | None = None
    evidence: str | None = None


class EditBuffer:
    """The original text plus non-overlapping changes. ``replace`` takes offsets in the
    *current* text; a change that touches an earlier one is merged with it, and a change
    that restores the original text disappears."""

    def __init__(self, original: str) -> None:
        self.original = original
        self._changes: list[Change] = []

    @property
    def text(self) -> str:
        out, at = [], 0
        for change in self._changes:
            out += [self.original[at : change.start], change.replacement]
            at = change.end
        return "".join(out) + self.original[at:]

    @property
    def changes(self) -> list[Change]:
        return list(self._changes)

    def replace(self, start: int, end: int, replacement: str, **source: object) -> None:
        """Replace ``current[start:end]``; ``source`` fills the Change's tag/evidence fields."""
        current = self.text
        if not 0 <= start <= end <= len(current):
            raise ValueError(f"span {start}:{end} outside the current text (length {len(current)})")
        regions = self._regions()
        hit = [(cs, ce, ch) for cs, ce, ch in regions if cs <= end and start <= ce]
        cur_start = min([start, *(cs for cs, _, _ in hit)])
        cur_end = max([end, *(ce for _, ce, _ in hit)])
        orig_start, orig_end = self._to_original(cur_start, regions), self._to_original(cur_end, regions)
        merged = current[cur_start:start] + replacement + current[end:cur_end]
        kept = [ch for ch in self._changes if all(ch is not h for _, _, h in hit)]
        if merged != self.original[orig_start:orig_end]:
            kept.append(Change(orig_start, orig_end, merged, **source))  # type: ignore[arg-type]
        self._changes = sorted(kept, key=lambda c: (c.start, c.end))

    def edits(self) -> list[Edit]:
        """The changes as wire ``Edit``s (original offsets)."""
        return [to_edit(self.original, ch) for ch in self._changes]

    def result(self, backend: str, reason: str, verdict: Verdict | None = None) -> EditResult:
        """An editor's result: the buffer's edits, typed and grounded by its first change;
        unchanged with ``reason`` if there is none."""
        if not self.changes:
            return EditResult.unchanged(self.original, reason, backend)
        first = self.changes[0]
        return EditResult(
            original=self.original, text=self.text, edits=self.edits(), tag=first.tag,
            evidence_index=first.evidence_index, evidence_id=first.evidence_id, backend=backend, verdict=verdict,
        )  # fmt: skip

    def _regions(self) -> list[tuple[int, int, Change]]:
        """Each change's span in the current text."""
        out, shift = [], 0
        for ch in self._changes:
            start = ch.start + shift
            out.append((start, start + len(ch.replacement), ch))
            shift += len(ch.replacement) - (ch.end - ch.start)
        return out

    @staticmethod
    def _to_original(position: int, regions: list[tuple[int, int, Change]]) -> int:
        """A current-text position that is not strictly inside a change -> original offset."""
        shift = sum(len(ch.replacement) - (ch.end - ch.start) for _, ce, ch in regions if ce <= position)
        return position - shift


def to_edit(original: str, change: Change) -> Edit:
    return Edit(
        start=change.start,
        end=change.end,
        original=original[change.start : change.end],
        replacement=change.replacement,
        tag=change.tag,
        evidence_id=change.evidence_id,
        evidence=change.evidence,
    )


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` (offsets in ``text``) applied."""
    out, at = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < at:
            raise ValueError(f"overlapping edits at {edit.start}")
        out += [text[at : edit.start], edit.replacement]
        at = edit.end
    return "".join(out) + text[at:]


def tokens(text: str) -> list[tuple[int, int]]:
    """Word, whitespace and punctuation tokens as (start, end) offsets."""
    return [m.span() for m in _TOKEN.finditer(text)]


def diff_edits(original: str, edited: str) -> list[Change]:
    """The word-level changes that turn ``original`` into ``edited`` (original offsets).
    Changes separated only by whitespace are merged ('the leader' -> 'a member' is one)."""
    a, b = tokens(original), tokens(edited)
    a_text = [original[s:e].lower() for s, e in a]
    b_text = [edited[s:e].lower() for s, e in b]
    ops = difflib.SequenceMatcher(None, a_text, b_text, autojunk=False).get_opcodes()
    spans: list[tuple[int, int, int, int]] = []  # token ranges i1, i2, j1, j2
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        if spans and _only_space(a_text[spans[-1][1] : i1]) and _only_space(b_text[spans[-1][3] : j1]):
            spans[-1] = (spans[-1][0], i2, spans[-1][2], j2)
        else:
            spans.append((i1, i2, j1, j2))
    out = []
    for i1, i2, j1, j2 in spans:
        start = a[i1][0] if i1 < len(a) else len(original)
        end = a[i2 - 1][1] if i2 > i1 else start
        new = edited[b[j1][0] : b[j2 - 1][1]] if j2 > j1 else ""
        if original[start:end] != new:
            out.append(Change(start, end, new))
    return out


def _only_space(items: Sequence[str]) -> bool:
    return all(not t.strip() for t in items)


def classify(sentence: str, start: int, end: int, replacement: str = "") -> TagType:
    """FAVA type of a change to ``sentence[start:end]``: a changed entity, number or date
    (a slot, or 1-3 nouns) is ``entity``; a changed verb, preposition, adjective or negation
    is ``relation``; rewriting most of the sentence is ``contradictory``."""
    core = len(sentence.strip()) or 1
    if max(end - start, len(replacement)) > 0.6 * core:
        return "contradictory"
    analysis = analyse(sentence)
    if any(s.start < end and start < s.end for s in analysis.slots):
        return "entity"
    words = [t for t in analysis.doc if t.idx < end and start < t.idx + len(t) and not t.is_punct]
    if not words and replacement:
        words = [t for t in analyse(replacement).doc if not t.is_punct]
    content = [t for t in words if not t.is_stop] or words
    if content and len(content) <= 3 and all(t.pos_ in _ENTITY_POS for t in content):
        return "entity"
    return "relation"


def with_tags(sentence: str, changes: Sequence[Change]) -> list[Change]:
    """Changes with a FAVA type filled in where they have none."""
    return [ch if ch.tag else replace(ch, tag=classify(sentence, ch.start, ch.end, ch.replacement)) for ch in changes]
