"""``factcheck eval-battery --e2e``: whole third-party answers streamed through the proxy.

Three sets of answers people judged sentence by sentence (or word by word) against the
documents the answer was written from:

- LFQA-Verification and ExpertQA (``dev-battery/``): an answer's sentences joined in order,
  each sentence's gold label as given;
- RAGTruth (``ragtruth/``): LLM answers to QA, summarisation and data-to-text prompts with
  word-level spans. The answer is cut into sentences by the proxy's own segmenter; a
  sentence overlapping a ``conflict`` span is gold ``contradictory``, else one overlapping a
  ``baseless`` span ``extrapolatory`` (``implicit_true`` spans too: true in the world, not
  grounded in the context), else ``attributable``.

Each answer is said by the demo LLM (``factcheck serve --demo-upstream``, told the answer
through its ``mock`` field), with the documents as the request's context
(``context_policy: only``). The proxy segments, checks and reports as for any user; each gold
sentence is scored by the reports that overlap it. Flagged = extrapolatory or contradictory (a
sentence skipped as not check-worthy, or left unverified, is shown unflagged, as the user sees
it). Beside every end-to-end figure, the verifier alone on the same gold sentences with every
document of the answer as evidence: the loss between the two is the pipeline's.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from middleware.training.claim_sets import Item, load_set, read_jsonl
from middleware.training.metrics import balanced_accuracy

RAGTRUTH = "ragtruth"
BATTERY_E2E_SETS = ("lfqa_verification", "expertqa")
E2E_SETS = (*BATTERY_E2E_SETS, RAGTRUTH)
DEFAULT_ANSWERS = {"lfqa_verification": 30, "expertqa": 30, RAGTRUTH: 0}
"""Answers streamed per set unless ``--e2e-answers`` says (a seeded sample; 0: all)."""
FLAGS = frozenset({"extrapolatory", "contradictory"})
"""The verdicts a user sees as a flag: not supported, or contradicted."""
CHECKED = FLAGS | {"attributable"}
CONTRADICTION_LABELLED = frozenset({RAGTRUTH})
"""Sets whose gold marks contradictions apart (scored against them even where a sample has none)."""
RAGTRUTH_ASKS = {
    "Summary": "Summarize the following news.",
    "Data2txt": "Write an objective overview about the following local business based only on the provided "
    "structured data.",
}
"""The request a RAGTruth answer replies to, where the row has no question of its own (the
source's text goes as context, as RAGTruth's prompts put it)."""


@dataclass
class Answer:
    """One answer: its text, its gold sentences (spans of the text) and their labels."""

    id: str
    dataset: str
    question: str
    text: str
    units: list[tuple[int, int]]
    gold: list[str]
    documents: list[str]
    task: str = ""
    hallucinated: bool | None = None
    """Response-level gold where the set gives it (RAGTruth: any span); else any unsupported sentence."""
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    """The gold spans where the set marks them (RAGTruth): start, end, kind (conflict, baseless)."""

    @property
    def sentences(self) -> list[str]:
        return [self.text[s:e] for s, e in self.units]

    @property
    def flawed(self) -> bool:
        return self.hallucinated if self.hallucinated is not None else any(g != "attributable" for g in self.gold)

    @classmethod
    def joined(cls, id: str, dataset: str, question: str, sentences: Sequence[str], gold: Sequence[str],
               documents: Sequence[str]) -> Answer:
        """An answer given as its sentences: joined by one space, each sentence a unit."""
        units, at = [], 0
        for sentence in sentences:
            units.append((at, at + len(sentence.strip())))
            at += len(sentence.strip()) + 1
        text = " ".join(s.strip() for s in sentences)
        return cls(id, dataset, question, text, units, list(gold), list(documents))


def _answer_key(item: Item) -> tuple[str, int]:
    """(answer id, sentence position) from the row id: LFQA '...-q<n>-s<i>', ExpertQA '...-c<i>'."""
    head, _, tail = item.id.rpartition("-")
    return head, int(tail.lstrip("sc"))


def battery_answers(data_root: Path, dataset: str, split: str = "test") -> list[Answer]:
    """The answers of one battery set (LFQA-Verification, ExpertQA), rebuilt from its rows."""
    grouped: dict[str, list[tuple[int, Item]]] = {}
    for item in load_set(data_root, dataset):
        if item.split == split:
            key, position = _answer_key(item)
            grouped.setdefault(key, []).append((position, item))
    out = []
    for key, rows in sorted(grouped.items()):
        rows.sort(key=lambda r: r[0])
        documents = list(dict.fromkeys(e for _, item in rows for e in item.evidence))
        out.append(Answer.joined(key, dataset, rows[0][1].context or "", [i.claim for _, i in rows],
                                 [i.gold for _, i in rows], documents))  # fmt: skip
    return out


def gold_label(start: int, end: int, spans: Sequence[Mapping[str, Any]]) -> str:
    """RAGTruth's reading of one sentence: contradictory where it overlaps a ``conflict``
    span, else extrapolatory where it overlaps a ``baseless`` one, else attributable."""
    kinds = {s["kind"] for s in spans if s["start"] < end and start < s["end"]}
    return "contradictory" if "conflict" in kinds else "extrapolatory" if "baseless" in kinds else "attributable"


def sentence_units(text: str) -> list[tuple[int, int]]:
    """The sentences of ``text`` as the proxy's segmenter cuts them, trimmed of white space."""
    from middleware.text.answer_segmenter import segment_text
    from middleware.types import SegmentKind

    units = []
    for segment in segment_text(text):
        if segment.kind is not SegmentKind.SENTENCE or not segment.text.strip():
            continue
        lead = len(segment.text) - len(segment.text.lstrip())
        units.append((segment.start + lead, segment.start + len(segment.text.rstrip())))
    return units


