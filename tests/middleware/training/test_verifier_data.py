"""The verifier's training data: labels (two-class sets stay two-class), FEVER and SNLI artefacts
undone, a stable stratified premise-disjoint dev split, and a teacher's probabilities attached
one row per pair. Never reads ../shared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from middleware.types import NLI_HEAD_LABELS
from middleware.training.verifier_data import NOT_ENTAILMENT, Pair, clean_text, label_id, read_pairs, split_dev


def _write_pairs(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_two_class_labels_stay_two_class(tmp_path):
    path = _write_pairs(
        tmp_path / "med" / "pairs.jsonl",
        [
            {
                "premise": "No delegate finished the report on time.",
                "hypothesis": "No delegate finished the report.",
                "label": "not_entailment",
                "id": "1",
            },
            {
                "premise": "An Irishman won the prize.",
                "hypothesis": "An Irishman won a prize.",
                "label": "entailment",
                "id": "2",
            },
        ],
    )
    pairs = read_pairs(path)
    assert [p.label for p in pairs] == [NOT_ENTAILMENT, NLI_HEAD_LABELS.index("entailment")]
    assert pairs[0].source == "med"
    assert label_id("neutral") == NLI_HEAD_LABELS.index("neutral") and label_id("contradiction") == 2
    with pytest.raises(ValueError):
        label_id("maybe")


def test_clean_text_undoes_fever_and_snli_artefacts():
    assert (
        clean_text("Soul Food -LRB- film -RRB- was released by Fox , in 1997 .")
        == "Soul Food (film) was released by Fox, in 1997."
    )
    assert clean_text("Kenneth `` Babyface '' Edmonds does n't sing") == 'Kenneth "Babyface" Edmonds doesn\'t sing'
    assert clean_text("a 60 @-@ year @,@ old 2 @.@ 5") == "a 60-year,old 2.5"


def test_dev_split_is_stable_stratified_and_premise_disjoint():
    pairs = [Pair(f"premise {i // 3}", f"hyp {i}", i % 3, source="s" + str(i % 2), id=str(i)) for i in range(600)]
    train, dev = split_dev(pairs, 60, seed=1)
    assert set(split_dev(list(reversed(pairs)), 60, seed=1)[1]) == set(dev)  # order-independent
    assert set(split_dev(pairs, 60, seed=2)[1]) != set(dev)
    assert 50 <= len(dev) <= 70
    assert {(p.source, p.label) for p in dev} == {(s, lab) for s in ("s0", "s1") for lab in range(3)}
    assert not {p.premise for p in dev} & {p.premise for p in train}


def test_attach_probabilities_needs_one_row_per_pair():
    from middleware.training.verifier_data import Pair, attach_probabilities

    pairs = [Pair("a", "b", 0), Pair("c", "d", 2)]
    taught = attach_probabilities(pairs, [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert [p.soft for p in taught] == [(0.7, 0.2, 0.1), (0.1, 0.1, 0.8)]
    with pytest.raises(ValueError, match="2 pairs"):
        attach_probabilities(pairs, [[1.0, 0.0, 0.0]])
