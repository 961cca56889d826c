"""The README's Python examples, run as written against the proxy on loopback (the demo
upstream, a checker whose reports cite one passage), so the README cannot drift: the OpenAI
SDK example prints only the answer and collects whole reports; ProxyChatOpenAI keeps them in
``response_metadata``; the callback handler's checker is built as the README says."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from adapters.demo_upstream import DemoAnswers
from middleware.evidence.index import ensure_demo_index
from middleware.settings import load_settings
from tests.support.checkers import CitingChecker
from tests.support.sdk_clients import closed_sdk_clients  # noqa: F401 (autouse)

README = Path(__file__).resolve().parent.parent / "README.md"
README_URL = "http://127.0.0.1:8000/v1"
QUESTION = "When did Marie Curie win her Nobel prizes?"


def example(marker: str) -> str:
    """The README's one ```python block holding ``marker``."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S) if marker in b]
    assert len(blocks) == 1, f"{len(blocks)} README examples hold {marker!r}"
    return blocks[0]


async def run(code: str, url: str, readme_url: str = README_URL) -> tuple[dict[str, Any], str]:
    """Run an example (blocking client code) in a thread while this loop serves the proxy,
    ``readme_url`` in it pointing there; its namespace and what it printed."""
    printed: list[str] = []

    def capture(*args: object, sep: str = " ", end: str = "\n", **_: object) -> None:
        printed.append(sep.join(map(str, args)) + end)

    namespace: dict[str, Any] = {"print": capture, "__name__": "readme_example"}
    await asyncio.to_thread(exec, compile(code.replace(readme_url, url), str(README), "exec"), namespace)
    return namespace, "".join(printed)


async def demo_proxy(make_proxy):
    """The proxy in front of the demo LLM with its scripted answers (the README asks about Curie)."""
    proxy = await make_proxy(CitingChecker({"1915": "1911"}))
    proxy.upstream.answers = DemoAnswers.load()
    return proxy


def whole(passage: dict[str, Any]) -> bool:
    return passage.get("text") == CitingChecker.PASSAGE.text


async def test_the_openai_example_prints_the_answer_and_collects_whole_reports(make_proxy):
    proxy = await demo_proxy(make_proxy)
    answer = DemoAnswers.load().answer_for(QUESTION)
    namespace, printed = await run(example("from openai import OpenAI"), proxy.url)
    assert "None" not in printed
    assert printed.startswith(answer + "\n")  # the answer, only its content, then the reports
    reports, summary = namespace["reports"], namespace["summary"]
    assert len(reports) == sum(summary["verdicts"].values()) > 1
    assert all(whole(p) for r in reports for p in r["evidence"])  # the text came once, put back in the others
    assert [whole(p) for p in summary["attribution_report"]] == [True]
    assert printed.endswith(f"{summary['verdicts']}\n")


async def test_the_langchain_example_keeps_the_reports_in_response_metadata(make_proxy):
    proxy = await demo_proxy(make_proxy)
    namespace, printed = await run(example("ProxyChatOpenAI("), proxy.url)
    message, factcheck, streamed = namespace["message"], namespace["factcheck"], namespace["streamed"]
    assert message.content == DemoAnswers.load().answer_for(QUESTION)
    assert sorted(r["index"] for r in factcheck["reports"]) == list(range(factcheck["summary"]["sentences"]))
    assert all(whole(p) for r in factcheck["reports"] for p in r["evidence"])
    assert streamed.response_metadata["factcheck"]["summary"]["verdicts"] == factcheck["summary"]["verdicts"]
    assert len(streamed.response_metadata["factcheck"]["reports"]) == len(factcheck["reports"])
    assert printed.endswith(f"{len(factcheck['reports'])} sentence reports\n")


async def test_the_responses_example_prints_the_answer_and_the_verdicts(make_proxy):
    proxy = await demo_proxy(make_proxy)
    answer = DemoAnswers.load().answer_for(QUESTION)
    namespace, printed = await run(example("client.responses.create("), proxy.url)
    reports, summary = namespace["reports"], namespace["summary"]
    assert printed == f"{answer}\n{summary['verdicts']}\n"
    assert len(reports) == sum(summary["verdicts"].values()) > 1
    assert next(r for r in reports if "1915" in r["text"])["verdict"]["label"] == "contradictory"


async def test_the_messages_example_prints_the_corrected_answer(make_proxy):
    proxy = await demo_proxy(make_proxy)
    corrected = DemoAnswers.load().answer_for(QUESTION).replace("1915", "1911")
    namespace, printed = await run(example("client.messages.stream("), proxy.url.removesuffix("/v1"),
                                   readme_url="http://127.0.0.1:8000")
    assert printed == f"{corrected}\nend_turn\n"
    assert namespace["message"].content[0].text == corrected


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("demo-index")
    ensure_demo_index(index_dir, settings=load_settings(**{"evidence.index_dir": str(index_dir)}))
    return index_dir


async def test_the_callback_example_builds_the_proxys_checker(demo_index, monkeypatch):
    monkeypatch.setenv("FACTCHECK_INDEX_DIR", str(demo_index))  # where the README's load_settings() finds it
    monkeypatch.setenv("FACTCHECK_CHECK__SENTENCE_BUDGET_S", "60")  # the first check loads the models
    namespace, _ = await run(example("FactCheckCallbackHandler("), README_URL)
    text = "Marie Curie won the Nobel Prize in Physics in 1903. She won the Nobel Prize in Chemistry in 1915."
    answer, reports = await namespace["ask"](GenericFakeChatModel(messages=iter([text])), QUESTION)
    assert answer == text
    assert [(r.index, r.verdict.label) for r in sorted(reports, key=lambda r: r.index)] == [
        (0, "attributable"), (1, "contradictory")]


@pytest.mark.slow
async def test_the_retriever_example_finds_evidence_in_the_users_files(tmp_path, monkeypatch):
    """The README's kb.py and its settings, as written (the folder: the packaged demo corpus),
    built by the proxy's composition root and searched like any evidence source."""
    import sys

    import yaml

    from adapters.search import RetrieverSource
    from middleware.cache import MemoryCache
    from middleware.composition import providers
    from middleware.composition.pipeline import build_sources
    from middleware.evidence.index import DEMO_CORPUS
    from middleware.settings import Settings

    (tmp_path / "kb.py").write_text(example("def make_retriever("), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kb", raising=False)
    [config] = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
                if "kb:make_retriever" in b]
    config["evidence"]["retriever"]["kwargs"]["paths"] = [str(DEMO_CORPUS)]
    [source] = build_sources(Settings.model_validate(config), None, MemoryCache(), providers())
    assert isinstance(source, RetrieverSource)
    passages = await source.search("Who led the British expedition of the first ascent of Everest in 1953?", 4)
    assert len(passages) == 4 and all(p.provider == "retriever" for p in passages)
    hillary = next(p for p in passages if p.source.endswith("edmund-hillary.md"))
    assert hillary.title == "Edmund Hillary" and "John Hunt" in hillary.text