def ragtruth_answers(data_root: Path, split: str = "test") -> list[Answer]:
    """The RAGTruth answers of one split (``ragtruth/ragtruth.jsonl``, split by source)."""
    out = []
    for row in read_jsonl(data_root / "ragtruth" / "ragtruth.jsonl"):
        if row["split"] != split:
            continue
        text = row["response"]
        units = sentence_units(text)
        question = row.get("question") or RAGTRUTH_ASKS.get(row["task_type"], "Answer from the documents.")
        out.append(Answer(
            row["id"], RAGTRUTH, question, text, units, [gold_label(s, e, row["spans"]) for s, e in units],
            list(row["context"]), task=row["task_type"], hallucinated=bool(row["spans"]),
            spans=[(sp["start"], sp["end"], sp["kind"]) for sp in row["spans"]],
        ))  # fmt: skip
    return out


def answers(data_root: Path, dataset: str, limit: int | None = None, seed: int = 13, split: str = "test") -> list[Answer]:
    """The ``split`` answers of one set, a seeded sample of ``limit`` (None: the set's default; 0: all)."""
    out = ragtruth_answers(data_root, split) if dataset == RAGTRUTH else battery_answers(data_root, dataset, split)
    limit = DEFAULT_ANSWERS[dataset] if limit is None else limit
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
        "mock": {"text": answer.text, "token_rate": 0},  # at once: what is measured is the verdicts
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
    if not spans:
        return None
    overlaps = [min(e, report["end"]) - max(s, report["start"]) for s, e in spans]
    best = int(np.argmax(overlaps))
    return best if overlaps[best] > 0 else None


def sentence_outcomes(streamed: Streamed) -> list[dict[str, Any]]:
    """Each gold sentence with the labels of the reports overlapping it."""
    answer = streamed.answer
    out: list[dict[str, Any]] = [
        {"gold": g, "labels": [], "reasons": [], "p_attributable": [], "revisions": [], "sentence": s}
        for g, s in zip(answer.gold, answer.sentences, strict=True)
    ]
    for report in streamed.reports:
        if (index := _gold_sentence(answer.units, report)) is not None:
            verdict = report["verdict"]
            out[index]["labels"].append(verdict["label"])
            out[index]["reasons"].append(verdict.get("reason"))
            out[index]["p_attributable"].append((verdict.get("scores") or {}).get("attributable"))
            if revision := report.get("revision"):  # correct mode: applied or refused, and by which rule
                out[index]["revisions"].append({k: revision.get(k) for k in ("status", "rule", "reason", "suggested")})
    return out


