"""Labelled NLI pairs: loading ``pairs.jsonl`` sources, text clean-up, label encoding and a
stable dev split.

Two-class sources (label ``not_entailment``) keep that label: the trainer applies a loss on
P(entailment) only for them, so they never teach the model that "not entailed" means neutral.

Teacher soft labels (``nli-train-v2/teacher/mpnet_probs.jsonl``) are keyed by the first 16 hex
digits of ``sha1(premise + "\x1f" + hypothesis)`` over the row's exact strings, so the key is
taken before text clean-up.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from middleware.types import NLI_HEAD_LABELS

NOT_ENTAILMENT = -1
"""Target id of a two-class ``not_entailment`` pair (loss on P(entailment) only)."""

_LABEL_IDS = {name: i for i, name in enumerate(NLI_HEAD_LABELS)} | {"not_entailment": NOT_ENTAILMENT}

_PTB_TOKENS = {
    "-LRB-": "(",
    "-RRB-": ")",
    "-LSB-": "[",
    "-RSB-": "]",
    "-LCB-": "{",
    "-RCB-": "}",
    "-COLON-": ":",
    "``": '"',
    "''": '"',
}
_PTB_RE = re.compile("|".join(re.escape(k) for k in _PTB_TOKENS))
_SPACE_BEFORE = re.compile(r"\s+([.,;:!?%)\]}])")
_SPACE_AFTER = re.compile(r"([(\[{$])\s+")
_CONTRACTION = re.compile(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE)
_QUOTES = re.compile(r'"\s+([^"]*?)\s+"')
_WIKI_JOIN = re.compile(r"\s@([-,.])@\s")


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: int  # 0..2 index into NLI_HEAD_LABELS, or NOT_ENTAILMENT
    source: str = ""
    id: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    key: str = ""  # teacher key of the raw row (see ``teacher_key``)
    soft: tuple[float, float, float] | None = None  # teacher probabilities in NLI_HEAD_LABELS order


def teacher_key(premise: str, hypothesis: str) -> str:
    """The key of a raw (uncleaned) row in the teacher file."""
    return hashlib.sha1(f"{premise}\x1f{hypothesis}".encode()).hexdigest()[:16]


def read_teacher(path: Path) -> dict[str, tuple[float, float, float]]:
    """``{key: (P(entailment), P(neutral), P(contradiction))}`` from a teacher file."""
    probs: dict[str, tuple[float, float, float]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                probs[row["key"]] = tuple(float(x) for x in row["probs"])  # type: ignore[assignment]
    return probs


def attach_teacher(pairs: Sequence[Pair], teacher: dict[str, tuple[float, float, float]]) -> list[Pair]:
    """The pairs with their teacher probabilities where the teacher file has their key."""
    return [replace(p, soft=teacher.get(p.key)) if p.key else p for p in pairs]


def attach_probabilities(pairs: Sequence[Pair], probs: Sequence[Sequence[float]]) -> list[Pair]:
    """The pairs with the given class probabilities (rows in ``NLI_HEAD_LABELS`` order, one
    per pair) as their soft labels: a teacher model's predictions."""
    if len(probs) != len(pairs):
        raise ValueError(f"{len(probs)} rows of probabilities for {len(pairs)} pairs")
    return [replace(p, soft=(float(row[0]), float(row[1]), float(row[2]))) for p, row in zip(pairs, probs, strict=True)]


def weight_sources(pairs: Sequence[Pair], weights: dict[str, float], seed: int) -> list[Pair]:
    """Mix sources by weight: a source with weight w contributes round(w * n) of its n pairs
    (sampled without replacement below 1, repeated whole then sampled above 1); unnamed
    sources keep weight 1."""
    by_source: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_source.setdefault(pair.source, []).append(pair)
    rng = random.Random(seed)
    mixed: list[Pair] = []
    for source, members in sorted(by_source.items()):
        weight = weights.get(source, 1.0)
        if weight < 0:
            raise ValueError(f"negative weight for source {source!r}")
        whole, part = divmod(round(weight * len(members)), len(members))
        mixed.extend(members * whole)
        mixed.extend(rng.sample(members, part))
    return mixed


def parse_weights(specs: Iterable[str]) -> dict[str, float]:
    """``["vitaminc=0.5", "med=2"]`` -> ``{"vitaminc": 0.5, "med": 2.0}``."""
    weights: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise ValueError(f"source weight {spec!r} is not SOURCE=WEIGHT")
        weights[name.strip()] = float(value)
    return weights


