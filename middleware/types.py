"""The engine's shared types: what a check produces and consumes (sentences, passages,
verdicts, edits, reports, summaries, the request's check context), as pydantic models.

The reports and summaries go out on the wire as they are, inside the endpoint families' own
envelopes, which each family's ``protocol`` module defines (``middleware.chat.protocol``,
``middleware.responses.protocol``, ``middleware.messages.protocol``; the error format is
``middleware.errors``). Offsets are character offsets (Python ``str`` indices) into the full
assistant message unless a field says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints



class Mode(str, Enum):
    """Stream mode, chosen per request (body ``factcheck.mode`` or ``X-Factcheck-Mode``)."""

    OFF = "off"
    ANNOTATE = "annotate"
    CORRECT = "correct"
    BLOCK = "block"


VerdictLabel = Literal["attributable", "contradictory", "extrapolatory", "skipped", "unverified"]
"""Per-sentence verdict. The first three come from a verifier; ``skipped`` means the
sentence is not check-worthy; ``unverified`` means the check timed out or failed."""

NLI_LABELS: tuple[str, str, str] = ("attributable", "extrapolatory", "contradictory")
"""The three verifier labels, in the order used by ``Verdict.scores`` and ``factcheck verify``."""

NLI_HEAD_LABELS: tuple[str, str, str] = ("entailment", "neutral", "contradiction")
"""Output order of the project's NLI head (``onnx_models/verifier``, trained by
``middleware.training``): position i is the model's evidence for ``NLI_LABELS[i]``."""

NLI_LABEL_ALIASES: dict[str, str] = {
    "entailment": "attributable", "entails": "attributable", "entail": "attributable",
    "supports": "attributable", "supported": "attributable", "attributable": "attributable",
    "neutral": "extrapolatory", "not enough info": "extrapolatory", "nei": "extrapolatory",
    "not_enough_info": "extrapolatory", "extrapolatory": "extrapolatory", "not_entailment": "extrapolatory",
    "non-entailment": "extrapolatory", "unverifiable": "extrapolatory",
    "partially_supported": "extrapolatory", "not_supported": "extrapolatory",
    "contradiction": "contradictory", "contradicts": "contradictory", "refutes": "contradictory",
    "refuted": "contradictory", "contradictory": "contradictory",
}  # fmt: skip
"""Every label name a model or data set uses (lower case) -> its verifier label in NLI_LABELS
(AttrScore's mapping; WiCE's partially/not supported count as extrapolatory)."""
assert tuple(NLI_LABEL_ALIASES[name] for name in NLI_HEAD_LABELS) == NLI_LABELS

