"""PURR-style training data for the editor (Chen et al., 2023), made from a local corpus.

PURR summarises search results into a clean statement y, has an LLM corrupt y into x, and
trains P(y | x, E) on the gold evidence padded with irrelevant evidence. Offline we take a
corpus sentence (sometimes shortened, so it is not a verbatim quote) as y, corrupt one
entity, number, date, semantic role or relation (``training.corruption``) to
get x, and pair it with its evidence window plus negative evidence: one hard negative (the
most similar sentence of another document) and random ones.

One JSON line per instance: {"id", "text" (corrupted), "original" (clean), "evidence",
"gold" (indices of gold evidence), "type", "wrong", "right", "doc"}; the same file is an
``eval-edit`` dev set and ``train-editor`` data.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spacy.tokens import Doc, Span

from middleware.text.nlp import get_nlp
from middleware.evidence.lexical import terms
from middleware.training.corruption import corrupt, corruption_type, entity_pool, shorten_sentence
from middleware.training.synthetic import Passage, markdown_passages

KINDS = ("entity", "number", "date", "relation")


@dataclass(frozen=True)
class EditInstance:
    id: str
    text: str  # corrupted statement
    original: str  # clean statement
    evidence: list[str]
    gold: list[int]
    type: str
    wrong: str
    right: str
    doc: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def load_corpus(roots: Iterable[Path]) -> list[Passage]:
    """Prose paragraphs of the markdown and text files under ``roots`` (README files skipped)."""
    passages: list[Passage] = []
    for root in roots:
        root = Path(root)
        passages += [p for p in markdown_passages(root) if p.title.lower() != "readme"]
        for path in sorted(root.rglob("*.txt")):
            for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
                if para.strip():
                    passages.append(Passage(path.stem, " ".join(para.split())))
    return passages


@dataclass(frozen=True)
class _Sentence:
    doc: int  # index of its passage
    title: str
    span: Span


def build_instances(
    passages: Sequence[Passage],
    n: int,
    *,
    seed: int = 13,
    negatives: int = 3,
    shorten: float = 0.3,
    per_passage: int = 1,
    kinds: Sequence[str] = KINDS,
) -> list[EditInstance]:
    """Up to ``n`` instances, balanced over ``kinds``, from a seeded shuffle of ``passages``."""
    rng = random.Random(seed)
    nlp = get_nlp()
    docs = list(nlp.pipe([p.text for p in passages], batch_size=64))
    pool = entity_pool(docs)
    sentences = [
        _Sentence(i, passages[i].title, s) for i, doc in enumerate(docs) for s in doc.sents if _usable(s)
    ]
    order = list(range(len(docs)))
    rng.shuffle(order)
    counts = dict.fromkeys(kinds, 0)
    out: list[EditInstance] = []
    for index in order:
        candidates = [s for s in docs[index].sents if _usable(s)]
        rng.shuffle(candidates)
        made = 0
        for sent in candidates:
            if len(out) >= n or made >= per_passage:
                break
            instance = _instance(docs[index], sent, passages[index].title, index, sentences, pool, counts, rng,
                                 negatives, shorten)  # fmt: skip
            if instance is not None:
                out.append(instance)
                counts[instance.type] += 1
                made += 1
        if len(out) >= n:
            break
    return out


def _usable(sent: Span) -> bool:
    text = sent.text.strip()
    return 6 <= len(sent) <= 40 and text.endswith(".") and "\n" not in text and text[:1].isupper()


def _instance(
    doc: Doc,
    sent: Span,
    title: str,
    index: int,
    sentences: Sequence[_Sentence],
    pool: dict[str, list[str]],
    counts: dict[str, int],
    rng: random.Random,
    negatives: int,
    shorten: float,
) -> EditInstance | None:
    statement: Doc | Span = sent
    if rng.random() < shorten and (short := shorten_sentence(sent, rng)) and short.endswith("."):
        statement = get_nlp()(short)
    for kind in sorted(counts, key=lambda k: (counts[k], rng.random())):
        found = corrupt(statement, kind, rng, pool)
        if found is None or found.text.strip() == statement.text.strip():
            continue
        gold = _window(doc, sent, rng)
        evidence = [gold, *_negatives(statement.text, index, sentences, negatives, rng)]
        rng.shuffle(evidence)
        return EditInstance(
            id=f"{title}-{sent.start}-{kind}",
            text=found.text.strip(),
            original=statement.text.strip(),
            evidence=evidence,
            gold=[evidence.index(gold)],
            type=corruption_type(found),
            wrong=found.replacement.strip(),
            right=found.original.strip(),
            doc=title,
        )
    return None


def _window(doc: Doc, sent: Span, rng: random.Random) -> str:
    """The sentence with up to one neighbour on each side, as one evidence snippet."""
    sents = list(doc.sents)
    at = next(i for i, s in enumerate(sents) if s.start == sent.start)
    lo, hi = max(0, at - rng.randint(0, 1)), min(len(sents), at + 1 + rng.randint(0, 1))
    return " ".join(s.text.strip() for s in sents[lo:hi])


def _negatives(
    statement: str, index: int, sentences: Sequence[_Sentence], k: int, rng: random.Random, sample: int = 300
) -> list[str]:
    """One hard negative (most shared terms, another passage) and ``k - 1`` random ones."""
    others = [s for s in sentences if s.doc != index]
    if k <= 0 or not others:
        return []
    picked = rng.sample(others, min(sample, len(others)))
    mine = set(terms(statement))
    hard = max(picked, key=lambda s: len(mine & set(terms(s.span.text))))
    rest = [s for s in picked if s is not hard][: k - 1]
    return [s.span.text.strip() for s in (hard, *rest)]


def write_instances(instances: Iterable[EditInstance], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(out, "w", encoding="utf-8") as fh:
        for instance in instances:
            fh.write(instance.to_json() + "\n")
            count += 1
    return count


def row_fields(row: Mapping[str, Any]) -> tuple[str, list[str], str | None]:
    """(text, evidence texts, context) of an input line; raises on a malformed one."""
    text = row.get("text")
    if not isinstance(text, str):
        raise ValueError(f"a line needs a 'text' string: {dict(row)!r:.200}")
    evidence = row.get("evidence") or []
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ValueError("'evidence' must be a list of strings")
    context = row.get("context")
    return text, evidence, context if isinstance(context, str) and context.strip() else None


def read_lines(path: Path | str) -> Iterator[dict]:
    """JSON objects from a JSON-lines file, or stdin for '-'."""
    import sys

    handle = sys.stdin if str(path) == "-" else open(path, encoding="utf-8")
    try:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
    finally:
        if handle is not sys.stdin:
            handle.close()
