"""Fitting the learned decision: weights that the run-time combiner reproduces, thresholds
chosen out of fold, the precision cut-off, and leave-one-dataset-out folds (synthetic rows)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from middleware.pipeline.verifiers.combiner import Combiner
from middleware.training import combiner as cb


def _rows(n: int = 240, seed: int = 5) -> list[cb.Row]:
    """Three sets where ``signal`` separates attributable rows and ``contra`` marks
    contradictions of the NLI-like set; ``noise`` carries nothing."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        dataset = ("expertqa", "summedits", "vitaminc")[i % 3]
        gold = rng.choice(["attributable", "extrapolatory", "contradictory"] if dataset == "vitaminc" else ["attributable", "extrapolatory"])
        features = {
            "signal": (1.0 if gold == "attributable" else -1.0) + rng.gauss(0, 0.8),
            "contra": (1.5 if gold == "contradictory" else 0.0) + rng.gauss(0, 0.5),
            "noise": rng.gauss(0, 1),
        }
        split = "test" if dataset != "vitaminc" and i % 5 == 0 else "train"
        rows.append(cb.Row(f"{dataset}-g{i % 17}-{i}", dataset, f"{dataset}-g{i % 17}", split, gold, "extrapolatory", features))
    return rows


def test_weights_round_trip_into_the_run_time_combiner() -> None:
    rows = [r for r in _rows() if r.split != "test"]
    names = ["signal", "contra", "noise"]
    model = cb.fit(rows, names)
    weights = cb.to_weights(model, {"attributable": 0.5, "contradictory": 0.8, "edit": 0.9}, "synthetic", {})
    combiner = Combiner(weights)
    x = cb.matrix(rows[:20], names)
    expected_a, expected_c = model.p_attributable(x), model.p_contradictory(x)
    got_a = [combiner.p_attributable(r.features) for r in rows[:20]]
    got_c = [combiner.p_contradictory(r.features) for r in rows[:20]]
    assert np.allclose(got_a, expected_a, atol=1e-6) and np.allclose(got_c, expected_c, atol=1e-6)
    used = [f for tree in weights.attributable.trees for f in tree.feature if f]
    assert used.count("signal") > used.count("noise")


def test_precision_threshold() -> None:
    gold = np.asarray([True] * 10 + [False] + [True] * 5 + [False] * 20)
    p = np.linspace(1, 0, len(gold))
    cut = cb.precision_threshold(gold, p, 0.9, min_support=5)
    chosen = p >= cut
    assert gold[chosen].mean() >= 0.9 and chosen.sum() == 16
    assert cb.precision_threshold(np.zeros(10, bool), np.linspace(1, 0, 10)) == 1.0


def test_thresholds_and_leave_one_out_on_separable_rows() -> None:
    rows = _rows()
    fitting = [r for r in rows if r.split != "test"]
    names = ["signal", "contra", "noise"]
    cuts = cb.thresholds(fitting, names)
    assert 0.0 < cuts["attributable"] < 1.0 and cuts["oof_mean_balanced_accuracy"] > 80
    folds = cb.leave_one_out(rows, names)
    assert set(folds) == {"expertqa", "summedits", "vitaminc"}
    assert all(f["combiner"] > 75 for f in folds.values())
    assert folds["expertqa"]["n"] == sum(r.dataset == "expertqa" and r.split == "test" for r in rows)


def test_feature_names_add_the_rules_that_fired() -> None:
    rows = _rows(12)
    rows[0].features["rule:negation"] = 1.0
    assert cb.feature_names(rows)[-1] == "rule:negation"


def test_rows_round_trip(tmp_path) -> None:  # noqa: ANN001
    rows = _rows(6)
    cb.write_rows(rows, tmp_path / "rows.jsonl")
    assert cb.read_rows(tmp_path / "rows.jsonl") == rows


@pytest.mark.parametrize("value", [True, False])
def test_sample_weights_balance_sets_and_classes(value: bool) -> None:
    rows = _rows(60)
    positive = np.asarray([(r.gold == "attributable") == value for r in rows])
    weights = cb._sample_weights(rows, positive)
    for name in {r.dataset for r in rows}:
        index = np.asarray([r.dataset == name for r in rows])
        assert weights[index & positive].sum() == pytest.approx(weights[index & ~positive].sum())


def test_linear_weights_round_trip_into_the_run_time_combiner() -> None:
    rows = [r for r in _rows() if r.split != "test"]
    names = ["signal", "contra", "noise"]
    choice = cb.LinearChoice("signal only", ("signal",), 0.1)
    model = cb.fit(rows, names, choice)
    weights = cb.to_weights(model, {"attributable": 0.5, "contradictory": 0.8, "edit": 0.9}, "synthetic", {})
    assert set(weights.attributable.coefficients) == {"signal"}  # type: ignore[union-attr]
    combiner = Combiner(weights)
    expected = model.p_attributable(cb.matrix(rows[:20], names))
    got = [combiner.p_attributable(r.features) for r in rows[:20]]
    assert np.allclose(got, expected, atol=1e-6)
    assert weights.attributable.coefficients["signal"] > 0  # type: ignore[union-attr]


def test_select_linear_prefers_the_family_that_holds_across_sets() -> None:
    rows = _rows(360)
    names = ["signal", "contra", "noise"]
    families = {"noise": ("noise",), "signal": ("signal",), "both": ("signal", "noise")}
    choice, table = cb.select_linear(rows, names, families)
    assert choice.family in ("signal", "both") and choice.features == families[choice.family]
    assert len(table) == len(families) * len(cb.STRENGTHS)
    noise = [row for row in table if row["family"] == "noise"]
    assert all(row["wins"] <= min(r["wins"] for r in table if r["family"] == "signal") for row in noise)
    assert all(abs(v - 50) < 15 for row in noise for v in row["folds"].values())


def test_linear_leave_one_out_and_thresholds() -> None:
    rows = _rows()
    names = ["signal", "contra", "noise"]
    choice = cb.LinearChoice("signal", ("signal",), 0.1)
    cuts = cb.thresholds([r for r in rows if r.split != "test"], names, choice)
    assert 0.0 < cuts["attributable"] < 1.0 and cuts["oof_mean_balanced_accuracy"] > 80
    assert all(f["combiner"] > 75 for f in cb.leave_one_out(rows, names, choice).values())
