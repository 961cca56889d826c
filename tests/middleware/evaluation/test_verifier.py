"""Verifier evaluation (``middleware.evaluation.verifier``, ``factcheck eval-verifier``): the
one balanced accuracy, the WiCE and FEVER-Symmetric loaders, the dev-split metrics, and the
command on a backend that needs no model. No torch, never reads ../shared."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer import Typer
from typer.testing import CliRunner

from middleware.training.verifier_data import NOT_ENTAILMENT, Pair
from middleware.evaluation.verifier import Result
from middleware.training.claim_sets import load_fever_symmetric, load_wice
from middleware.training.metrics import balanced_accuracy, dev_metrics


def test_balanced_accuracy_is_the_mean_recall_of_the_classes_gold_has() -> None:
    assert balanced_accuracy([True, True, False, False], [True, False, False, False]) == pytest.approx(0.75)
    assert balanced_accuracy([True, True], [True, False]) == pytest.approx(0.5)
    result = Result("set", "backend", ["attributable", "contradictory", "extrapolatory", "extrapolatory"],
                    ["attributable", "attributable", "extrapolatory", "contradictory"])  # fmt: skip
    assert result.balanced_accuracy == pytest.approx(0.5 * (1 + 2 / 3)) and result.three_way_accuracy == 0.5


def test_loaders(tmp_path) -> None:  # noqa: ANN001
    fever = tmp_path / "fever.jsonl"
    fever.write_text(
        json.dumps({"claim": "Cruz modelled .", "evidence": "Cruz -LRB- born 1974 -RRB- modelled .", "label": "SUPPORTS"})
        + "\n"
    )
    (example,) = load_fever_symmetric(tmp_path)
    assert example.claim == "Cruz modelled." and example.evidence == ["Cruz (born 1974) modelled."]
    assert example.gold == "attributable"
    wice = tmp_path / "wice.jsonl"
    wice.write_text(
        json.dumps({"claim": "c", "evidence": [f"s{i}" for i in range(6)], "label": "partially_supported"}) + "\n"
    )
    (example,) = load_wice(wice)
    assert example.evidence == ["s0\ns1\ns2\ns3", "s4\ns5"] and example.gold == "extrapolatory"


def test_dev_metrics() -> None:
    pairs = [Pair("p", "h", 0, "x"), Pair("p", "h", 2, "x"), Pair("p", "h", NOT_ENTAILMENT, "med")]
    probs = np.asarray([[0.9, 0.05, 0.05], [0.5, 0.2, 0.3], [0.2, 0.7, 0.1]])
    metrics = dev_metrics(pairs, probs)
    assert metrics["acc3_x"] == 0.5 and metrics["acc2_med"] == 1.0


def test_eval_verifier_runs_a_backend_on_both_sets(tmp_path) -> None:  # noqa: ANN001
    from middleware.evaluation.commands import register

    app = Typer()
    register(app)
    evidence = "The museum opened in 1900 ."
    fever = tmp_path / "fever.jsonl"
    fever.write_text(
        "".join(
            json.dumps({"claim": f"The museum opened in {year} .", "evidence": evidence, "label": label}) + "\n"
            for year, label in ((1900, "SUPPORTS"), (1950, "REFUTES"))
        )
    )
    wice = tmp_path / "wice.jsonl"
    wice.write_text(
        json.dumps({"claim": "The museum opened in 1900.", "evidence": ["Intro.", evidence], "label": "supported"})
        + "\n"
    )
    result = CliRunner().invoke(
        app, ["eval-verifier", "--backend", "slots", "--wice", str(wice), "--fever-symmetric", str(fever)]
    )
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)["backends"]["slots"]
    assert scores["wice"]["records"] == 1 and scores["fever_symmetric"]["records"] == 2
    assert scores["fever_symmetric"]["predicted"].get("attributable") == 1
    assert "dev" not in json.loads(result.stdout)
