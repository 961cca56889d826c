"""The LLM verifier: AttrScore-style judging (Yue et al., 2023) through any OpenAI-compatible
endpoint, one reference per call (as AttrScore), for the few passages that align best with
the claim. Evidence and claim are fenced as untrusted data; only the first line of the
answer can set the label."""

from __future__ import annotations

import asyncio
import logging

from middleware.evidence.lexical import BM25, terms
from middleware.pipeline.prompts import ChatModel, attrscore_messages, parse_attrscore
from middleware.pipeline.verifiers.base import DetailedVerdict, ordered
from middleware.types import NLI_LABELS, Passage

log = logging.getLogger(__name__)


class LLMVerifier:
    name = "llm"

    def __init__(
        self, chat: ChatModel, *, samples: int = 1, temperature: float = 0.0, max_passages: int = 3
    ) -> None:
        self.chat = chat
        self.samples = samples
        self.temperature = temperature
        self.max_passages = max_passages

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict:
        if not evidence:
            return DetailedVerdict(
                label="extrapolatory", scores={"attributable": 0.0, "extrapolatory": 1.0, "contradictory": 0.0},
                reason="no evidence", backend=self.name,
            )  # fmt: skip
        recall = BM25([terms(p.text) for p in evidence]).recall(terms(claim))
        chosen = sorted(range(len(evidence)), key=lambda i: recall[i], reverse=True)[: self.max_passages]
        judged = await asyncio.gather(*(self._judge(claim, evidence[i].text) for i in chosen))
        valid = [(i, votes, reason) for i, (votes, reason) in zip(chosen, judged, strict=True) if votes]
        if not valid:
            return DetailedVerdict(
                label="unverified", reason="the LLM gave no parsable label", backend=self.name
            )
        for label in ("attributable", "contradictory"):
            index, votes, reason = max(valid, key=lambda item: item[1].get(label, 0.0))
            if votes.get(label, 0.0) > 0.5:
                return self._verdict(label, claim, evidence, index, votes, reason)
        index, votes, reason = valid[0]
        return self._verdict("extrapolatory", claim, evidence, index, votes, reason)

    async def _judge(self, claim: str, reference: str) -> tuple[dict[str, float], str | None]:
        """Vote shares over NLI_LABELS from ``samples`` completions, and the first reason."""
        temperature = self.temperature if self.samples == 1 else max(self.temperature, 0.7)
        completions = await self.chat.complete(
            attrscore_messages(claim, reference), n=self.samples, temperature=temperature
        )
        parsed = [p for p in (parse_attrscore(c) for c in completions) if p is not None]
        if len(parsed) < len(completions):
            log.warning(
                "llm verifier: %d of %d answers had no label line",
                len(completions) - len(parsed),
                len(completions),
            )
        if not parsed:
            return {}, None
        votes = {name: sum(1 for label, _ in parsed if label == name) / len(parsed) for name in NLI_LABELS}
        return votes, parsed[0][1]

    def _verdict(
        self,
        label: str,
        claim: str,
        evidence: list[Passage],
        index: int,
        votes: dict[str, float],
        reason: str | None,
    ) -> DetailedVerdict:
        stripped = claim.rstrip()
        smoothed = ordered({k: v + 0.01 for k, v in votes.items()})
        return DetailedVerdict(
            label=label,  # type: ignore[arg-type]
            scores=smoothed,
            evidence_id=evidence[index].id,
            evidence_sentence=evidence[index].text,
            span=(len(stripped) - len(stripped.lstrip()), len(stripped))
            if label != "extrapolatory"
            else None,
            reason=reason,
            backend=self.name,
            evidence_index=index,
            evidence_span=(0, len(evidence[index].text)),
        )
