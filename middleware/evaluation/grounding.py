"""``factcheck eval-grounding``: does according-to prompting make an upstream quote the trusted
corpus more? Each question goes to the upstream three times (no instruction, the grounding
instruction, the paper's anti-grounding control), each answer is checked through the same
checked stream as a proxied answer, and per variant come out the mean QUIP-Score, the verdict
mix and the mean answer length.

An answer's QUIP-Score is the mean of its sentences' ``quip`` weighted by their 25-gram counts:
the fraction of the answer's n-grams found in the corpus portrait, except the n-grams that span
two sentences and the sentences the checker scored none for (not check-worthy, timed out, or
no local index). An answer with no scored sentence has no QUIP and is left out of the mean.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from middleware.chat.checked_stream import check_answer
from middleware.chat.chunks import message_content
from middleware.chat.grounding_prompt import anti_grounding_instruction, grounding_instruction, with_instruction
from middleware.checking import CheckRunner
from middleware.errors import UpstreamError
from middleware.evidence.portrait import NGRAM, normalise
from middleware.interfaces import Upstream
from middleware.types import CheckContext, GroundingPlacement, Mode, SentenceReport

Variant = Literal["none", "grounding", "anti_grounding"]
VARIANTS: tuple[Variant, ...] = ("none", "grounding", "anti_grounding")


def parse_questions(text: str) -> list[str]:
    """One question per line, or JSON lines with a ``question`` field; blank lines skipped."""
    questions = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                question = json.loads(line).get("question")
            except (ValueError, AttributeError) as exc:
                raise ValueError(f"line {number}: not a JSON object: {exc}") from exc
            if not isinstance(question, str) or not question.strip():
                raise ValueError(f"line {number}: no 'question' string")
            line = question.strip()
        questions.append(line)
    return questions


def instruction_for(variant: Variant, corpus: str) -> str | None:
    if variant == "grounding":
        return grounding_instruction(corpus)
    if variant == "anti_grounding":
        return anti_grounding_instruction(corpus)
    return None


def variant_body(
    question: str, instruction: str | None, placement: GroundingPlacement, model: str | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """The non-stream chat completions body asking ``question``, with ``instruction`` placed as
    the proxy places it (``grounding_prompt.with_instruction``)."""
    body: dict[str, Any] = {"messages": [{"role": "user", "content": question}], "stream": False}
    if model is not None:
        body["model"] = model
    if temperature is not None:
        body["temperature"] = temperature
    return with_instruction(body, instruction, placement)[0] if instruction is not None else body


def answer_quip(reports: Sequence[SentenceReport]) -> float | None:
    """The answer's QUIP-Score from its sentences' (see the module docstring)."""
    weighted = total = 0.0
    for report in reports:
        if report.quip is None:
            continue
        grams = max(len(normalise(report.text)) - NGRAM + 1, 0)
        weighted += report.quip * grams
        total += grams
    return weighted / total if total else None


@dataclass(slots=True)
class VariantAnswer:
    question: str
    variant: Variant
    text: str | None = None
    quip: float | None = None
    verdicts: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class GroundingEval:
    corpus: str
    placement: GroundingPlacement
    answers: list[VariantAnswer] = field(default_factory=list)

    @property
    def questions(self) -> int:
        return len({a.question for a in self.answers})

    def variant(self, variant: Variant) -> dict[str, Any]:
        """One variant's figures: answers, failures, mean QUIP (over the answers that have
        one), the verdict counts over every sentence, and the mean answer length in characters."""
        answered = [a for a in self.answers if a.variant == variant and a.text is not None]
        quips = [a.quip for a in answered if a.quip is not None]
        verdicts: dict[str, int] = {}
        for answer in answered:
            for label, count in answer.verdicts.items():
                verdicts[label] = verdicts.get(label, 0) + count
        return {
            "instruction": instruction_for(variant, self.corpus),
            "answers": len(answered),
            "failed": sum(1 for a in self.answers if a.variant == variant and a.text is None),
            "quip": sum(quips) / len(quips) if quips else None,
            "quip_answers": len(quips),
            "verdicts": dict(sorted(verdicts.items())),
            "mean_chars": sum(len(a.text or "") for a in answered) / len(answered) if answered else None,
        }

    def as_dict(self) -> dict[str, Any]:
        return {"corpus": self.corpus, "placement": self.placement,
                "questions": self.questions,
                "variants": {v: self.variant(v) for v in VARIANTS},
                "answers": [asdict(a) for a in self.answers]}


async def eval_grounding(
    questions: Sequence[str], upstream: Upstream, runner: CheckRunner, corpus: str,
    placement: GroundingPlacement = "append", model: str | None = None, temperature: float | None = None,
) -> GroundingEval:
    """Ask every question in every variant (one at a time) and check each answer (annotate mode,
    the question as the user's message). An upstream failure is counted, not fatal."""
    result = GroundingEval(corpus, placement)
    for question in questions:
        for variant in VARIANTS:
            body = variant_body(question, instruction_for(variant, corpus), placement, model, temperature)
            result.answers.append(await _answer(upstream, runner, question, variant, body))
    return result


async def _answer(
    upstream: Upstream, runner: CheckRunner, question: str, variant: Variant, body: dict[str, Any]
) -> VariantAnswer:
    try:
        _, completion = await upstream.complete(body, {})
    except UpstreamError as exc:
        return VariantAnswer(question, variant, error=str(exc))
    if (text := message_content(completion)) is None:
        return VariantAnswer(question, variant, error="the completion has no text content")
    checked = await check_answer(runner, text, CheckContext(user_message=question, mode=Mode.ANNOTATE))
    verdicts = checked.summary.verdicts if checked.summary is not None else {}
    return VariantAnswer(question, variant, text, answer_quip(checked.reports), dict(verdicts))
