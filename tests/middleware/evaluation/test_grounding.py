"""``factcheck eval-grounding`` against a fake upstream on loopback whose answers depend on the
instruction (it quotes the demo corpus when told to ground its answer, paraphrases when told
not to, mixes both when told nothing): QUIP-Score rises with the grounding prompt and falls with
the anti-grounding control. The fake is a test double; nothing here says what a real LLM does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from middleware.evaluation.grounding import answer_quip, eval_grounding, parse_questions, variant_body
from middleware.chat.grounding_prompt import anti_grounding_instruction, grounding_instruction
from middleware.checking import CheckRunner
from middleware.cli import app
from middleware.composition import build_upstream
from middleware.evidence.index import DEMO_CORPUS
from middleware.settings import load_settings
from middleware.types import SentenceReport, Verdict
from tests.support.grounding_doubles import TOPICS, QuipChecker, fake_grounding_llm, portrait_of

QUESTIONS = "When was the Eiffel Tower built?\n\n{\"question\": \"What did Marie Curie discover?\"}\n"


@pytest.fixture(scope="module")
def demo_portrait():
    return portrait_of(sorted(DEMO_CORPUS.rglob("*.md")))


def test_the_fake_quotes_the_demo_corpus_only_when_told_to(demo_portrait):
    for topic in TOPICS.values():
        document = topic["document"].read_text(encoding="utf-8")
        assert all(quote in document for quote in topic["quotes"])
        assert all(demo_portrait.quip_score(p) < 0.1 for p in topic["paraphrases"])


def test_questions_are_lines_or_json_lines():
    assert parse_questions(QUESTIONS) == ["When was the Eiffel Tower built?", "What did Marie Curie discover?"]
    with pytest.raises(ValueError, match="line 1"):
        parse_questions('{"q": "no question field"}')
    with pytest.raises(ValueError, match="line 2"):
        parse_questions("ok\n{not json")


def test_each_variant_asks_the_question_with_its_instruction():
    assert variant_body("Q?", None, "append") == {"messages": [{"role": "user", "content": "Q?"}], "stream": False}
    grounded = variant_body("Q?", grounding_instruction("Wikipedia"), "append", model="m", temperature=0.0)
    assert grounded["messages"] == [{"role": "user", "content": f"Q? {grounding_instruction('Wikipedia')}"}]
    assert grounded["model"] == "m" and grounded["temperature"] == 0.0
    control = variant_body("Q?", anti_grounding_instruction("Wikipedia"), "system")
    assert control["messages"][0] == {"role": "system", "content": anti_grounding_instruction("Wikipedia")}


def report(text: str, quip: float | None) -> SentenceReport:
    return SentenceReport(index=0, start=0, end=len(text), text=text, verdict=Verdict(label="attributable"), quip=quip)


def test_answer_quip_weighs_sentences_by_their_ngrams():
    long, short = "x" * 124, "y" * 34  # 100 and 10 25-grams
    assert answer_quip([report(long, 1.0), report(short, 0.0)]) == pytest.approx(100 / 110)
    assert answer_quip([report(long, 0.5), report("Too short.", None)]) == 0.5
    assert answer_quip([report("Too short.", None)]) is None


async def test_quip_rises_with_the_grounding_prompt_and_falls_with_the_control(demo_portrait):
    settings = load_settings()
    with fake_grounding_llm() as llm:
        upstream = build_upstream(settings.model_copy(update={"upstream": settings.upstream.model_copy(
            update={"url": llm.url})}))
        try:
            result = await eval_grounding(parse_questions(QUESTIONS), upstream, CheckRunner(QuipChecker(demo_portrait),
                                          settings.check), "the demo corpus", model="fake")
        finally:
            await upstream.close()
    assert len(llm.bodies) == 6 and all(b["model"] == "fake" for b in llm.bodies)
    figures = result.as_dict()
    none, grounded, control = (figures["variants"][v] for v in ("none", "grounding", "anti_grounding"))
    assert grounded["quip"] > none["quip"] > control["quip"]
    assert grounded["quip"] == pytest.approx(1.0) and control["quip"] < 0.1
    assert grounded["instruction"] == grounding_instruction("the demo corpus")
    assert none["instruction"] is None
    assert all(v["answers"] == 2 and v["failed"] == 0 and v["verdicts"] == {"attributable": 4} and v["mean_chars"] > 100
               for v in (none, grounded, control))
    assert figures["questions"] == 2 and len(figures["answers"]) == 6


async def test_an_upstream_failure_is_counted_not_fatal(demo_portrait):
    settings = load_settings(**{"upstream.url": "http://127.0.0.1:9/v1", "upstream.connect_timeout_s": 2.0})
    upstream = build_upstream(settings)
    try:
        result = await eval_grounding(["Q?"], upstream, CheckRunner(QuipChecker(demo_portrait), settings.check), "X")
    finally:
        await upstream.close()
    figures = result.variant("grounding")
    assert figures["failed"] == 1 and figures["answers"] == 0 and figures["quip"] is None
    assert "cannot reach upstream" in (result.answers[0].error or "")


@pytest.mark.slow
def test_the_command_with_the_pipeline_on_the_demo_index(tmp_path, monkeypatch):
    """The whole command: the demo index is built, every answer goes through the pipeline."""
    monkeypatch.setenv("FACTCHECK_EVIDENCE__INDEX_DIR", str(tmp_path / "index"))
    questions = tmp_path / "questions.txt"
    questions.write_text(QUESTIONS, encoding="utf-8")
    with fake_grounding_llm() as llm:
        result = CliRunner().invoke(app, ["eval-grounding", str(questions), "--upstream", llm.url,
                                          "--corpus", "the demo corpus", "--json"])
        assert result.exit_code == 0, result.output
        figures = json.loads(result.stdout)  # stderr may carry model-loading progress bars
        table = CliRunner().invoke(app, ["eval-grounding", str(questions), "--upstream", llm.url,
                                         "--placement", "system"])
    assert table.exit_code == 0, table.output
    assert "anti_grounding" in table.output and "(system)" in table.output
    none, grounded, control = (figures["variants"][v] for v in ("none", "grounding", "anti_grounding"))
    assert grounded["quip"] > none["quip"] > control["quip"], figures["variants"]
    assert figures["corpus"] == "the demo corpus" and figures["placement"] == "append"
    assert sum(grounded["verdicts"].values()) == 4  # two sentences per answer, each checked
    assert llm.bodies[1]["messages"][0]["content"].endswith(grounding_instruction("the demo corpus"))
    assert llm.bodies[-1]["messages"][0] == {"role": "system", "content": anti_grounding_instruction("Wikipedia")}
