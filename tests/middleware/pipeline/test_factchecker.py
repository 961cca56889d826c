"""The FactChecker end to end over a small local index: verdicts, FAVA tags, suggested
edits in message offsets, decontextualisation, the attribution report, and the proxy."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from middleware.evidence.index import LocalIndex
from middleware.evidence.relevance import RelevanceRanker
from middleware.evidence.source import LocalIndexSource
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.cqgen import SlotQuestionGenerator
from middleware.chat.checked_stream import check_answer
from middleware.checking import CheckRunner, check_sentence
from middleware.pipeline import factchecker as factchecker_module
from middleware.pipeline.decontext import PreparedQuestion, SpacyDecontextualiser, prepare_question
from middleware.pipeline.factchecker import INLINE_QUESTION_CHARS, FactChecker, PipelineParts
from middleware.settings import load_settings
from middleware.pipeline.verifiers import SlotsVerifier
from middleware.types import CheckContext, Mode, Passage, Sentence
from tests.support.evidence_doubles import HashEmbedder
from tests.support.sdk_clients import closed_sdk_clients  # noqa: F401 (autouse)

CORPUS = {
    "curie.md": "# Marie Curie\n\nMarie Curie was born in Warsaw on 7 November 1867. She won the Nobel Prize "
    "in Physics in 1903. She won the Nobel Prize in Chemistry in 1911. She died in 1934.\n",
    "eiffel.md": "# Eiffel Tower\n\nThe Eiffel Tower stands on the Champ de Mars in Paris. It was completed in "
    "March 1889 for the Exposition Universelle.\n",
    "everest.md": "# Mount Everest\n\nMount Everest is 8,849 metres tall. It was first climbed in 1953 by "
    "Edmund Hillary and Tenzing Norgay.\n",
}


@pytest.fixture(scope="module")
def checker(tmp_path_factory) -> FactChecker:
    root: Path = tmp_path_factory.mktemp("corpus")
    for name, text in CORPUS.items():
        (root / name).write_text(text, encoding="utf-8")
    embedder = HashEmbedder()
    index = LocalIndex(tmp_path_factory.mktemp("index"), embedder)
    index.update([root])
    parts = PipelineParts(
        sources=[LocalIndexSource(index)],
        questions=SlotQuestionGenerator(),
        decontext=SpacyDecontextualiser(),
        verifier=SlotsVerifier(Aligner(embedder)),
        ranker=RelevanceRanker(embedder, top_j=2),
        embedder=embedder,
        top_j=2,
    )
    return FactChecker(parts)


def sentence_in(message: str, text: str, index: int = 0) -> Sentence:
    start = message.index(text)
    return Sentence(index=index, start=start, end=start + len(text), text=text)


async def test_wrong_year_is_contradicted_with_an_edit_in_message_offsets(checker):
    message = "Some intro. Marie Curie won the Nobel Prize in Chemistry in 1915."
    sentence = sentence_in(message, "Marie Curie won the Nobel Prize in Chemistry in 1915.")
    report = await check_sentence(checker, sentence, CheckContext())
    assert report.verdict.label == "contradictory"
    assert report.evidence and report.evidence[0].provider == "index"
    tag = next(t for t in report.tags if t.type == "entity")
    assert message[tag.start : tag.end] == "1915" and tag.replacement == "1911"
    assert report.edits[0].original == "1915" and report.edits[0].replacement == "1911"
    assert message[report.edits[0].start : report.edits[0].end] == "1915"
    assert report.corrected_text is None  # annotate mode only suggests
    assert {"claims", "questions", "search", "rerank", "verify"} <= set(report.timings_ms)


async def test_supported_sentence_is_attributable(checker):
    text = "The Eiffel Tower was completed in March 1889."
    report = await check_sentence(checker, Sentence(index=0, start=0, end=len(text), text=text), CheckContext())
    assert report.verdict.label == "attributable"
    assert report.tags == [] and report.edits == []


async def test_pronoun_is_resolved_from_earlier_sentences(checker):
    text = "She was born in Warsaw in 1867."
    context = CheckContext(previous=["Marie Curie was a physicist."])
    report = await check_sentence(checker, Sentence(index=1, start=30, end=30 + len(text), text=text), context)
    assert report.verdict.label == "attributable"


@pytest.mark.parametrize(
    ("text", "reason", "tags"),
    [
        ("Hello there!", "greeting", []),
        ("I hope this helps.", "meta", []),
        ("What else would you like to know?", "question", []),
        ("It is the most beautiful tower in the world.", "subjective", ["subjective"]),
    ],
)
async def test_not_checkworthy_sentences_are_skipped(checker, text, reason, tags):
    report = await check_sentence(checker, Sentence(index=0, start=0, end=len(text), text=text), CheckContext())
    assert report.verdict.label == "skipped" and report.verdict.reason == reason
    assert [t.type for t in report.tags] == tags
    assert report.evidence == []


async def test_request_context_only_policy_searches_nothing_else(checker):
    context_passage = Passage(id="c0", text="The Eiffel Tower was completed in March 1887.", provider="context",
                              source="messages[0] (system)")
    text = "The Eiffel Tower was completed in March 1889."
    context = CheckContext(request_passages=[context_passage], options={"context_policy": "only"})
    report = await check_sentence(checker, Sentence(index=0, start=0, end=len(text), text=text), context)
    assert {p.provider for p in report.evidence} == {"context"}
    assert report.verdict.label == "contradictory"


async def test_the_attribution_report_holds_only_passages_that_decided_a_sentence(checker):
    texts = ["Marie Curie was born in Warsaw on 7 November 1867.", "Mount Everest is 8,849 metres tall.",
             "The Eiffel Tower stands in Paris.", "Marie Curie won the Nobel Prize in Chemistry in 1915."]
    distractor = Passage(id="unix", provider="context", source="messages[0] (system)",
                         text="Unix is an operating system developed at Bell Labs; it is taught in Warsaw and in Paris.")
    context = CheckContext(request_passages=[distractor])  # searched beside the index
    reports = [await check_sentence(checker, Sentence(index=i, start=0, end=len(t), text=t), context)
               for i, t in enumerate(texts)]
    summary = await checker.summarize(reports, Mode.ANNOTATE)
    assert summary.sentences == 4
    assert [r.verdict.label for r in reports] == ["attributable"] * 3 + ["contradictory"]
    sources = {p.id: p.source.rsplit("/", 1)[-1] for p in summary.attribution_report}
    links = {link.passage_id: (link.supports, link.contradicts) for link in summary.attribution_links}
    assert sorted((sources[i], links[i]) for i in links) == [
        ("curie.md", ([0], [3])), ("eiffel.md", ([2], [])), ("everest.md", ([1], []))]
    # the ranker kept the distractor (top 2 per question) for the sentences about Warsaw and Paris: it decided nothing
    assert [i for i, r in enumerate(reports) if "unix" in {p.id for p in r.evidence}] == [0, 2]
    assert "unix" not in sources
    assert summary.alignment == {i: [reports[i].verdict.evidence_id] for i in range(3)}
    assert summary.attr_auto is not None and 0.5 < summary.attr_auto <= 1.0


class Loaded(FactChecker):
    """The pipeline on a loaded machine: every check takes ``delay`` longer."""

    def __init__(self, inner: FactChecker, delay: float) -> None:
        super().__init__(inner.parts)
        self.delay = delay

    async def check(self, sentence, context, request):
        await asyncio.sleep(self.delay)
        return await super().check(sentence, context, request)


async def test_a_non_stream_answer_gets_the_report_a_stream_gets(make_proxy, checker):
    """The sentences of a non-stream answer come at once: they queue for the stream's check
    slots and share the machine. Their budget is the answer's (the per-sentence budget per
    wave of concurrent checks), so they are checked, not 'unverified: timeout', and the
    summary has its attribution report."""
    answer = ("Marie Curie was born in Warsaw on 7 November 1867. Mount Everest is 8,849 metres tall. "
              "The Eiffel Tower stands in Paris. Marie Curie won the Nobel Prize in Chemistry in 1915.")
    proxy = await make_proxy(Loaded(checker, 0.3), **{"check.sentence_budget_s": 1.0, "check.max_checks_per_stream": 1})
    client = AsyncOpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0)
    completion = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell me facts"}], extra_body={"mock": {"text": answer}})
    factcheck = (completion.model_extra or {})["factcheck"]
    labels = [r["verdict"]["label"] for r in factcheck["reports"]]
    assert labels == ["attributable"] * 3 + ["contradictory"]  # four checks in a row: 1.2 s > the 1 s budget
    assert sorted(p["source"] for p in factcheck["summary"]["attribution_report"]) == ["curie.md", "eiffel.md",
                                                                                       "everest.md"]
    assert [link["contradicts"] for link in factcheck["summary"]["attribution_links"] if link["contradicts"]] == [[3]]


async def test_proxy_with_the_pipeline_annotates_a_stream(make_proxy, checker):
    answer = "Great question! Mount Everest is 8,849 metres tall. The Eiffel Tower stands on the Champ de Mars in Rome."
    proxy = await make_proxy(checker, **{"check.sentence_budget_s": 30})
    client = AsyncOpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0)
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell me about Everest"}], stream=True,
        extra_body={"mock": {"text": answer}},
    )
    content, reports = [], {}
    async for chunk in stream:
        content.extend(c.delta.content or "" for c in chunk.choices)
        factcheck = (chunk.model_extra or {}).get("factcheck")
        if factcheck and factcheck["type"] == "sentence":
            reports[factcheck["report"]["index"]] = factcheck["report"]
    assert "".join(content) == answer
    labels = [reports[i]["verdict"]["label"] for i in sorted(reports)]
    assert labels == ["skipped", "attributable", "contradictory"]
    tag = next(t for t in reports[2]["tags"] if t["type"] == "entity")
    assert answer[tag["start"] : tag["end"]] == "Rome" and tag["replacement"] == "Paris"


async def test_correct_mode_edits_minimally_and_renders_fava(tmp_path_factory):
    from middleware.composition.editor import build_editor
    from middleware.settings import load_settings

    root: Path = tmp_path_factory.mktemp("corpus-edit")
    (root / "curie.md").write_text(CORPUS["curie.md"], encoding="utf-8")
    embedder = HashEmbedder()
    index = LocalIndex(tmp_path_factory.mktemp("index-edit"), embedder)
    index.update([root])
    verifier = SlotsVerifier(Aligner(embedder))
    parts = PipelineParts(
        sources=[LocalIndexSource(index)], questions=SlotQuestionGenerator(), decontext=SpacyDecontextualiser(),
        verifier=verifier, ranker=RelevanceRanker(embedder, top_j=2), embedder=embedder, top_j=2,
        editor=build_editor(load_settings(), verifier),
    )
    checker = FactChecker(parts)
    message = "Hi. Marie Curie won the Nobel Prize in Chemistry in 1915."
    sentence = sentence_in(message, "Marie Curie won the Nobel Prize in Chemistry in 1915.", index=1)
    report = await check_sentence(checker, sentence, CheckContext(mode=Mode.CORRECT))
    assert report.corrected_text == "Marie Curie won the Nobel Prize in Chemistry in 1911."
    edit = report.edits[0]
    assert (message[edit.start : edit.end], edit.replacement) == ("1915", "1911")
    assert report.fava == "Marie Curie won the Nobel Prize in Chemistry in <entity><delete>1915</delete><mark>1911</mark></entity>."


@pytest.mark.parametrize("pasted", [0, 80], ids=["short question", "prompt with documents"])
async def test_the_user_question_is_read_once_per_request(checker, monkeypatch, pasted):
    """Every sentence's check shares the request's one reading of the user's question (in a
    worker thread when it is a long prompt), started when the answer starts: the per-sentence
    claims stage does not re-read the prompt."""
    readings: list[tuple[str, bool]] = []

    def counting(question: str) -> PreparedQuestion:
        readings.append((question, threading.current_thread() is threading.main_thread()))
        return prepare_question(question)

    monkeypatch.setattr(factchecker_module, "prepare_question", counting)
    question = " ".join(["Mount Everest is 8,849 metres tall."] * pasted + ["Tell me about Marie Curie."])
    answer = "She was born in Warsaw on 7 November 1867. She won the Nobel Prize in Physics in 1903. She died in 1934."
    runner = CheckRunner(checker, load_settings(**{"check.sentence_budget_s": 30}).check)
    checked = await check_answer(runner, answer, CheckContext(user_message=question))
    assert readings == [(question, len(question) <= INLINE_QUESTION_CHARS)]  # a long prompt: in a worker thread
    assert (len(question) > INLINE_QUESTION_CHARS) == bool(pasted)
    assert [r.verdict.label for r in checked.reports] == ["attributable"] * 3  # 'She' resolved from the question


def test_a_report_lists_the_passages_worth_quoting_and_always_the_deciding_one():
    from middleware.pipeline.factchecker import shown_evidence
    from middleware.pipeline.verifiers.base import DetailedVerdict

    def passage(i: int, provider: str = "context", score: float = 1.0) -> Passage:
        return Passage(id=f"p{i}", text=f"text {i}", provider=provider, source=f"s{i}", score=score)

    evidence = [passage(0), passage(1), passage(2, score=0.0), passage(3, "index", 0.0), passage(4), passage(5)]
    verdict = DetailedVerdict(label="attributable", scores={}, evidence_id="p5", evidence_index=5)
    # a request section sharing no word with the claim is read, not quoted; another source's passage is quoted
    assert [p.id for p in shown_evidence(evidence, verdict, 4)] == ["p0", "p1", "p3", "p5"]
    assert [p.id for p in shown_evidence(evidence, verdict, 6)] == ["p0", "p1", "p3", "p4", "p5"]
    undecided = DetailedVerdict(label="extrapolatory", scores={})
    assert [p.id for p in shown_evidence(evidence, undecided, 2)] == ["p0", "p1"]
