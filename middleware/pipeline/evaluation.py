"""Verifier evaluation on public claim/evidence sets (WiCE, FEVER-Symmetric): balanced
accuracy of attributable vs not, which is what the product acts on (support or flag)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from middleware.pipeline.verifiers import Verifier, passages_from_texts

_WICE_GOLD = {
    "supported": "attributable",
    "partially_supported": "extrapolatory",
    "not_supported": "extrapolatory",
}
_FEVER_GOLD = {"SUPPORTS": "attributable", "REFUTES": "contradictory", "NOT ENOUGH INFO": "extrapolatory"}


@dataclass(frozen=True)
class Example:
    claim: str
    evidence: list[str]
    gold: str  # one of NLI_LABELS (WiCE's not_supported counts as extrapolatory)


@dataclass
class Result:
    dataset: str
    backend: str
    gold: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def n(self) -> int:
        return len(self.gold)

    @property
    def balanced_accuracy(self) -> float:
        """Mean of the recall of 'attributable' and the recall of 'not attributable'."""
        return balanced_accuracy(self.gold, self.predicted)

    @property
    def three_way_accuracy(self) -> float:
        return sum(g == p for g, p in zip(self.gold, self.predicted, strict=True)) / max(1, self.n)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for label in self.predicted:
            out[label] = out.get(label, 0) + 1
        return out


def balanced_accuracy(gold: list[str], predicted: list[str]) -> float:
    positives = [p == "attributable" for g, p in zip(gold, predicted, strict=True) if g == "attributable"]
    negatives = [p != "attributable" for g, p in zip(gold, predicted, strict=True) if g != "attributable"]
    recalls = [sum(x) / len(x) for x in (positives, negatives) if x]
    return sum(recalls) / len(recalls) if recalls else 0.0


def _read_jsonl(path: Path) -> Iterable[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_wice(path: Path, passage_sentences: int = 4) -> list[Example]:
    """WiCE claims with the cited page as passages of ``passage_sentences`` sentences (the
    4-sentence windows RARR and the local index use)."""
    out = []
    for row in _read_jsonl(path):
        lines = [s for s in row["evidence"] if s.strip()]
        passages = [
            "\n".join(lines[i : i + passage_sentences]) for i in range(0, len(lines), passage_sentences)
        ]
        out.append(Example(row["claim"], passages, _WICE_GOLD[row["label"]]))
    return out


def load_fever_symmetric(path: Path) -> list[Example]:
    """FEVER-Symmetric: one claim, one evidence sentence. ``path`` may be the folder."""
    if path.is_dir():
        path = next(path.glob("*.jsonl"))
    out = []
    for row in _read_jsonl(path):
        evidence = row.get("evidence") or row.get("sentence1")
        label = row.get("gold_label") or row.get("label")
        out.append(Example(_untokenise(row["claim"]), [_untokenise(evidence)], _FEVER_GOLD[label]))
    return out


def _untokenise(text: str) -> str:
    """FEVER text is tokenised ('Cruz has modelled for Mango , Ralph Lauren .')."""
    for before, after in ((" ,", ","), (" .", "."), (" 's", "'s"), ("-LRB- ", "("), (" -RRB-", ")"), (" ;", ";"),
                          (" :", ":"), ("-LRB-", "("), ("-RRB-", ")"), (" n't", "n't"), ("`` ", '"'), (" ''", '"')):  # fmt: skip
        text = text.replace(before, after)
    return text


async def evaluate(verifier: Verifier, examples: list[Example], dataset: str, concurrency: int = 4) -> Result:
    result = Result(dataset, verifier.name)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(example: Example) -> str:
        async with semaphore:
            verdict = await verifier.verify(example.claim, passages_from_texts(example.evidence))
            return verdict.label

    started = time.perf_counter()
    labels = await asyncio.gather(*(one(e) for e in examples))
    result.seconds = time.perf_counter() - started
    result.gold = [e.gold for e in examples]
    result.predicted = list(labels)
    return result
