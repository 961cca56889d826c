"""The request's context as evidence: the context source and its policies, then grounding in
the context end to end through the proxy (scripted demo upstream on loopback, the real
``FactChecker`` with offline backends and a hashed bag-of-words embedder), the websocket, the
LangChain adapter and the UI in a headless browser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from adapters.langchain import FactCheckCallbackHandler, FactCheckedChatModel, ReportEvent
from middleware.chat.protocol import ChatRequest
from middleware.checking import check_sentence
from middleware.evidence.context_source import ContextFirst, ContextSource, sections, sources_for_policy
from middleware.evidence.request_passages import request_passages
from middleware.types import CheckContext, Passage, Sentence
from tests.support.context_doubles import (
    CLOSED_BOOK,
    CONTRADICTS,
    DOCUMENT,
    FOLLOWS,
    QUESTION,
    ROOMY,
    SYSTEM,
    CountingSource,
    body,
    checker,
    stream_reports,
)


pytestmark = pytest.mark.usefixtures("warm_spacy")


# --- the context source and its policies -------------------------------------------------------


async def test_context_source_ranks_by_bm25_and_drops_unrelated_passages():
    passages = request_passages(ChatRequest.model_validate({"messages": [
        {"role": "system", "content": "Acme sells rakes and spades."},
        {"role": "system", "content": "Acme was founded in 1952 by Ruth Alvarez in Toledo."},
        {"role": "system", "content": "The weather is mild."}]}))
    hits = await ContextSource(passages).search("When was Acme founded?", 5)
    assert [h.source for h in hits] == ["messages[1] (system)", "messages[0] (system)"]
    assert hits[0].score == 1.0 and 0 < hits[1].score < 1.0
    assert await ContextSource(passages).search("Who painted the Mona Lisa?", 5) == []


async def test_policies_only_first_among():
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    index = CountingSource()
    assert sources_for_policy(None, [index], "only") == []  # strict: no context passages, nothing to search
    assert sources_for_policy(None, [index], "among") == [index] == sources_for_policy(None, [index], "first")
    context = ContextSource(passages)
    [only] = sources_for_policy(context, [index], "only")
    assert only is context
    assert [type(s) for s in sources_for_policy(context, [index], "among")] == [CountingSource, ContextSource]
    [first] = sources_for_policy(context, [index], "first")
    assert isinstance(first, ContextFirst)
    covered = await first.search("When was Acme Corporation founded?", 5)
    assert index.searches == 0 and {p.provider for p in covered} == {"context"}  # the context answered alone
    uncovered = await first.search("What is the height of the Eiffel Tower?", 5)
    assert index.searches == 1 and [p.provider for p in uncovered] == ["index"]


async def test_policy_only_from_settings_searches_nothing_else():
    fc, index = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    report = await check_sentence(fc, Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
                            CheckContext(request_passages=passages))
    assert index.searches == 0 and report.verdict.label == "contradictory"
    # the request's own policy wins over the configured one
    report = await check_sentence(fc, Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
                            CheckContext(request_passages=passages, options={"context_policy": "among"}))
    assert index.searches > 0


async def test_policy_only_with_every_document_filtered_out_searches_nothing(make_proxy):
    fc, index = checker()
    proxy = await make_proxy(fc, **ROOMY)
    request = body(CONTRADICTS, context_policy="only", context=["Who founded Acme? When was it founded?", "  "])
    request["messages"] = [{"role": "user", "content": QUESTION}]  # no context messages either
    del request["mock"]["closed_book_text"]
    _, [report] = await stream_reports(proxy.url, request)
    assert index.searches == 0 and report["evidence"] == []
    assert report["verdict"]["label"] != "contradictory"


LONG = (
    "Acme Corporation is a maker of garden tools. Its head office is in Toledo, Ohio. It sells rakes. It sells spades. "
    "It was founded in 1952 by Ruth Alvarez. It employs 1,200 people. Its logo is a green rake. Its rakes are made "
    "of ash wood. Ruth Alvarez hands a green rake to every new employee.\n\n# History\n\n"
    "Acme opened a second plant in 1971. The plant closed in 2009."
)


def test_sections_put_the_overlapping_passages_back_together():
    passages = request_passages(ChatRequest.model_validate({"messages": [
        {"role": "system", "content": LONG}, {"role": "tool", "content": "Acme won an award in 2020."}]}))
    assert len(passages) > 3  # windows of four sentences, two apart
    whole = sections(passages)
    body, history = LONG.split("\n\n# History\n\n")
    assert [p.text for p in whole] == [body, history, "Acme won an award in 2020."]  # a heading ends a section
    assert [p.source for p in whole] == ["messages[0] (system)"] * 2 + ["messages[1] (tool)"]
    assert all(LONG[p.start:p.end] == p.text for p in whole[:2])
    assert len({p.id for p in whole}) == 3 and sections(passages)[0].id == whole[0].id
    loose = Passage(id="x", text="Not cut from a text here.", provider="context", source="elsewhere")
    assert sections([loose]) == [loose]
    assert ContextSource(passages).chars == sum(len(p.text) for p in whole)


@pytest.mark.parametrize("whole_chars", [20_000, 0])
async def test_a_small_context_is_read_whole_and_a_large_one_searched(whole_chars):
    fc, index = checker(policy="only", whole_chars=whole_chars)
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": LONG}]}))
    claim = "Acme was founded in 1952 by Ruth Alvarez."
    report = await check_sentence(fc, Sentence(index=0, start=0, end=len(claim), text=claim),
                                  CheckContext(request_passages=passages))
    assert index.searches == 0 and report.verdict.label == "attributable"
    read = {(p.start, p.end) for p in report.evidence}
    if whole_chars:  # every section of the document, not the passages a question ranked first
        assert read == {(p.start, p.end) for p in sections(passages)}
    else:
        assert read <= {(p.start, p.end) for p in passages}


async def test_the_whole_context_is_read_beside_what_the_other_sources_find():
    fc, index = checker(policy="among")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": LONG}]}))
    claim = "Acme was founded in 1948 by Ruth Alvarez."
    report = await check_sentence(fc, Sentence(index=0, start=0, end=len(claim), text=claim),
                                  CheckContext(request_passages=passages))
    assert index.searches > 0
    assert [p.provider for p in report.evidence] == ["context", "context", "index"]


# --- end to end through the proxy --------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_answer_that_follows_the_context_is_attributable_to_it(make_proxy, stream):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    if stream:
        content, reports = await stream_reports(proxy.url, body(FOLLOWS))
        assert content == FOLLOWS
    else:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{proxy.url}/chat/completions", json=body(FOLLOWS, stream=False)) as resp:
                reports = (await resp.json())["factcheck"]["reports"]
    assert [r["verdict"]["label"] for r in reports] == ["attributable", "attributable"]
    for report in reports:
        assert report["evidence"] and {p["provider"] for p in report["evidence"]} == {"context"}
        assert {p["source"] for p in report["evidence"]} == {"messages[0] (system)"}
        assert report["memory"] is None  # not asked for
    assert len(proxy.upstream.requests) == 1  # no closed-book call without memory_check


async def test_answer_that_contradicts_the_context_is_contradictory_with_the_context_passage(make_proxy):
    fc, index = checker()  # 'among': the index is searched too, and agrees with the wrong year
    proxy = await make_proxy(fc, **ROOMY)
    _, [report] = await stream_reports(proxy.url, body(CONTRADICTS, context_policy="only"))
    assert index.searches == 0
    assert report["verdict"]["label"] == "contradictory"
    deciding = next(p for p in report["evidence"] if p["id"] == report["verdict"]["evidence_id"])
    assert (deciding["provider"], deciding["source"]) == ("context", "messages[0] (system)")
    assert "founded in 1952" in deciding["text"]
    assert [(e["original"], e["replacement"]) for e in report["edits"]] == [("1948", "1952")]


async def test_factcheck_context_documents_are_evidence_named_by_position(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    request = body(CONTRADICTS, context=[{"text": "Acme Corporation was founded in 1952 by Ruth Alvarez.",
                                          "title": "Acme history"}])
    request["messages"] = [{"role": "user", "content": QUESTION}]
    del request["mock"]["closed_book_text"]
    _, [report] = await stream_reports(proxy.url, request)
    assert report["verdict"]["label"] == "contradictory"
    [passage] = report["evidence"]
    assert (passage["source"], passage["title"], passage["provider"]) == ("factcheck.context[0]", "Acme history",
                                                                          "context")
    assert "factcheck" not in proxy.upstream.requests[0]  # the documents are not sent upstream


# --- websocket, LangChain, UI ------------------------------------------------------------------


async def test_websocket_reports_carry_the_context_source(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    async with aiohttp.ClientSession() as session, session.ws_connect(f"{proxy.url}/ws") as ws:
        await ws.send_json({"type": "chat", "request": body(CONTRADICTS, memory_check=True)})
        messages = []
        while not messages or messages[-1].get("type") != "done":
            messages.append(await asyncio.wait_for(ws.receive_json(), 30))
    [report] = [m["factcheck"]["report"] for m in messages if m.get("factcheck", {}).get("type") == "sentence"]
    assert report["verdict"]["label"] == "contradictory"
    assert {(p["provider"], p["source"]) for p in report["evidence"]} == {("context", "messages[0] (system)")}
    assert report["memory"] is not None


async def test_langchain_runnable_and_callback_use_the_messages_as_context():
    fc, index = checker(policy="only")
    messages = [SystemMessage(content=SYSTEM), HumanMessage(content=QUESTION),
                ToolMessage(content='{"company": "Acme", "warehouses": 7}', tool_call_id="t1")]
    model = FactCheckedChatModel(GenericFakeChatModel(messages=iter([CONTRADICTS])), fc)
    [report] = [item.report async for item in model.astream(messages) if isinstance(item, ReportEvent)]
    assert report.verdict.label == "contradictory" and index.searches == 0
    # the context is read whole: both context messages naming Acme are listed, the system one decided
    assert {(p.provider, p.source) for p in report.evidence} == {("context", "messages[0] (system)"),
                                                                 ("context", "messages[2] (tool)")}
    assert next(p for p in report.evidence if p.id == report.verdict.evidence_id).source == "messages[0] (system)"

    handler = FactCheckCallbackHandler(fc, wait_on_end=True)
    text = "Acme Corporation has 7 warehouses."
    await GenericFakeChatModel(messages=iter([text])).ainvoke(messages, config={"callbacks": [handler]})
    [report] = handler.reports
    deciding = next(p for p in report.evidence if p.id == report.verdict.evidence_id)
    assert report.verdict.label == "attributable" and deciding.source == "messages[2] (tool)"


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed at /usr/bin/chromium")
async def test_ui_shows_the_context_passage_with_its_source_and_the_memory_signal(make_proxy):
    from playwright.async_api import async_playwright

    from tests.adapters.ui.test_ui_browser import CHROMIUM_ARGS

    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    extra = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}],
             "mock": {"text": CONTRADICTS,
             "closed_book_text": CLOSED_BOOK},
             "factcheck": {"context": [{"text": DOCUMENT, "title": "Acme handbook"}], "memory_check": True}}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            page.set_default_timeout(15_000)
            await page.goto(proxy.url.removesuffix("/v1") + "/")
            await page.wait_for_selector('#status[data-state="open"]')
            await page.click("#advanced summary")
            await page.fill("#extra", json.dumps(extra))
            await page.fill("#question", QUESTION)
            await page.press("#question", "Enter")
            await page.wait_for_selector('#answer[data-state="done"]')
            await page.locator('#answer .sentence[data-verdict="contradictory"]').click()
            passage = page.locator("#details-body li.passage")
            assert await passage.count() == 1
            head = await passage.locator(".passage-head").text_content()
            assert "Acme handbook" in head and "context" in head
            assert await passage.locator(".source").text_content() == "factcheck.context[0]"
            memory = await page.locator("#details-body dl.kv").text_content()
            assert "not flagged: closed-book" in memory and "vs context" in memory and "(margin 1.40)" in memory
        finally:
            await browser.close()


@pytest.mark.parametrize("document", [LONG, "Be concise."])
async def test_an_instruction_is_checked_against_documents_and_skipped_without(document):
    fc, _ = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": document}]}))
    text = "Ask Ruth Alvarez for a green rake."
    report = await check_sentence(fc, Sentence(index=0, start=0, end=len(text), text=text),
                                  CheckContext(request_passages=passages))
    assert (report.verdict.label == "skipped") == (document != LONG)


async def test_a_claim_is_verified_as_written_against_documents_read_whole_and_rewritten_otherwise():
    from middleware.pipeline.decontext import Decontextualised

    class Rewriter:
        async def decontextualise(self, sentence, previous, question=None):  # noqa: ANN001, ANN202
            return Decontextualised(sentence, sentence.replace("It ", "Acme Corporation "))

    class Recording:
        name = "recording"

        def __init__(self, inner) -> None:  # noqa: ANN001
            self.inner, self.claims = inner, []

        async def verify(self, claim, evidence, context=None):  # noqa: ANN001, ANN201
            self.claims.append(claim)
            return await self.inner.verify(claim, evidence, context)

    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": LONG}]}))
    text = "It was founded in 1952 by Ruth Alvarez."
    for whole_chars, expected in ((20_000, text), (0, "Acme Corporation was founded in 1952 by Ruth Alvarez.")):
        fc, _ = checker(policy="only", whole_chars=whole_chars)
        recording = Recording(fc.parts.verifier)
        fc.parts.verifier, fc.parts.decontext = recording, Rewriter()
        await check_sentence(fc, Sentence(index=0, start=0, end=len(text), text=text),
                             CheckContext(request_passages=passages))
        assert recording.claims == [expected]
