"""``factcheck eval-battery --e2e``: whole third-party answers streamed through the proxy.

LFQA-Verification and ExpertQA answers (their ``test`` rows, sentences joined in order) are
said by the demo LLM (``factcheck serve --demo-upstream``, told the answer through its
``mock`` field), with the documents the annotators judged against as the request's context
(``context_policy: only``). The proxy segments, checks and reports as for any user; each
gold sentence is scored by the reports that overlap it: flagged (extrapolatory or
contradictory; a skipped or unverified sentence is shown unflagged) against gold unsupported, contradictions, true sentences flagged, and every
change correct mode makes, with the evidence sentence it came from.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from middleware.training.claim_sets import Item, load_set
from middleware.training.metrics import balanced_accuracy

E2E_SETS = ("lfqa_verification", "expertqa")
FLAGS = frozenset({"extrapolatory", "contradictory"})
"""The verdicts a user sees as a flag: not supported, or contradicted."""
CHECKED = FLAGS | {"attributable"}


@dataclass
class Answer:
    """One answer of the battery: its sentences in order with their gold labels."""

    id: str
    dataset: str
    question: str
    sentences: list[str]
    gold: list[str]
    documents: list[str]

    @property
    def text(self) -> str:
        return " ".join(s.strip() for s in self.sentences)

    def spans(self) -> list[tuple[int, int]]:
        out, at = [], 0
        for sentence in self.sentences:
            out.append((at, at + len(sentence.strip())))
            at += len(sentence.strip()) + 1
        return out


def _answer_key(item: Item) -> tuple[str, int]:
    """(answer id, sentence position) from the row id: LFQA '...-q<n>-s<i>', ExpertQA '...-c<i>'."""
    head, _, tail = item.id.rpartition("-")
    return head, int(tail.lstrip("sc"))


def answers(data_root: Path, dataset: str, limit: int, seed: int = 13) -> list[Answer]:
    """The ``test`` answers of one set, a seeded sample of ``limit``."""
    grouped: dict[str, list[tuple[int, Item]]] = {}
    for item in load_set(data_root, dataset):
        if item.split == "test":
            key, position = _answer_key(item)
            grouped.setdefault(key, []).append((position, item))
    out = []
    for key, rows in sorted(grouped.items()):
        rows.sort(key=lambda r: r[0])
        documents = list(dict.fromkeys(e for _, item in rows for e in item.evidence))
        out.append(
            Answer(
                key, dataset, rows[0][1].context or "", [i.claim for _, i in rows],
                [i.gold for _, i in rows], documents,
            )  # fmt: skip
        )
    if limit and len(out) > limit:
        out = [out[i] for i in sorted(random.Random(seed).sample(range(len(out)), limit))]
    return out


@dataclass
class Streamed:
    """What the proxy sent for one answer in one mode."""

    answer: Answer
    mode: str
    text: str = ""
    reports: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


async def stream_answer(session: Any, base_url: str, answer: Answer, mode: str) -> Streamed:
    """One streamed chat completion through the proxy; the answer said by the demo LLM."""
    body = {
        "model": "factcheck-demo", "stream": True,
        "messages": [{"role": "user", "content": answer.question or "Answer the question."}],
        "mock": {"text": answer.text},
        "factcheck": {"mode": mode, "context": answer.documents, "context_policy": "only"},
    }  # fmt: skip
    out = Streamed(answer, mode)
    async with session.post(f"{base_url}/v1/chat/completions", json=body) as response:
        if response.status != 200:
            out.error = f"HTTP {response.status}: {(await response.text())[:200]}"
            return out
        async for raw in response.content:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            factcheck = event.get("factcheck")
            if factcheck is not None:
                if factcheck.get("type") == "sentence":
                    out.reports.append(factcheck["report"])
                continue
            for choice in event.get("choices") or []:
                out.text += (choice.get("delta") or {}).get("content") or ""
    return out


def _gold_sentence(spans: Sequence[tuple[int, int]], report: dict[str, Any]) -> int | None:
    """The gold sentence a report overlaps most (by offsets in the message: the proxy's
    segmenter may cut differently), or None where it overlaps none."""
    overlaps = [min(e, report["end"]) - max(s, report["start"]) for s, e in spans]
    best = int(np.argmax(overlaps))
    return best if overlaps[best] > 0 else None


def sentence_outcomes(streamed: Streamed) -> list[dict[str, Any]]:
    """Each gold sentence with the labels of the reports overlapping it."""
    spans = streamed.answer.spans()
    out = [{"gold": g, "labels": [], "sentence": s} for g, s in zip(streamed.answer.gold, streamed.answer.sentences, strict=True)]
    for report in streamed.reports:
        if (index := _gold_sentence(spans, report)) is not None:
            out[index]["labels"].append(report["verdict"]["label"])
    return out


def changes(streamed: Streamed) -> list[dict[str, Any]]:
    """Every change correct mode applied: the sentence, the suggestion, the evidence sentence."""
    out = []
    spans = streamed.answer.spans()
    for report in streamed.reports:
        revision = report.get("revision") or {}
        if revision.get("status") == "applied":
            index = _gold_sentence(spans, report)
            gold = streamed.answer.gold[index] if index is not None else None
            out.append({
                "answer": streamed.answer.id, "original": report["text"], "suggested": revision.get("suggested"),
                "evidence_sentence": revision.get("evidence_sentence"), "gold_of_original": gold,
            })  # fmt: skip
    return out


def score(results: Sequence[Streamed]) -> dict[str, Any]:
    """Flagged balanced accuracy, contradiction precision and recall (against gold
    unsupported), the share of true sentences flagged, and the changes made."""
    rows = [o for r in results if r.error is None for o in sentence_outcomes(r)]
    gold_bad = [o["gold"] != "attributable" for o in rows]
    # a sentence the checker skipped (not check-worthy: an instruction, an opinion) or could
    # not check is shown unflagged, as the user sees it
    flagged = [any(label in FLAGS for label in o["labels"]) for o in rows]
    contradicted = [any(label == "contradictory" for label in o["labels"]) for o in rows]
    true_rows = [f for f, b in zip(flagged, gold_bad, strict=True) if not b]
    bad = sum(gold_bad)
    hits = sum(c and b for c, b in zip(contradicted, gold_bad, strict=True))
    made = [c for r in results for c in changes(r)]
    return {
        "answers": len(results), "errors": sum(r.error is not None for r in results), "sentences": len(rows),
        "flagged_balanced_accuracy": round(100 * balanced_accuracy(gold_bad, flagged), 1),
        "contradiction_precision": round(100 * hits / sum(contradicted), 1) if any(contradicted) else None,
        "contradiction_recall": round(100 * hits / bad, 1) if bad else None,
        "true_sentences_flagged": round(100 * sum(true_rows) / len(true_rows), 1) if true_rows else None,
        "unchecked_sentences": sum(not any(label in CHECKED for label in o["labels"]) for o in rows),
        "changes": made,
    }  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_healthy(session: Any, base_url: str, process: subprocess.Popen[bytes], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"factcheck serve exited with {process.returncode}")
        try:
            async with session.get(f"{base_url}/healthz") as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError("factcheck serve did not become healthy")


async def run(
    data_root: Path, limit: int, modes: Sequence[str], seed: int = 13, concurrency: int = 2,
    log: Any = None, serve_from: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Start ``factcheck serve --demo-upstream`` on a loopback port, stream every sampled
    answer in each mode, score per set and mode. ``serve_from``: a checkout whose server to
    start (an earlier commit, for a before/after comparison in one sitting)."""
    import aiohttp

    port = _free_port()
    command = [sys.executable, "-m", "middleware.cli", "serve", "--demo-upstream", "--host", "127.0.0.1", "--port", str(port)]
    # what is measured is the verdicts, not the latency: a generous budget, so that a loaded
    # machine does not turn checks into 'unverified (timeout)'
    env = os.environ | {
        "FACTCHECK_SERVER__MAX_CONTEXT_CHARS": str(10**6), "FACTCHECK_SERVER__RATE_LIMIT_PER_MINUTE": "0",
        "FACTCHECK_CHECK__SENTENCE_BUDGET_S": "20",
    }  # fmt: skip
    if serve_from is not None:
        env["PYTHONPATH"] = str(serve_from.resolve())
    process = subprocess.Popen(
        command, env=env, cwd=serve_from, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base_url = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await _wait_healthy(session, base_url, process)
            semaphore = asyncio.Semaphore(concurrency)

            async def one(answer: Answer, mode: str) -> Streamed:
                async with semaphore:
                    return await stream_answer(session, base_url, answer, mode)

            for dataset in E2E_SETS:
                sampled = answers(data_root, dataset, limit, seed)
                for mode in modes:
                    results = await asyncio.gather(*(one(a, mode) for a in sampled))
                    out[f"{dataset}/{mode}"] = score(results)
                    if log is not None:
                        log(f"{dataset}/{mode}: { {k: v for k, v in out[f'{dataset}/{mode}'].items() if k != 'changes'} }")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    return out


def render(results: dict[str, Any]) -> str:
    head = f"{'set/mode':<28}{'answers':>8}{'sents':>7}{'flag BA':>9}{'contr P':>9}{'contr R':>9}{'true flagged':>14}{'changes':>9}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        def cell(value: float | None) -> str:
            return f"{value:.1f}" if value is not None else "-"

        lines.append(
            f"{name:<28}{r['answers']:>8}{r['sentences']:>7}{r['flagged_balanced_accuracy']:>9.1f}"
            f"{cell(r['contradiction_precision']):>9}{cell(r['contradiction_recall']):>9}"
            f"{cell(r['true_sentences_flagged']):>14}{len(r['changes']):>9}"
        )
    for name, r in results.items():
        for change in r["changes"]:
            lines.append(
                f"\n[{name}] {change['original']!r}\n  -> {change['suggested']!r}\n  evidence: {change['evidence_sentence']!r}"
                f"\n  gold of the original: {change['gold_of_original']}"
            )
    return "\n".join(lines)
