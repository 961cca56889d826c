"""Readers of the third-party claim/evidence sets in ``../shared/data``: the dev battery
(``dev-battery/``: ExpertQA, LFQA-Verification, SummEdits, each row marked ``train`` or
``test``), WiCE and FEVER-Symmetric. The battery's ``train`` rows fit the verifier's combiner
(``middleware.training.combiner``); its ``test`` rows and the two extra sets are the yardstick
(``middleware.evaluation``), never tuned on."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from middleware.training.verifier_data import clean_text

PASSAGE_SENTENCES = 4
"""WiCE's cited page is cut into passages of this many sentences (as the local index's)."""

BATTERY_SETS = ("expertqa", "lfqa_verification", "summedits")
"""The files of ``dev-battery/`` (``<name>.jsonl``), split into ``train`` and ``test``."""
EXTRA_SETS = ("fever_symmetric", "wice")
"""Dev sets scored beside the battery (never tuned on; every row is 'test')."""
ALL_SETS = BATTERY_SETS + EXTRA_SETS
DEFAULT_LIMIT = 400
DEFAULT_SEED = 13


@dataclass(frozen=True)
class Example:
    claim: str
    evidence: list[str]
    gold: str  # one of NLI_LABELS (WiCE's not_supported counts as extrapolatory)


def read_jsonl(path: Path) -> Iterable[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_wice(path: Path, passage_sentences: int = PASSAGE_SENTENCES) -> list[Example]:
    """WiCE claims with the cited page as passages of ``passage_sentences`` sentences."""
    from middleware.pipeline.verifiers.base import to_verdict_label

    out = []
    for row in read_jsonl(path):
        lines = [s for s in row["evidence"] if s.strip()]
        passages = [
            "\n".join(lines[i : i + passage_sentences]) for i in range(0, len(lines), passage_sentences)
        ]
        out.append(Example(row["claim"], passages, to_verdict_label(row["label"])))
    return out


def load_fever_symmetric(path: Path) -> list[Example]:
    """FEVER-Symmetric: one claim, one evidence sentence, both untokenised (FEVER text reads
    'Cruz has modelled for Mango , Ralph Lauren .'). ``path`` may be the folder."""
    from middleware.pipeline.verifiers.base import to_verdict_label

    if path.is_dir():
        path = next(path.glob("*.jsonl"))
    out = []
    for row in read_jsonl(path):
        evidence = row.get("evidence") or row.get("sentence1")
        label = row.get("gold_label") or row.get("label")
        out.append(Example(clean_text(row["claim"]), [clean_text(evidence)], to_verdict_label(label)))
    return out


@dataclass(frozen=True)
class Item:
    """One claim with its evidence; ``gold`` is one of NLI_LABELS."""

    id: str
    dataset: str
    claim: str
    evidence: list[str]
    gold: str
    split: str = "test"
    context: str | None = None


def _battery_file(path: Path, dataset: str) -> list[Item]:
    return [
        Item(
            id=row["id"], dataset=dataset, claim=row["claim"], evidence=[e for e in row["evidence"] if e.strip()],
            gold="attributable" if row["label"] == "supported" else "extrapolatory",
            split=row["split"], context=row.get("context"),
        )  # fmt: skip
        for row in read_jsonl(path)
    ]


def _wice(path: Path) -> list[Item]:
    """WiCE's cited page cut into passages of ``PASSAGE_SENTENCES`` sentences, as the local
    index's (``load_wice``); partially supported counts as not attributable."""
    return [Item(f"wice-{n}", "wice", e.claim, e.evidence, e.gold) for n, e in enumerate(load_wice(path))]


def _fever_symmetric(path: Path) -> list[Item]:
    return [
        Item(f"fever_symmetric-{n}", "fever_symmetric", e.claim, e.evidence, e.gold)
        for n, e in enumerate(load_fever_symmetric(path))
    ]


def load_set(data_root: Path, dataset: str) -> list[Item]:
    """Every row of one set; ``data_root`` is the folder holding ``dev-battery/``,
    ``fever-symmetric/`` and ``wice/`` (``../shared/data``)."""
    if dataset in BATTERY_SETS:
        return _battery_file(data_root / "dev-battery" / f"{dataset}.jsonl", dataset)
    if dataset == "fever_symmetric":
        return _fever_symmetric(data_root / "fever-symmetric")
    if dataset == "wice":
        return _wice(data_root / "wice" / "claim_dev.jsonl")
    raise ValueError(f"unknown set {dataset!r}; expected one of {ALL_SETS}")


def sample(items: Sequence[Item], split: str, limit: int | None, seed: int = DEFAULT_SEED) -> list[Item]:
    """The rows of ``split`` (the extra sets have only 'test'), a fixed seeded sample of at
    most ``limit`` of them, in file order."""
    rows = [i for i in items if i.split == split]
    if limit is None or len(rows) <= limit:
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), limit))
    return [rows[i] for i in keep]