def clean_text(text: str) -> str:
    """Undo PTB/FEVER escapes (-LRB- ...), WikiText join marks (@-@) and tokeniser spacing
    (``word .``) so training text looks like the prose the verifier will see."""
    text = _PTB_RE.sub(lambda m: _PTB_TOKENS[m.group(0)], text)
    text = _WIKI_JOIN.sub(r"\1", text)
    text = _CONTRACTION.sub(r"\1", text)
    text = _SPACE_BEFORE.sub(r"\1", text)
    text = _SPACE_AFTER.sub(r"\1", text)
    text = _QUOTES.sub(r'"\1"', text)
    return re.sub(r"\s+", " ", text).strip()


def label_id(label: str | int) -> int:
    """Map a ``pairs.jsonl`` label to a target id; ``not_entailment`` stays two-class.
    An int is taken as an id already (``synthetic.jsonl``)."""
    if isinstance(label, int) and NOT_ENTAILMENT <= label < len(NLI_HEAD_LABELS):
        return label
    try:
        return _LABEL_IDS[label]
    except KeyError:
        raise ValueError(f"unknown NLI label {label!r}") from None


def read_pairs(path: Path, source: str | None = None) -> list[Pair]:
    """Read one ``pairs.jsonl`` (premise, hypothesis, label, id ...), cleaning the text and
    dropping exact duplicates."""
    source = source or path.parent.name
    pairs: list[Pair] = []
    seen: set[tuple[str, str, int]] = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            pair = Pair(
                premise=clean_text(row["premise"]),
                hypothesis=clean_text(row["hypothesis"]),
                label=label_id(row["label"]),
                source=source,
                id=str(row.get("id", len(pairs))),
                key=teacher_key(row["premise"], row["hypothesis"]),
            )
            key = (pair.premise, pair.hypothesis, pair.label)
            if pair.premise and pair.hypothesis and key not in seen:
                seen.add(key)
                pairs.append(pair)
    return pairs


def find_pair_files(paths: Iterable[Path]) -> list[Path]:
    """Each argument is a ``pairs.jsonl`` file or a directory searched for them."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("pairs.jsonl")) if path.is_dir() else [path])
    if not files:
        raise FileNotFoundError(f"no pairs.jsonl under {[str(p) for p in paths]}")
    return files


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bucket(pair: Pair, seed: int) -> float:
    """A number in [0, 1) fixed by (seed, source, id, text): the dev split does not move
    when other sources are added or rows are reordered."""
    key = f"{seed}|{pair.source}|{pair.id}|{pair.premise}|{pair.hypothesis}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64


def split_dev(
    pairs: Sequence[Pair], dev_size: int, seed: int, total: int | None = None
) -> tuple[list[Pair], list[Pair]]:
    """Hold out about ``dev_size`` pairs stratified by (source, label), chosen by hash.
    Pairs sharing a premise with a dev pair are dropped from training (no premise leak).
    ``total``: the number of pairs the dev share is taken of, where ``pairs`` is only part of
    a run's data (default: ``len(pairs)``)."""
    strata: dict[tuple[str, int], list[Pair]] = {}
    for pair in pairs:
        strata.setdefault((pair.source, pair.label), []).append(pair)
    fraction = min(1.0, dev_size / max(1, total if total is not None else len(pairs)))
    dev: list[Pair] = []
    for members in strata.values():
        ranked = sorted(members, key=lambda p: _bucket(p, seed))
        dev.extend(ranked[: round(len(members) * fraction)])
    dev_ids = {id(p) for p in dev}
    dev_premises = {p.premise for p in dev}
    train = [p for p in pairs if id(p) not in dev_ids and p.premise not in dev_premises]
    return train, dev


def run_dev_split(model: Path, data: list[Path], synthetic: Path | None, seed: int | None, dev_size: int | None) -> list[Pair]:
    """The held-out dev split of the run that trained ``model`` (seed and size from its
    ``train_meta.json`` unless given)."""
    meta_file = model / "train_meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    pairs = [p for f in find_pair_files(data) for p in read_pairs(f)]
    if synthetic:
        pairs += read_pairs(synthetic, source="synthetic")
    seed = seed if seed is not None else meta.get("hyper_parameters", {}).get("seed", 13)
    dev_size = dev_size or meta.get("data", {}).get("dev_size", 1500)
    return split_dev(pairs, dev_size, seed)[1]
