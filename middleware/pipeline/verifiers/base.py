"""The verifier interface and its result.

Every backend returns a ``DetailedVerdict``: a ``middleware.types.Verdict`` (so it goes on
the wire unchanged: pydantic serialises it by the declared ``Verdict`` schema) that also
carries what the tagging and editing stages need: the index of the deciding passage, the
deciding sentence's offsets in it, and the slot mismatches with the evidence's replacement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from middleware.types import NLI_LABEL_ALIASES, NLI_LABELS, Passage, Verdict

MismatchKind = Literal["entity", "number", "quantity", "date", "negation", "relation", "role"]


class Mismatch(BaseModel):
    """A claim slot that a well-aligned evidence sentence states differently."""

    model_config = ConfigDict(extra="forbid")

    kind: MismatchKind
    span: tuple[int, int] = Field(description="claim span (claim offsets)")
    text: str = Field(description="the claim's text of the slot")
    replacement: str | None = Field(
        description="the evidence's text for the same slot (None: delete/unknown)"
    )
    evidence_index: int = Field(description="index of the passage in the evidence list")
    evidence_span: tuple[int, int] | None = Field(
        default=None, description="replacement offsets in the passage"
    )
    rule: str = Field(default="", description="the verifier rule that found it (``RULES``)")

    @property
    def tag(self) -> Literal["entity", "relation"]:
        """FAVA type: wrong entities, numbers and dates are entity errors; a wrong verb,
        preposition, negation or a participant in the wrong role is a relation error."""
        return "relation" if self.kind in ("negation", "relation", "role") else "entity"


class DetailedVerdict(Verdict):
    """A verifier's verdict plus the details downstream stages use (not sent on the wire)."""

    evidence_index: int | None = Field(default=None, description="index of the deciding passage")
    evidence_span: tuple[int, int] | None = Field(
        default=None, description="deciding sentence in that passage"
    )
    mismatches: list[Mismatch] = Field(default_factory=list)
    unsupported: list[tuple[int, int]] = Field(
        default_factory=list, description="claim slots no aligned evidence mentions (claim offsets)"
    )
    gaps: list[Literal["relation", "polarity", "coverage"]] = Field(
        default_factory=list,
        description="why the slots verifier found no support besides unsupported slots: the verb or its "
        "objects missing, a negation/exclusivity word on one side only, too few of the claim's words",
    )

    @property
    def replacement(self) -> str | None:
        """The primary mismatch's suggested replacement, if any."""
        return self.mismatches[0].replacement if self.mismatches else None


@runtime_checkable
class Verifier(Protocol):
    """Judges one claim against evidence passages: attributable, extrapolatory or
    contradictory. ``context`` is text the claim depends on (earlier sentences, the
    user's question); claims should be decontextualised before, so most backends ignore it."""

    name: str

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict: ...


def to_verdict_label(name: str) -> str:
    """Map a model's or dataset's label name to one of NLI_LABELS (AttrScore mapping)."""
    key = name.strip().lower()
    label = (
        NLI_LABEL_ALIASES.get(key)
        or NLI_LABEL_ALIASES.get(key.replace("_", " "))
        or NLI_LABEL_ALIASES.get(key.replace(" ", "_"))
    )
    if label is None:
        raise ValueError(f"unknown verifier label {name!r}; expected one of {sorted(set(NLI_LABEL_ALIASES))}")
    return label


def scores_for(label: str, confidence: float, lean: float = 0.5) -> dict[str, float]:
    """A distribution over NLI_LABELS with ``confidence`` on ``label`` and the rest split
    between the two others, ``lean`` of it to the first of them in NLI_LABELS order."""
    confidence = min(max(confidence, 1 / 3), 1.0)
    others = [name for name in NLI_LABELS if name != label]
    rest = 1.0 - confidence
    return ordered({label: confidence, others[0]: rest * lean, others[1]: rest * (1 - lean)})


def ordered(scores: dict[str, float]) -> dict[str, float]:
    """Scores in NLI_LABELS order, normalised to sum to 1."""
    total = sum(scores.get(name, 0.0) for name in NLI_LABELS) or 1.0
    return {name: float(scores.get(name, 0.0)) / total for name in NLI_LABELS}


def passages_from_texts(texts: Sequence[str], provider: str = "input") -> list[Passage]:
    """Evidence given as plain strings (``factcheck verify``): ids are the list indices."""
    return [
        Passage(id=str(i), text=t, provider=provider, source=f"evidence[{i}]") for i, t in enumerate(texts)
    ]


def first_given(*values: float | None) -> float:
    """The first value that is not None: an explicit setting, else a model's calibrated one,
    else the default."""
    return next(float(v) for v in values if v is not None)
