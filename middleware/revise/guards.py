"""Guards every editor passes through (RARR): an edit may not change more than
``max_distance`` characters (Levenshtein) nor more than ``max_ratio`` of the sentence, and a
sentence is edited only when a verifier found it contradicted or unsupported (never when
attributable, skipped or unverified). A refused edit leaves the original text."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from rapidfuzz.distance import Levenshtein

from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.pipeline.editing import Editor, EditResult
from middleware.revise.gate import EditGate
from middleware.types import Passage, Revision, Verdict

log = logging.getLogger(__name__)

EDITABLE_LABELS = frozenset({"contradictory", "extrapolatory"})


@dataclass(frozen=True)
class EditGuard:
    max_distance: int = 50
    max_ratio: float = 0.5

    def check(self, before: str, after: str) -> str | None:
        """None if the change from ``before`` to ``after`` is allowed, else the reason."""
        distance = Levenshtein.distance(before, after)
        if distance > self.max_distance:
            return f"edit too large: {distance} characters changed (limit {self.max_distance})"
        limit = self.max_ratio * len(before)
        if distance > limit:
            return f"edit too large: {distance} characters changed in a {len(before)}-character sentence"
        return None


def editable(verdict: Verdict) -> str | None:
    """None if a sentence with this verdict may be edited, else why not."""
    if verdict.label in EDITABLE_LABELS:
        return None
    return f"verdict is {verdict.label}: not edited"


class GuardedEditor:
    """Wraps any editor: refuses to edit a sentence whose verdict is not contradictory or
    extrapolatory, replaces an over-large revision by the original text, and (with a
    ``gate``) keeps a revision only when the evidence sentence it comes from contradicts the
    original and entails the edit (``middleware.revise.gate``)."""

    def __init__(self, inner: Editor, guard: EditGuard | None = None, gate: EditGate | None = None) -> None:
        self.inner = inner
        self.guard = guard or EditGuard()
        self.gate = gate
        self.name = inner.name

    async def edit(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None = None,
    ) -> EditResult:
        if (reason := editable(verdict)) is not None:
            return EditResult.unchanged(sentence, reason, self.name)
        if not evidence:
            return EditResult.unchanged(sentence, "no evidence", self.name)
        if self.gate is not None and self.gate.enabled("swapped_roles") and (reason := swapped_roles(verdict)):
            revision = Revision(
                status="flagged", reason=reason, rule="swapped_roles", evidence_id=verdict.evidence_id,
                evidence_sentence=verdict.evidence_sentence,
            )  # fmt: skip
            return EditResult.flagged(sentence, revision, self.name)
        result = await self.inner.edit(sentence, verdict, evidence, context)
        if result.changed and (reason := self.guard.check(sentence, result.text)) is not None:
            log.info("edit refused (%s): %r -> %r", reason, sentence, result.text)
            return EditResult.unchanged(sentence, reason, self.name)
        if self.gate is None or result.revision is not None:  # no gate, or the editor consulted it already
            return result
        revision = await self.gate.review(result, evidence, context)
        if revision.status != "applied":
            return EditResult.flagged(sentence, revision, self.name)
        return replace(result, revision=revision)


def swapped_roles(verdict: DetailedVerdict | Verdict) -> str | None:
    """Participants in each other's roles are flagged, never rewritten: swapping one name
    back leaves the other wrong, and no single value swap fixes who did what (the gate rule
    ``swapped_roles``, applied before the editor runs)."""
    if not isinstance(verdict, DetailedVerdict):
        return None
    roles = [m for m in verdict.mismatches if m.kind == "role"]
    if not roles:
        return None
    return f"the evidence gives {roles[0].text!r} another role: flagged, not rewritten"
