"""Grounding in the request's own context and the memory-hallucination margin signal.

Unit tests of the passages taken from a request, the context source and its policies, and the
closed-book request; then the proxy end to end (scripted demo upstream on loopback, the real
``FactChecker`` with offline backends and a hashed bag-of-words embedder), the websocket, the
LangChain adapter and the UI in a headless browser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from adapters.demo_upstream import tokenize
from adapters.langchain import FactCheckCallbackHandler, FactCheckedChatModel, ReportEvent
from middleware.errors import UpstreamError
from middleware.evidence.relevance import RelevanceRanker
from middleware.grounding import (
    ContextFirst,
    ContextSource,
    MemoryCheck,
    closed_book_body,
    closed_book_question,
    readable,
    request_passages,
    sources_for_policy,
)
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.cqgen import SlotQuestionGenerator
from middleware.pipeline.decontext import NoDecontextualiser
from middleware.pipeline.factchecker import FactChecker, PipelineParts
from middleware.pipeline.slots import analyse
from middleware.pipeline.verifiers import SlotsVerifier
from middleware.server.protocol import ChatRequest
from middleware.sse import SSEParser
from middleware.types import CheckContext, Passage, Sentence
from tests.pipeline_doubles import HashingEmbedder

DOCUMENT = (
    "Acme Corporation is a maker of garden tools based in Toledo, Ohio. It was founded in 1952 by Ruth Alvarez. "
    "In March 2024 Acme appointed Jane Doe as chief executive, replacing the founder's grandson. "
    "The company employs 1,200 people."
)
SYSTEM = f"Answer from the documents.\n\n{DOCUMENT}"
QUESTION = "Who runs Acme Corporation, and when was it founded?"
FOLLOWS = "Acme Corporation was founded in 1952 by Ruth Alvarez. Jane Doe became chief executive of Acme in March 2024."
CONTRADICTS = "Acme Corporation was founded in 1948 by Ruth Alvarez."
CLOSED_BOOK = "John Smith is the chief executive of Acme Corporation. He has led the company since 2010."
FROM_MEMORY = "John Smith is the chief executive of Acme Corporation. Jane Doe became chief executive of Acme in March 2024."
INDEX_TEXT = "Acme Corporation was founded in 1948 in Detroit by Ruth Alvarez."
PASTED = f"Here is our internal memo. {DOCUMENT} {DOCUMENT}\n\nWhat does it say about the founder?"
ROOMY = {"check.sentence_budget_s": 10.0}
"""A budget no healthy check on a loaded machine runs into: these tests are not about time."""


@pytest.fixture(scope="module", autouse=True)
def warm_spacy() -> None:
    analyse("Warm up the parser.")


class CountingSource:
    """An 'index' holding fixed passages that match every query; counts its searches."""

    name = "index"

    def __init__(self, texts: tuple[str, ...] = (INDEX_TEXT,)) -> None:
        self.passages = [Passage(id=f"i{i}", text=t, provider="index", source=f"doc{i}.md") for i, t in enumerate(texts)]
        self.searches = 0

    async def search(self, query: str, k: int) -> list[Passage]:
        self.searches += 1
        return self.passages[:k]


def checker(policy: str = "among", index: CountingSource | None = None) -> tuple[FactChecker, CountingSource]:
    """The real pipeline with offline backends and a hashed bag-of-words embedder."""
    index = index or CountingSource()
    embedder = HashingEmbedder()
    return FactChecker(PipelineParts(
        sources=[index], questions=SlotQuestionGenerator(), decontext=NoDecontextualiser(),
        verifier=SlotsVerifier(Aligner(embedder)), ranker=RelevanceRanker(embedder, top_j=2), embedder=embedder,
        top_j=2, context_policy=policy,
    )), index


def body(answer: str, *, mode: str = "annotate", stream: bool = True, **factcheck: Any) -> dict[str, Any]:
    return {
        "model": "m", "stream": stream, "temperature": 0.2, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "mock": {"text": answer, "closed_book_text": CLOSED_BOOK},
        "factcheck": {"mode": mode, **factcheck},
    }


async def stream_reports(url: str, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The streamed content and the sentence reports, read to [DONE]."""
    parser, content, reports = SSEParser(), [], []
    async with aiohttp.ClientSession() as session, session.post(f"{url}/chat/completions", json=request) as resp:
        assert resp.status == 200
        events = parser.feed(await resp.read()) + parser.flush()
    assert events[-1].is_done
    for event in events[:-1]:
        chunk = event.json()
        if "factcheck" in chunk and chunk["factcheck"]["type"] == "sentence":
            reports.append(chunk["factcheck"]["report"])
        for choice in chunk.get("choices", []):
            content.append((choice.get("delta") or {}).get("content") or "")
    return "".join(content), sorted(reports, key=lambda r: r["index"])