TagType = Literal["entity", "relation", "contradictory", "invented", "subjective", "unverifiable"]
"""FAVA hallucination types (Mishra et al., 2024)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SegmentKind(str, Enum):
    """What a span of the streamed message is. Only ``SENTENCE`` is ever checked."""

    SENTENCE = "sentence"
    HEADING = "heading"
    CODE = "code"
    TABLE = "table"
    SPACE = "space"


class Segment(_Model):
    """A contiguous span of the message. Segments emitted for one message tile it exactly:
    concatenating their ``text`` gives the message back, byte for byte."""

    index: int = Field(description="0-based position among all segments of the message")
    start: int
    end: int
    text: str
    kind: SegmentKind
    code_spans: list[tuple[int, int]] = Field(
        default_factory=list, description="inline code spans (message offsets); never checked"
    )

    @property
    def checkable(self) -> bool:
        return self.kind is SegmentKind.SENTENCE and bool(self.text.strip())


class Sentence(_Model):
    """A sentence handed to the checker; ``index`` counts sentences only."""

    index: int
    start: int
    end: int
    text: str
    code_spans: list[tuple[int, int]] = Field(default_factory=list)


class Passage(_Model):
    """A piece of evidence: an index passage, a web snippet or a span of the request."""

    id: str = Field(description="stable id, unique within its provider")
    text: str
    provider: str = Field(description="'index', 'context', 'wikipedia', 'searxng', ...")
    source: str = Field(description="file path, URL, or request location such as 'messages[0]'")
    title: str | None = None
    url: str | None = None
    start: int | None = Field(default=None, description="offset of the passage in its source")
    end: int | None = None
    score: float = 0.0


class Question(_Model):
    """A verification question (CQGen): one per checkable aspect of the claim."""

    text: str
    slot: str | None = Field(default=None, description="the claim span the question asks about")
    slot_type: str | None = Field(default=None, description="entity, number, date, quantity, relation")
    span: tuple[int, int] | None = Field(default=None, description="slot offsets in the sentence")


class RuleFinding(_Model):
    """A named rule of the verifier that fired on this claim (``pipeline.rules.disabled``
    switches rules off by these names)."""

    name: str
    span: tuple[int, int] | None = Field(default=None, description="claim span the rule is about")
    detail: str | None = None


class Verdict(_Model):
    label: VerdictLabel
    scores: dict[str, float] = Field(default_factory=dict, description="label -> probability")
    evidence_id: str | None = Field(default=None, description="passage that decided the verdict")
    evidence_sentence: str | None = Field(default=None, description="the deciding evidence sentence")
    span: tuple[int, int] | None = Field(default=None, description="claim span involved (sentence offsets)")
    reason: str | None = Field(default=None, description="why, esp. for skipped/unverified")
    backend: str | None = None
    rules: list[RuleFinding] = Field(default_factory=list, description="the verifier's rules that fired")


class Tag(_Model):
    """A FAVA tag over a span of the message, with the suggested replacement where known."""

    type: TagType
    start: int
    end: int
    text: str
    replacement: str | None = None
    evidence_id: str | None = None


class Edit(_Model):
    """One change to the message (correct mode) or a suggested change (annotate mode)."""

    start: int
    end: int
    original: str
    replacement: str
    tag: TagType | None = None
    evidence_id: str | None = None
    evidence: str | None = Field(default=None, description="the evidence text that grounds the edit")


class Revision(_Model):
    """What correct mode decided for a contradicted sentence: an edit is applied only when
    the one evidence sentence it comes from contradicts the original and entails the edited
    sentence, and the edit does not contradict what the answer already said; otherwise the
    sentence is flagged and left as written."""

    status: Literal["applied", "flagged"]
    reason: str = Field(description="why the edit was or was not made")
    rule: str | None = Field(
        default=None,
        description="the edit gate rule that refused the edit (pipeline.rules.gate_disabled switches it off by "
        "this name; docs/verdicts.md lists them)",
    )
    suggested: str | None = Field(default=None, description="the edited sentence the editor proposed")
    evidence_id: str | None = None
    evidence_sentence: str | None = Field(default=None, description="the one evidence sentence the edit comes from")
    scores: dict[str, float] = Field(
        default_factory=dict,
        description="evidence_contradicts_original, evidence_entails_edited, context_contradicts_edited (NLI)",
    )


GroundingPlacement = Literal["append", "system"]
"""Where the grounding instruction goes: appended to the last user message (the paper's form)
or as a system message of its own."""

GroundingCorpus = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[^\r\n]*$")
]
"""A corpus name for the grounding instruction ("Wikipedia"): one line; ``off`` names none."""


class GroundingPrompt(_Model):
    """The according-to instruction the proxy added to the request (Weller, Marone et al., 2024)."""

    corpus: str
    instruction: str = Field(description="the sentence added, in the paper's form")
    placement: GroundingPlacement = Field(
        description="appended to the last user message, or a system message of its own"
    )


class MemorySignal(_Model):
    """Memory-hallucination margin signal: never a verdict by itself."""

    flagged: bool
    closed_book_similarity: float
    context_similarity: float
    margin: float


class SentenceReport(_Model):
    """Everything the checker found about one sentence."""

    index: int
    start: int
    end: int
    text: str
    verdict: Verdict
    tags: list[Tag] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    evidence: list[Passage] = Field(default_factory=list)
    edits: list[Edit] = Field(default_factory=list, description="suggested (annotate) or applied (correct)")
    corrected_text: str | None = Field(default=None, description="sentence after edits, if any")
    revision: Revision | None = Field(default=None, description="correct mode: the edit decision for this sentence")
    quip: float | None = Field(default=None, description="QUIP-Score against the local corpus")
    memory: MemorySignal | None = None
    fava: str | None = Field(default=None, description="FAVA markup of the sentence")
    timings_ms: dict[str, float] = Field(default_factory=dict, description="stage -> milliseconds")


class AttributionLink(_Model):
    """What one passage of the attribution report does for the message: the sentences whose
    verdict it decided, supporting or contradicting them."""

    passage_id: str = Field(description="the passage's id (its provider's)")
    provider: str
    supports: list[int] = Field(default_factory=list, description="indices of the sentences it supports")
    contradicts: list[int] = Field(default_factory=list, description="indices of the sentences it contradicts")


class StreamSummary(_Model):
    """Sent once per message, before ``[DONE]`` (or in the non-stream response)."""

    sentences: int
    verdicts: dict[str, int]
    attribution_report: list[Passage] = Field(
        default_factory=list,
        description="<= 5 snippets (RARR), each supporting or contradicting at least one sentence, in the order of "
        "the first sentence each decides",
    )
    attribution_links: list[AttributionLink] = Field(
        default_factory=list, description="one per attribution_report passage, in its order: the sentences it "
        "supports and contradicts",
    )
    alignment: dict[int, list[str]] = Field(
        default_factory=dict, description="sentence index -> ids of report passages supporting it"
    )
    attr_auto: float | None = None
    edits: list[Edit] = Field(default_factory=list)
    mode: Mode
    added_latency_ms: float | None = None
    grounding_prompt: GroundingPrompt | None = Field(
        default=None, description="the grounding instruction added to the request (factcheck.grounding_prompt), if any"
    )

    @classmethod
    def of_reports(cls, reports: Sequence[SentenceReport], mode: Mode, **fields: Any) -> StreamSummary:
        """The summary of ``reports``: the sentence count, the count of each verdict label (in
        the order first seen) and, in correct mode, every edit; ``fields`` adds the rest (the
        pipeline's attribution report)."""
        verdicts: dict[str, int] = {}
        for report in reports:
            verdicts[report.verdict.label] = verdicts.get(report.verdict.label, 0) + 1
        edits = [edit for report in reports for edit in report.edits] if mode is Mode.CORRECT else []
        return cls(sentences=len(reports), verdicts=verdicts, edits=edits, mode=mode, **fields)


class CheckContext(_Model):
    """What the checker may use besides the sentence itself: plain data, the same in a check
    worker process as in the relay (what the request's checks share at run time is the
    ``middleware.checking.CheckSession``'s)."""

    previous: list[str] = Field(default_factory=list, description="earlier sentences of this message")
    user_message: str | None = None
    request_passages: list[Passage] = Field(
        default_factory=list, description="passages taken from the request (RAG context)"
    )
    mode: Mode = Mode.ANNOTATE
    options: dict[str, object] = Field(default_factory=dict, description="per-request factcheck options")
    grounding_prompt: GroundingPrompt | None = Field(
        default=None, description="the grounding instruction added to the request, reported in the summary"
    )