def dump(streamed: Mapping[tuple[str, str], Sequence[Streamed]], alone: Mapping[str, Mapping[str, Sequence[str]]],
         path: Path) -> None:
    """Every gold sentence of every answer and mode as a JSON line: the reports' labels and
    reasons, whether the answer's documents hold records (``holds_records``), and the
    verifier alone's label (for reading where the points go)."""
    with path.open("w", encoding="utf-8") as out:
        for (dataset, mode), results in streamed.items():
            for r in results:
                labels = alone.get(dataset, {}).get(r.answer.id)
                records = holds_records(r.answer.documents)
                for i, outcome in enumerate(sentence_outcomes(r)):
                    row = {"dataset": dataset, "task": r.answer.task, "mode": mode, "answer": r.answer.id,
                           "records": records, "alone": labels[i] if labels else None} | outcome  # fmt: skip
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")


def holds_records(documents: Sequence[str]) -> bool:
    """Whether the documents, read as the proxy reads a request's context, hold structured
    records (the claims checked against them are judged at the record cut-off)."""
    from middleware.evidence.request_passages import context_passages, document_texts
    from middleware.pipeline.verifiers.fields import holds_record

    return holds_record(context_passages(document_texts(documents)))


def changes(streamed: Streamed) -> list[dict[str, Any]]:
    """Every change correct mode applied: the sentence, the suggestion, the evidence sentence,
    the gold of the sentence changed, and how it stands against the gold: ``grounded`` (every
    inserted value is stated by the answer's documents), ``in_gold_span`` (where the set marks
    spans: every applied edit overlaps a conflict or baseless span) and ``wrong`` (the sentence
    was right, or an edit lies outside every gold span)."""
    out = []
    answer = streamed.answer
    documents = _as_read(answer.documents)
    for report in streamed.reports:
        revision = report.get("revision") or {}
        if revision.get("status") != "applied":
            continue
        index = _gold_sentence(answer.units, report)
        gold = answer.gold[index] if index is not None else None
        edits = report.get("edits") or []
        inside = [any(s < e["end"] and e["start"] < t for s, t, _ in answer.spans) for e in edits]
        touched = [(s, t) for s, t, _ in answer.spans if any(s < e["end"] and e["start"] < t for e in edits)]
        in_span = bool(edits) and all(inside) if answer.spans or answer.dataset in CONTRADICTION_LABELLED else None
        out.append({
            "answer": answer.id, "original": report["text"], "suggested": revision.get("suggested"),
            "evidence_sentence": revision.get("evidence_sentence"), "gold_of_original": gold,
            "grounded": bool(edits) and all(stated(e["replacement"], documents) for e in edits),
            "in_gold_span": in_span, "wrong": gold == "attributable" or in_span is False, "spans": touched,
        })  # fmt: skip
    return out


def _as_read(documents: Sequence[str]) -> str:
    """The documents as written and as the proxy reads them (``readable``: a record's
    opening hours also in clock times, '11:0-0:0' as '11:00 AM to 12:00 AM')."""
    from middleware.evidence.request_passages import readable

    return " ".join([*documents, *(readable(d) for d in documents)]).casefold()


def stated(value: str, documents: str) -> bool:
    """The inserted ``value`` is stated by the (casefolded) documents: written there, or a
    time of day they state as written differently ('12am' for '12:00 AM')."""
    from middleware.pipeline.verifiers.hours import times_of_day

    value = value.strip().casefold()
    if value in documents:
        return True
    minutes = times_of_day(value)
    return len(minutes) == 1 and minutes[0] in times_of_day(documents)


def value_conflicts(answer: Answer) -> list[tuple[int, int]]:
    """The answer's conflict spans that hold a value of a kind the editor handles (a number,
    a date, a name, a time of day): what correct mode can fix by a value swap. The values are
    read in the span's sentence (a fragment parsed alone makes 'casual' a proper noun)."""
    from middleware.pipeline.slots import analyse
    from middleware.pipeline.verifiers.hours import times_of_day

    out = []
    for s, e, kind in answer.spans:
        if kind != "conflict":
            continue
        start, end = next(((a, b) for a, b in answer.units if a <= s < b), (s, e))
        inside = [x for x in analyse(answer.text[start:end]).slots if s <= start + x.start and start + x.end <= e]
        if inside or times_of_day(answer.text[s:e]):
            out.append((s, e))
    return out


