"""ProxyChatOpenAI: LangChain's ChatOpenAI pointed at the proxy keeps the proxy's reports in
``response_metadata["factcheck"]``, passages whole; plain ChatOpenAI drops them."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI

from adapters.langchain.proxy import ProxyChatOpenAI
from tests.support.checkers import CitingChecker

ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905. She died in 1934."
PASSAGE = CitingChecker.PASSAGE.model_dump(mode="json") | {"source": "marie-curie.md"}  # shown by file name


def model(proxy, cls: type[ChatOpenAI] = ProxyChatOpenAI, **kwargs) -> ChatOpenAI:
    return cls(base_url=proxy.url, api_key="sk-test", model="m", max_retries=0,
               extra_body={"mock": {"text": ANSWER}, "factcheck": {"mode": "annotate"}}, **kwargs)


def assert_reports(factcheck: dict) -> None:
    reports = sorted(factcheck["reports"], key=lambda r: r["index"])
    assert [(r["index"], r["verdict"]["label"]) for r in reports] == [
        (0, "attributable"), (1, "contradictory"), (2, "attributable")]
    assert [r["evidence"] for r in reports] == [[PASSAGE]] * 3  # the text sent once, put back twice
    assert factcheck["summary"]["verdicts"] == {"attributable": 2, "contradictory": 1}
    assert factcheck["summary"]["attribution_report"] == [PASSAGE]


async def test_a_call_that_does_not_stream_keeps_the_reports(make_proxy):
    proxy = await make_proxy(CitingChecker({"1905": "1903"}))
    message = await model(proxy).ainvoke("Who was Marie Curie?")
    assert message.content == ANSWER
    assert_reports(message.response_metadata["factcheck"])
    assert "factcheck" not in (await model(proxy, ChatOpenAI).ainvoke("Who was Marie Curie?")).response_metadata


@pytest.mark.parametrize("usage", [False, True], ids=["chunks", "with usage"])
async def test_a_stream_keeps_each_report_on_its_chunk_and_all_on_their_sum(make_proxy, usage):
    proxy = await make_proxy(CitingChecker({"1905": "1903"}))
    chunks = [c async for c in model(proxy, stream_usage=usage).astream("Who was Marie Curie?")]
    carrying = [c for c in chunks if "factcheck" in c.response_metadata]
    assert [c.content for c in carrying] == [""] * 4  # the extension chunks: three reports, then the summary
    assert list(carrying[-1].response_metadata["factcheck"]) == ["summary"]
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert isinstance(whole, AIMessageChunk) and whole.content == ANSWER
    assert_reports(whole.response_metadata["factcheck"])
    plain = [c async for c in model(proxy, ChatOpenAI).astream("Who was Marie Curie?")]
    assert not any("factcheck" in c.response_metadata for c in plain)


async def test_the_sync_api_too(make_proxy):
    proxy = await make_proxy(CitingChecker({"1905": "1903"}))  # served on this loop while a thread calls it
    message = await asyncio.to_thread(model(proxy).invoke, "Who was Marie Curie?")
    assert_reports(message.response_metadata["factcheck"])
    chunks = await asyncio.to_thread(lambda: list(model(proxy).stream("Who was Marie Curie?")))
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert_reports(whole.response_metadata["factcheck"])
