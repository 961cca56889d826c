"""The RARR editor through any OpenAI-compatible endpoint: for each evidence snippet in turn
(most relevant first, one snippet per call), the agreement gate decides whether the current
text and the snippet disagree; only then the edit prompt names the span to change and its
replacement, which is applied to the current text if the span occurs in it and the change
passes the RARR guard (relative to the current text, as in RARR's loop)."""

from __future__ import annotations

import logging

from middleware.pipeline.prompts import ChatModel
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.pipeline.editing import EditResult, ranked_evidence
from middleware.revise.edits import EditBuffer, classify
from middleware.revise.guards import EditGuard
from middleware.revise.prompts import agreement_messages, edit_messages, parse_agreement, parse_edit
from middleware.types import Passage, Verdict

log = logging.getLogger(__name__)


class LLMEditor:
    name = "llm"

    def __init__(
        self,
        chat: ChatModel,
        *,
        guard: EditGuard | None = None,
        max_evidence: int = 3,
        max_chars: int = 1500,
        max_tokens: int = 200,
    ) -> None:
        self.chat = chat
        self.guard = guard or EditGuard()
        self.max_evidence = max_evidence
        self.max_chars = max_chars
        self.max_tokens = max_tokens

    async def edit(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None = None,
    ) -> EditResult:
        buffer = EditBuffer(sentence)
        reasons: list[str] = []
        for index in ranked_evidence(sentence, verdict, evidence, self.max_evidence):
            snippet = evidence[index].text[: self.max_chars]
            try:
                reason = await self._revise(buffer, snippet, index, evidence[index], context)
            except Exception as exc:  # the endpoint failed: keep what is done so far
                log.warning("llm editor failed: %s", type(exc).__name__)  # the text may echo secrets
                reasons.append(f"llm error: {type(exc).__name__}")
                break
            if reason:
                reasons.append(reason)
        return buffer.result(self.name, "; ".join(dict.fromkeys(reasons)) or "no edit")

    async def _revise(
        self, buffer: EditBuffer, snippet: str, index: int, passage: Passage, context: str | None
    ) -> str | None:
        """One RARR step with one snippet; returns why nothing changed, if so."""
        current = buffer.text
        [answer] = await self.chat.complete(agreement_messages(current, snippet, context), n=1, temperature=0.0,
                                            max_tokens=self.max_tokens)  # fmt: skip
        agreement = parse_agreement(answer)
        if agreement != "disagree":
            return "the evidence agrees" if agreement == "agree" else None
        [answer] = await self.chat.complete(edit_messages(current, snippet, context), n=1, temperature=0.0,
                                            max_tokens=self.max_tokens)  # fmt: skip
        proposal = parse_edit(answer)
        if proposal is None:
            return "no parsable edit"
        span, replacement = proposal
        start = _find(current, span)
        if start is None or not span:
            return f"the edit names a span not in the text: {span!r}"
        end = start + len(span)
        candidate = current[:start] + replacement + current[end:]
        if (reason := self.guard.check(current, candidate)) is not None:
            return reason
        buffer.replace(
            start, end, replacement, tag=classify(current, start, end, replacement), evidence_index=index,
            evidence_id=passage.id, evidence=snippet,
        )  # fmt: skip
        return None

def _find(text: str, span: str) -> int | None:
    """Where ``span`` occurs in ``text``: exactly, else ignoring case."""
    at = text.find(span)
    if at < 0:
        at = text.lower().find(span.lower())
    return at if at >= 0 else None