def counter(metric) -> float:
    return metric._value.get()


def histogram_count(metric) -> float:
    return next(s.value for s in metric.collect()[0].samples if s.name.endswith("_count"))


# --- passages from the request ----------------------------------------------------------------


def test_request_passages_are_named_by_where_they_came_from():
    request = ChatRequest.model_validate({
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What does the tool say?"},  # a question only: no facts
            {"role": "assistant", "content": "Acme is in Paris.", "tool_calls": []},  # the model's own words: not evidence
            {"role": "tool", "content": '{"company": "Acme", "revenue_usd": 5000000, "year": 2023}'},
            {"role": "user", "content": "Tell me about Acme."},  # the request, not evidence
            {"role": "user", "content": [{"type": "text", "text": PASTED}]},  # a pasted document
        ],
        "factcheck": {"context": ["Acme's logo is green.",
                                  {"text": "# About Acme\n\nAcme has 3 offices.", "source": "https://acme.example/about"},
                                  {"text": "Acme was listed in 1990.", "source": "handbook.pdf"}]},
    })
    passages = request_passages(request)
    assert {p.provider for p in passages} == {"context"}
    sources = [p.source for p in passages]
    assert sources[:3] == ["messages[0] (system)", "messages[0] (system)", "messages[3] (tool)"]
    assert set(sources[3:-3]) == {"messages[5] (user)"}
    assert sources[-3:] == ["factcheck.context[0]", "factcheck.context[1]", "factcheck.context[2]"]
    assert SYSTEM[passages[1].start : passages[1].end] == passages[1].text  # offsets into the message
    assert "revenue usd: 5000000" in passages[2].text  # JSON tool result made readable
    about, handbook = passages[-2], passages[-1]
    assert (about.title, about.url) == ("About Acme", "https://acme.example/about")
    assert (handbook.title, handbook.url) == ("handbook.pdf", None)
    assert len({p.id for p in passages}) == len(passages)


def test_json_tool_result_keeps_each_objects_fields_in_one_line():
    text = json.dumps({"results": [{"title": "Eiffel Tower", "completed": 1889, "tags": ["iron", "Paris"]},
                                   {"title": "Big Ben", "completed": 1859}]})
    assert readable(text) == ("- results — title: Eiffel Tower; completed: 1889\n- tags: iron, Paris\n"
                              "- results — title: Big Ben; completed: 1859\n")
    assert readable("plain words, not JSON") == "plain words, not JSON"
    assert readable("42") == "42"


# --- the context source and its policies ------------------------------------------------------


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
    assert sources_for_policy([], [index], "only") == []  # strict: no context passages, nothing to search
    assert sources_for_policy([], [index], "among") == [index] == sources_for_policy([], [index], "first")
    [only] = sources_for_policy(passages, [index], "only")
    assert isinstance(only, ContextSource)
    assert [type(s) for s in sources_for_policy(passages, [index], "among")] == [CountingSource, ContextSource]
    [first] = sources_for_policy(passages, [index], "first")
    assert isinstance(first, ContextFirst)
    covered = await first.search("When was Acme Corporation founded?", 5)
    assert index.searches == 0 and {p.provider for p in covered} == {"context"}  # the context answered alone
    uncovered = await first.search("What is the height of the Eiffel Tower?", 5)
    assert index.searches == 1 and [p.provider for p in uncovered] == ["index"]


