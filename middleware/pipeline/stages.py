"""The per-sentence stages the checker runs, each timed into ``middleware.metrics``:
``claims`` (check-worthiness + decontextualisation + slot parse), ``questions`` (CQGen)
and ``verify`` (``prepare``, in ``FactChecker``, is a check's wait for its request's one-time
reading of the user's question, when that is not done yet). Spans produced on the
decontextualised text are mapped back to the sentence as written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from middleware.metrics import timed
from middleware.pipeline.checkworthy import Worthiness, assess
from middleware.pipeline.cqgen import QuestionGenerator
from middleware.pipeline.decontext import Decontextualised, Decontextualiser, UserQuestion
from middleware.pipeline.slots import Analysis, analyse, analyse_async
from middleware.pipeline.verifiers import DetailedVerdict, Verifier
from middleware.types import CheckContext, Passage, Question


@dataclass(frozen=True)
class Claim:
    """A sentence ready to check: its check-worthiness, its standalone rewrite."""

    sentence: str
    worthiness: Worthiness
    decontext: Decontextualised

    @property
    def text(self) -> str:
        """The standalone text questions and verification use."""
        return self.decontext.text

    @property
    def analysis(self) -> Analysis:
        return analyse(self.text)

    def as_written(self) -> Claim:
        """The sentence itself as the claim, not its standalone rewrite."""
        return Claim(self.sentence, self.worthiness, Decontextualised(self.sentence, self.sentence))


async def prepare_claim(
    sentence: str,
    context: CheckContext,
    decontextualiser: Decontextualiser,
    timings: dict[str, float] | None = None,
    question: UserQuestion | None = None,
    documents: bool = False,
) -> Claim:
    """Stage 'claims'. A sentence that is not check-worthy is not rewritten. ``question``: the
    user's question as the request prepared it once (default: ``context.user_message``, read
    here); ``documents``: the request brings its own (instructions and judgements are checked
    against them, ``Worthiness.given_documents``)."""
    with timed("claims", timings):
        worthiness = assess(sentence)
        if documents:
            worthiness = worthiness.given_documents()
        if not worthiness.checkworthy:
            return Claim(sentence, worthiness, Decontextualised(sentence, sentence))
        asked = question if question is not None else context.user_message
        rewritten = await decontextualiser.decontextualise(sentence, context.previous, asked)
        await analyse_async([rewritten.text])  # parse once here, off the event loop; later stages hit the cache
        return Claim(sentence, worthiness, rewritten)


async def generate_questions(
    generator: QuestionGenerator,
    claim: Claim,
    context: str | None = None,
    timings: dict[str, float] | None = None,
) -> list[Question]:
    """Stage 'questions'; question spans are in the sentence's own offsets."""
    with timed("questions", timings):
        questions = await generator.generate(claim.text, context)
    return [
        q.model_copy(update={"span": claim.decontext.to_original(q.span)}) if q.span is not None else q
        for q in questions
    ]


async def verify_claim(
    verifier: Verifier,
    claim: Claim | str,
    evidence: Sequence[Passage],
    context: str | None = None,
    timings: dict[str, float] | None = None,
) -> DetailedVerdict:
    """Stage 'verify'; the verdict's claim spans are in the sentence's own offsets."""
    text = claim.text if isinstance(claim, Claim) else claim
    with timed("verify", timings):
        verdict = await verifier.verify(text, list(evidence), context)
    return map_to_sentence(verdict, claim.decontext) if isinstance(claim, Claim) else verdict


def map_to_sentence(verdict: DetailedVerdict, decontext: Decontextualised) -> DetailedVerdict:
    """Re-express a verdict found on the rewritten text in the original sentence's offsets."""
    if not decontext.replacements:
        return verdict
    original = decontext.original
    mismatches = []
    for m in verdict.mismatches:
        span = decontext.to_original(m.span)
        mismatches.append(m.model_copy(update={"span": span, "text": original[span[0] : span[1]]}))
    return verdict.model_copy(
        update={
            "span": decontext.to_original(verdict.span) if verdict.span else None,
            "mismatches": mismatches,
            "unsupported": [decontext.to_original(s) for s in verdict.unsupported],
        }
    )