def change_figures(answers: Sequence[Answer], made: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Correct mode against the gold: changes, grounded fixes, wrong edits, and (where the
    set marks conflict spans) the share of them a change fixed, of all and of those that hold
    a number, date or name (``value_conflicts``)."""
    conflicts = sum(kind == "conflict" for a in answers for *_, kind in a.spans)
    fixes = [c for c in made if c["in_gold_span"] and c["gold_of_original"] == "contradictory" and c["grounded"]]
    values = {(a.id, span) for a in answers for span in value_conflicts(a)}
    value_fixed = {(c["answer"], span) for c in fixes for span in c["spans"]} & values
    return {
        "changes_made": len(made), "grounded_fixes": sum(c["grounded"] and not c["wrong"] for c in made),
        "wrong_edits": sum(c["wrong"] for c in made), "conflict_spans_fixed": _pct(len(fixes), conflicts),
        "value_conflicts": len(values), "value_conflicts_fixed": _pct(len(value_fixed), len(values)),
    }


def _pct(numerator: int | float, denominator: int | float) -> float | None:
    return round(100 * numerator / denominator, 1) if denominator else None


def verdict_figures(answers: Sequence[Answer], labels: Sequence[Sequence[Sequence[str]]]) -> dict[str, Any]:
    """The figures of one reading of ``answers`` (``labels``: per answer, per gold sentence,
    the verdicts given to it). Contradictions are scored against gold ``contradictory`` where
    the set has such labels (RAGTruth's conflict spans), else against every unsupported
    sentence; response-level: any sentence flagged against the answer's own gold."""
    gold = [g for a in answers for g in a.gold]
    given = [set(s) for per_answer in labels for s in per_answer]
    bad = [g != "attributable" for g in gold]
    flagged = [bool(s & FLAGS) for s in given]
    contradicted = [("contradictory" in s) for s in given]
    labelled = "contradictory" in gold or any(a.dataset in CONTRADICTION_LABELLED for a in answers)
    target = [g == "contradictory" for g in gold] if labelled else bad
    hits = sum(c and t for c, t in zip(contradicted, target, strict=True))
    clean = [f for f, b in zip(flagged, bad, strict=True) if not b]
    said = [any(bool(set(s) & FLAGS) for s in per_answer) for per_answer in labels]
    flawed = [a.flawed for a in answers]
    tp = sum(s and f for s, f in zip(said, flawed, strict=True))
    precision, recall = _pct(tp, sum(said)), _pct(tp, sum(flawed))
    f1 = round(2 * precision * recall / (precision + recall), 1) if precision and recall else None
    return {
        "sentences": len(gold), "flagged_balanced_accuracy": round(100 * balanced_accuracy(bad, flagged), 1),
        "contradiction_precision": _pct(hits, sum(contradicted)), "contradiction_recall": _pct(hits, sum(target)),
        "contradictions_reported": sum(contradicted), "contradictions_gold": sum(target),
        "true_sentences_flagged": _pct(sum(clean), len(clean)),
        "unchecked_sentences": sum(not (s & CHECKED) for s in given),
        "response_precision": precision, "response_recall": recall, "response_f1": f1,
    }  # fmt: skip


def score(results: Sequence[Streamed], alone: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The end-to-end figures of ``results``, the changes made, and (``alone``: the verifier's
    label of each gold sentence, by answer id) the verifier alone on the same sentences."""
    ok = [r for r in results if r.error is None]
    answered = [r.answer for r in ok]
    out = {"answers": len(results), "errors": sum(r.error is not None for r in results)}
    out |= verdict_figures(answered, [[o["labels"] for o in sentence_outcomes(r)] for r in ok])
    out["changes"] = [c for r in ok for c in changes(r)]
    out |= change_figures(answered, out["changes"])
    if alone is not None:
        out["verifier_alone"] = verdict_figures(answered, [[[label] for label in alone[a.id]] for a in answered])
    return out


def by_task(results: Sequence[Streamed]) -> dict[str, list[Streamed]]:
    """The results of a set with tasks (RAGTruth: QA, Summary, Data2txt), per task."""
    tasks: dict[str, list[Streamed]] = {}
    for r in results:
        if r.answer.task:
            tasks.setdefault(r.answer.task, []).append(r)
    return dict(sorted(tasks.items()))


async def verify_alone(verifier: Any, answers: Sequence[Answer], concurrency: int = 2) -> dict[str, list[str]]:
    """The verifier alone on every gold sentence, every document of its answer as evidence
    (windowed by the verifier as in serving), the question as context."""
    from middleware.pipeline.verifiers import passages_from_texts

    semaphore = asyncio.Semaphore(concurrency)

    async def one(answer: Answer) -> list[str]:
        evidence = passages_from_texts(answer.documents)
        async with semaphore:
            return [(await verifier.verify(s.strip(), evidence, answer.question)).label for s in answer.sentences]

    labels = await asyncio.gather(*(one(a) for a in answers))
    return {a.id: list(ls) for a, ls in zip(answers, labels, strict=True)}


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


def server_env(overrides: Mapping[str, str] | None = None, serve_from: Path | None = None) -> dict[str, str]:
    """The server's environment: what is measured is the verdicts, not the latency, so a
    generous budget (a loaded machine must not turn checks into 'unverified (timeout)') and
    no request limits; then ``overrides`` (an ablation's settings)."""
    env = os.environ | {
        "FACTCHECK_SERVER__MAX_CONTEXT_CHARS": str(10**6), "FACTCHECK_SERVER__RATE_LIMIT_PER_MINUTE": "0",
        "FACTCHECK_CHECK__SENTENCE_BUDGET_S": "120", "FACTCHECK_CHECK__SHED_OVERLOAD": "false",
        # one process, the checks in it: the figures do not depend on how many CPUs size the defaults
        "FACTCHECK_SERVER__WORKERS": "1", "FACTCHECK_CHECK__WORKERS": "0",
    }  # fmt: skip
    if serve_from is not None:
        env["PYTHONPATH"] = str(serve_from.resolve())
    return env | dict(overrides or {})


async def run(
    data_root: Path, limit: int | None, modes: Sequence[str], seed: int = 13, concurrency: int = 2,
    log: Callable[[str], None] | None = None, serve_from: Path | None = None, sets: Sequence[str] = E2E_SETS,
    split: str = "test", env: Mapping[str, str] | None = None, alone: bool = True, dump_to: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Start ``factcheck serve --demo-upstream`` on a loopback port, stream every sampled
    answer of ``sets`` in each mode, score per set (and task) and mode; with ``alone``, the
    verifier alone on the same sentences beside each. ``serve_from``: a checkout whose server
    to start (an earlier commit, for a before/after comparison in one sitting); ``env``:
    settings for the server (``FACTCHECK_...`` variables: an ablation)."""
    import aiohttp

    port = _free_port()
    command = [sys.executable, "-m", "middleware.cli", "serve", "--demo-upstream", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        command, env=server_env(env, serve_from), cwd=serve_from, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base_url = f"http://127.0.0.1:{port}"
    sampled = {dataset: answers(data_root, dataset, limit, seed, split) for dataset in sets}
    out: dict[str, Any] = {}
    try:
        timeout = aiohttp.ClientTimeout(total=900)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await _wait_healthy(session, base_url, process)
            semaphore = asyncio.Semaphore(concurrency)

            async def one(answer: Answer, mode: str) -> Streamed:
                async with semaphore:
                    return await stream_answer(session, base_url, answer, mode)

            streamed = {}
            for dataset, chosen in sampled.items():
                for mode in modes:
                    started = time.perf_counter()
                    streamed[dataset, mode] = await asyncio.gather(*(one(a, mode) for a in chosen))
                    if log is not None:
                        log(f"{dataset}/{mode}: {len(chosen)} answers streamed in {time.perf_counter() - started:.0f} s")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    verdicts = await _alone(sampled, log) if alone else {}
    if dump_to is not None:
        dump(streamed, verdicts, dump_to)
    for (dataset, mode), results in streamed.items():
        out[f"{dataset}/{mode}"] = score(results, verdicts.get(dataset))
        for task, members in by_task(results).items():
            out[f"{dataset}:{task}/{mode}"] = score(members, verdicts.get(dataset))
        if log is not None:
            figures = out[f"{dataset}/{mode}"]
            log(f"{dataset}/{mode}: { {k: v for k, v in figures.items() if k not in ('changes', 'verifier_alone')} }")
    return out


async def _alone(sampled: Mapping[str, Sequence[Answer]], log: Callable[[str], None] | None) -> dict[str, dict[str, list[str]]]:
    """The default verifier (in this process, after the server has stopped) on every set's sentences."""
    from middleware.composition.backends import build_verifier
    from middleware.settings import load_settings

    verifier = build_verifier(load_settings(), None)
    out = {}
    for dataset, chosen in sampled.items():
        started = time.perf_counter()
        out[dataset] = await verify_alone(verifier, chosen)
        if log is not None:
            log(f"{dataset}: the verifier alone in {time.perf_counter() - started:.0f} s")
    return out


def _cell(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


COLUMNS = (
    ("flagged_balanced_accuracy", "flag BA"), ("contradiction_precision", "contr P"),
    ("contradiction_recall", "contr R"), ("true_sentences_flagged", "clean flagged"),
    ("response_f1", "resp F1"),
)  # fmt: skip


def render(results: dict[str, Any]) -> str:
    """One row per set (and task) and mode; each figure with the verifier alone's beside it
    (``e2e | alone``), then every change correct mode made."""
    head = f"{'set/mode':<30}{'answers':>8}{'sents':>7}{'unchecked':>10}" + "".join(f"{h:>16}" for _, h in COLUMNS)
    head += f"{'changes (fixes/wrong)':>23}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        alone = r.get("verifier_alone") or {}
        cells = "".join(
            f"{_cell(r[key]) + (' | ' + _cell(alone.get(key)) if alone else ''):>16}" for key, _ in COLUMNS
        )
        changed = f"{r['changes_made']} ({r['grounded_fixes']}/{r['wrong_edits']})"
        lines.append(f"{name:<30}{r['answers']:>8}{r['sentences']:>7}{r['unchecked_sentences']:>10}{cells}{changed:>23}")
    lines.append("each cell: end to end through the proxy | the verifier alone on the same sentences, whole context")
    for name, r in results.items():
        if ":" in name:  # a task's changes are its set's
            continue
        for change in r["changes"]:
            lines.append(
                f"\n[{name}] {change['original']!r}\n  -> {change['suggested']!r}\n  evidence: {change['evidence_sentence']!r}"
                f"\n  gold of the original: {change['gold_of_original']}; grounded: {change['grounded']}; "
                f"in a gold span: {change['in_gold_span']}; wrong: {change['wrong']}"
            )
    return "\n".join(lines)


GATED = (("flagged_balanced_accuracy", 1), ("response_f1", 1), ("true_sentences_flagged", -1))
"""The figures the CI gate holds (name, direction: 1 higher is better, -1 lower is). Not the
contradiction figures: RAGTruth's test split has 92 contradicted sentences, one of which is
more than the gate's point."""


def regressions(result: Mapping[str, Any], baseline: Mapping[str, Any], tolerance: float = 1.0) -> list[str]:
    """Where ``result`` (an ``eval-battery --e2e`` JSON) is worse than ``baseline`` by more
    than ``tolerance`` points on a gated figure, for every set (and task) and mode both have."""
    out = []
    for name, before in baseline.items():
        now = result.get(name)
        if not isinstance(before, Mapping) or not isinstance(now, Mapping):  # a note, or a row not run
            continue
        for key, direction in GATED:
            if now.get(key) is None or before.get(key) is None:
                continue
            if direction * (now[key] - before[key]) < -tolerance:
                out.append(f"{name}: {key} {now[key]} against the baseline's {before[key]} (tolerance {tolerance})")
    return out
