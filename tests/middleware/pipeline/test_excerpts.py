"""Bounded report text (issue 30, item 4): every evidence text of a report is cut to a window
around what matched, so a response stays a small multiple of its request whatever the
documents look like."""

from __future__ import annotations

import json

import pytest

from middleware.pipeline.excerpts import EXCERPT_CHARS, PASSAGE_CHARS, bounded_report, densest_span, excerpt
from middleware.pipeline.verifiers.base import DetailedVerdict, Mismatch
from middleware.sse import json_payloads
from middleware.types import Edit, Passage, Revision, SentenceReport
from tests.support.streams import sized_stream

FILLER = "and the weather was mild in the valley where farmers grew barley wheat and oats "
FACT = "the Eiffel Tower in Paris was completed in 1889 by the engineer Gustave Eiffel "
CLAIM = "The Eiffel Tower in Paris was completed in 1887."


def unpunctuated(chars: int, fact_at: float = 0.5) -> str:
    """``chars`` characters without one full stop, ``FACT`` at ``fact_at`` of the way."""
    half = FILLER * int(chars * fact_at / len(FILLER))
    rest = FILLER * int((chars - len(half) - len(FACT)) / len(FILLER))
    return half + FACT + rest


def test_text_that_fits_is_left_whole():
    text = "Marie Curie was born in Warsaw in 1867."
    assert excerpt(text, [(30, 34)], CLAIM) == text


def test_a_long_text_is_cut_around_its_anchor_on_word_boundaries():
    text = unpunctuated(20_000)
    at = text.index("1889")
    cut = excerpt(text, [(at, at + 4)])
    assert "1889" in cut and len(cut) <= EXCERPT_CHARS
    assert cut == cut.strip() and f" {cut} " in f" {text} "  # whole words, a piece of the text


def test_without_an_anchor_the_cut_holds_most_of_the_claims_words():
    text = unpunctuated(20_000, fact_at=0.8)
    start, end = densest_span(text, CLAIM) or (0, 0)
    assert text[start:end].startswith("Eiffel Tower in Paris was completed")
    assert "Eiffel Tower in Paris was completed in 1889" in excerpt(text, (), CLAIM)
    assert densest_span(text, "Ada Lovelace") is None
    assert excerpt(text, (), "Ada Lovelace") == excerpt(text)  # nothing matched: the beginning


def test_an_anchor_longer_than_the_limit_gives_way_to_the_claims_words():
    text = unpunctuated(20_000, fact_at=0.3)
    assert "1889" in excerpt(text, [(0, len(text))], CLAIM)


def test_a_report_quotes_the_evidence_of_every_change_around_the_value_it_puts_in():
    """Correct mode reports each change with the evidence it came from: the cut keeps the value."""
    text = unpunctuated(100_000)
    year = text.index("1889")
    passage = Passage(id="p", text=text, provider="context", source="factcheck.context[0]", start=7, end=7 + len(text),
                      title="T" * 5000)
    mismatch = Mismatch(kind="date", span=(43, 47), text="1887", replacement="1889", evidence_index=0,
                        evidence_span=(year, year + 4))
    verdict = DetailedVerdict(label="contradictory", evidence_id="p", evidence_sentence=text, evidence_index=0,
                              evidence_span=(0, len(text)), mismatches=[mismatch])
    edit = Edit(start=43, end=47, original="1887", replacement="1889", evidence=text)
    revision = Revision(status="applied", reason="r", suggested=CLAIM.replace("1887", "1889"), evidence_sentence=text)
    report = SentenceReport(index=0, start=0, end=len(CLAIM), text=CLAIM, verdict=verdict, evidence=[passage],
                            edits=[edit], revision=revision)
    bounded = bounded_report(report, verdict, [passage])
    quoted = [bounded.verdict.evidence_sentence, bounded.edits[0].evidence, bounded.revision.evidence_sentence]
    assert all(q is not None and "completed in 1889" in q and len(q) <= EXCERPT_CHARS for q in quoted), quoted
    [cut] = bounded.evidence
    assert "completed in 1889" in cut.text and len(cut.text) <= PASSAGE_CHARS and len(cut.title or "") <= 200
    assert cut.start is not None and cut.text == (" " * 7 + text)[cut.start : cut.end]  # still source[start:end]
    assert bounded.edits[0].original == "1887" and bounded.revision.suggested == revision.suggested


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["annotate", "correct"])
async def test_a_100_kb_unpunctuated_document_gives_a_response_at_most_5x_its_request(make_proxy, tmp_path, mode):
    """Was 21x: each of the 20 reports quoted the whole document as its evidence sentence."""
    from middleware.composition.pipeline import build_pipeline_checker
    from middleware.settings import load_settings

    settings = load_settings(**{"evidence.providers": ["context"], "evidence.index_dir": str(tmp_path)})
    proxy = await make_proxy(build_pipeline_checker(settings), **{"check.sentence_budget_s": 120.0})
    answer = " ".join([CLAIM] + [f"Farmers in the valley grew crop number {i}." for i in range(19)])
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me about the valley."}],
            "mock": {"text": answer},
            "factcheck": {"mode": mode, "context": [unpunctuated(100_000)], "context_policy": "only"}}
    raw = json.dumps(body).encode()
    size, events = await sized_stream(proxy.url, raw)
    reports = [c["factcheck"]["report"] for c in json_payloads(events) if (c.get("factcheck") or {}).get("type") == "sentence"]
    assert len(reports) == 20 and all(r["verdict"]["label"] != "unverified" for r in reports)
    assert sum(1 for r in reports if r["verdict"]["evidence_sentence"]) >= 10  # the evidence is quoted, cut
    assert size <= 5 * len(raw), (size, len(raw))
