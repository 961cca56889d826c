"""Synthetic PURR-style NLI pairs from prose passages (WikiText-2 articles, the demo corpus).

For an evidence window (a sentence with its neighbours) the hypothesis is
- contradiction: one sentence of the window with an entity, number or date swapped;
- entailment: that sentence itself or a shortened version of it;
- neutral: a sentence about the same entity from another passage.
These cover the number/entity/date cases that natural NLI data under-represents.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from spacy.tokens import Doc, Span

from middleware.pipeline.slots import ENTITY_LABELS
from middleware.training import CONTRADICTION, ENTAILMENT, NEUTRAL
from middleware.training.corruption import corrupt_sentence, entity_pool, shorten_sentence
from middleware.training.verifier_data import Pair, clean_text

_WIKI_TITLE = re.compile(r"^ = [^=].* = $")
_WIKI_HEADING = re.compile(r"^ =( =)+ .* =( =)+ $")
_MD_SKIP = re.compile(r"^(#|---|```|\s*[-*|>]|\s*\d+\.\s)")


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


def wikitext_passages(path: Path) -> Iterator[Passage]:
    """Paragraphs of a WikiText ``*.tokens`` file, detokenised, titled by their article."""
    title = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if _WIKI_TITLE.match(line):
            title = line.strip(" =")
        elif line.strip() and not _WIKI_HEADING.match(line):
            yield from _known_runs(title, line)


def _known_runs(title: str, line: str) -> Iterator[Passage]:
    """Runs of consecutive sentences free of ``<unk>`` (WikiText's rare-word mark)."""
    run: list[str] = []
    for sentence in re.split(r"(?<= \.) (?=[A-Z\"])", line.strip()) + ["<unk>"]:
        if "<unk>" in sentence:
            if run:
                yield Passage(title, clean_text(" ".join(run)))
            run = []
        else:
            run.append(sentence)


def markdown_passages(root: Path) -> Iterator[Passage]:
    """Prose paragraphs of every ``*.md`` under ``root`` (headings, lists, tables skipped)."""
    for path in sorted(root.rglob("*.md")):
        paragraphs = re.split(r"\n\s*\n", path.read_text(encoding="utf-8"))
        for para in paragraphs:
            lines = [ln for ln in para.splitlines() if ln.strip() and not _MD_SKIP.match(ln)]
            if lines:
                yield Passage(path.stem, " ".join(ln.strip() for ln in lines))


def build_synthetic(
    passages: Sequence[Passage],
    nlp,
    per_label: int,
    seed: int,
    max_passages: int | None = None,
) -> list[Pair]:
    """About ``per_label`` pairs of each label from ``passages`` (a seeded sample of at most
    ``max_passages`` of them is parsed)."""
    rng = random.Random(seed)
    chosen = list(passages)
    rng.shuffle(chosen)
    chosen = [p for p in chosen if len(p.text.split()) >= 12][: max_passages or len(chosen)]
    docs = list(nlp.pipe((p.text for p in chosen), batch_size=64))
    pool = entity_pool(docs)
    mentions = _mentions(docs)
    out: dict[int, list[Pair]] = {ENTAILMENT: [], NEUTRAL: [], CONTRADICTION: []}
    for index, doc in enumerate(docs):
        sents = [s for s in doc.sents if 6 <= len(s) <= 45]
        for sent in sents:
            window = _window(doc, sent, rng)
            label = min(out, key=lambda k: len(out[k]))
            if len(out[label]) >= per_label:
                break
            pair = _make(label, window, sent, index, mentions, pool, rng, chosen[index].title)
            if pair is not None:
                out[label].append(pair)
    return [p for label in (ENTAILMENT, NEUTRAL, CONTRADICTION) for p in out[label]]


def _make(label, window, sent, index, mentions, pool, rng, title) -> Pair | None:
    hypothesis: str | None
    if label == CONTRADICTION:
        found = corrupt_sentence(sent, "any", rng, pool)
        hypothesis = found.text if found else None
    elif label == ENTAILMENT:
        hypothesis = shorten_sentence(sent, rng) if rng.random() < 0.75 else None
        hypothesis = hypothesis or sent.text
    else:
        hypothesis = _neutral(sent, index, mentions, rng, window)
    if not hypothesis:
        return None
    return Pair(window, hypothesis.strip(), label, source="synthetic", id=f"{title}|{index}|{sent.start}|{label}")


def _mentions(docs: Sequence[Doc]) -> dict[str, list[tuple[int, Span]]]:
    """Entity text -> (doc index, sentence) for every entity mention."""
    index: dict[str, list[tuple[int, Span]]] = {}
    for i, doc in enumerate(docs):
        for ent in doc.ents:
            if ent.label_ in ENTITY_LABELS and 6 <= len(ent.sent) <= 45:
                index.setdefault(ent.text, []).append((i, ent.sent))
    return index


def _neutral(sent: Span, index: int, mentions, rng: random.Random, window: str) -> str | None:
    ents = [e for e in sent.ents if e.label_ in ENTITY_LABELS]
    rng.shuffle(ents)
    for ent in ents:
        others = [s for i, s in mentions.get(ent.text, ()) if i != index and s.text not in window]
        if others:
            return rng.choice(others).text
    return None


def _window(doc: Doc, sent: Span, rng: random.Random, max_words: int = 90) -> str:
    """The sentence with up to two neighbours, so the hypothesis must be found in context."""
    sents = list(doc.sents)
    at = next(i for i, s in enumerate(sents) if s.start == sent.start)
    lo = max(0, at - rng.randint(0, 1))
    hi = min(len(sents), at + 1 + rng.randint(0, 1))
    text = " ".join(s.text for s in sents[lo:hi])
    return text if len(text.split()) <= max_words else sent.text


def load_passages(wikitext: Iterable[Path], markdown_roots: Iterable[Path]) -> list[Passage]:
    passages: list[Passage] = []
    for path in wikitext:
        passages.extend(wikitext_passages(path))
    for root in markdown_roots:
        passages.extend(markdown_passages(root))
    return passages