async def test_policy_only_from_settings_searches_nothing_else():
    fc, index = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    report = await fc.check(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
                            CheckContext(request_passages=passages))
    assert index.searches == 0 and report.verdict.label == "contradictory"
    # the request's own policy wins over the configured one
    report = await fc.check(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
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


# --- the closed-book request -------------------------------------------------------------------


def test_closed_book_body_drops_the_context_and_keeps_the_model():
    forward = {**body(FOLLOWS), "tools": [{"type": "function"}], "tool_choice": "auto", "n": 2, "max_tokens": 900}
    forward.pop("factcheck")
    closed = closed_book_body(forward, QUESTION, 64)
    assert closed["messages"] == [{"role": "user", "content": QUESTION}]
    assert (closed["model"], closed["temperature"], closed["stream"], closed["max_tokens"]) == ("m", 0.2, False, 64)
    assert not {"tools", "tool_choice", "n", "stream_options"} & closed.keys()
    assert closed_book_body({"max_completion_tokens": 500}, QUESTION, 64)["max_completion_tokens"] == 64


def test_closed_book_question_leaves_pasted_documents_out():
    assert closed_book_question(QUESTION) == QUESTION
    assert closed_book_question(PASTED) == "What does it say about the founder?"
    instruction = f"Summarise the memo below.\n\n{DOCUMENT} {DOCUMENT} {DOCUMENT}"
    assert closed_book_question(instruction) == "Summarise the memo below."


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


async def test_answer_from_memory_against_the_context_is_flagged_by_the_margin(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    tokens, calls = counter(MEMORY_CHECK_TOKENS), histogram_count(MEMORY_CHECK_LATENCY)
    content, reports = await stream_reports(proxy.url, body(FROM_MEMORY, memory_check=True))
    assert content == FROM_MEMORY
    memorised, grounded = (r["memory"] for r in reports)
    assert memorised["flagged"] and memorised["margin"] == 1.4
    assert memorised["closed_book_similarity"] > 1.4 * memorised["context_similarity"]
    assert not grounded["flagged"]
    assert grounded["context_similarity"] > grounded["closed_book_similarity"]
    assert reports[0]["verdict"]["label"] != "attributable"  # the verdict comes from the verifier, not the signal

    main, closed = sorted(proxy.upstream.requests, key=lambda r: r["stream"], reverse=True)
    assert closed["messages"] == [{"role": "user", "content": QUESTION}]  # without the context
    assert (closed["stream"], closed["max_tokens"], closed["model"]) == (False, 48, main["model"])
    assert counter(MEMORY_CHECK_TOKENS) - tokens == 10 + len(tokenize(CLOSED_BOOK))  # the demo's prompt + completion
    assert histogram_count(MEMORY_CHECK_LATENCY) == calls + 1


async def test_memory_check_in_a_non_stream_request(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    async with aiohttp.ClientSession() as session:
        request = body(FROM_MEMORY, stream=False, memory_check=True)
        async with session.post(f"{proxy.url}/chat/completions", json=request) as resp:
            reports = (await resp.json())["factcheck"]["reports"]
    assert [r["memory"]["flagged"] for r in reports] == [True, False]


async def test_no_closed_book_call_without_context(make_proxy):
    fc, _ = checker()
    proxy = await make_proxy(fc, **ROOMY)
    request = body(CONTRADICTS, memory_check=True)
    request["messages"] = [{"role": "user", "content": QUESTION}]
    del request["mock"]["closed_book_text"]
    _, [report] = await stream_reports(proxy.url, request)
    assert report["memory"] is None and len(proxy.upstream.requests) == 1


class FailingUpstream:
    """Only ``complete`` is used by the memory check; it fails like an upstream 500."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def complete(self, body: dict[str, Any], headers: Any) -> tuple[bytes, dict[str, Any]]:
        await asyncio.sleep(self.delay)
        raise UpstreamError("upstream returned 500", 500, kind="server_error")


async def test_failed_closed_book_call_gives_no_signal_and_a_normal_verdict(caplog):
    fc, _ = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    memory = MemoryCheck.start(FailingUpstream(), body(CONTRADICTS), {}, QUESTION, max_tokens=16, margin=1.4, wait_s=5)
    report = await fc.check(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
                            CheckContext(request_passages=passages, memory=memory))
    assert report.memory is None and report.verdict.label == "contradictory"
    assert "closed-book call for the memory check failed" in caplog.text


async def test_closed_book_answer_too_late_gives_no_signal_and_is_cancelled_with_the_request():
    fc, _ = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    memory = MemoryCheck.start(FailingUpstream(delay=30), body(CONTRADICTS), {}, QUESTION, max_tokens=16, margin=1.4,
                               wait_s=0.05)
    report = await fc.check(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS),
                            CheckContext(request_passages=passages, memory=memory))
    assert report.memory is None and report.verdict.label == "contradictory"
    memory.close()
    await asyncio.sleep(0)
    assert memory.closed_book.done


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
    assert {(p.provider, p.source) for p in report.evidence} == {("context", "messages[0] (system)")}

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

    from tests.test_ui_browser import CHROMIUM_ARGS

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
