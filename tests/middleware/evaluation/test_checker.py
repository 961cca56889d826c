"""Detection quality of the offline default pipeline on the project's dev set (108 sentences
against the packaged demo corpus). Floors sit a little below what was measured
(``factcheck eval-check tests/data/verify_dev.jsonl``), so a regression fails.

Measured (hybrid verifier with the bundled NLI model, 2026-11-24): entity F1 0.78,
invented 0.50, subjective 0.67, unverifiable 0.37, binary any-error F1 0.83; detection
rate of number errors 0.87, date errors 0.83. Relation errors are not detected yet (F1 0).
"""

from __future__ import annotations

import json

import pytest

from middleware.evidence.index import ensure_demo_index
from middleware.composition.pipeline import build_pipeline_checker
from middleware.evaluation.checker import check_rows, score
from middleware.settings import load_settings
from tests.support.paths import TEST_DATA

DEV = TEST_DATA / "verify_dev.jsonl"

FLOORS = {"entity": 0.70, "invented": 0.45, "subjective": 0.55, "unverifiable": 0.25}


@pytest.fixture(scope="module")
def metrics(tmp_path_factory) -> dict:
    import asyncio

    settings = load_settings(**{"evidence.index_dir": str(tmp_path_factory.mktemp("demo-index"))})
    ensure_demo_index(settings.evidence.index_dir, settings=settings)
    checker = build_pipeline_checker(settings)
    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    reports = asyncio.run(check_rows(checker, rows))
    return score(rows, reports).as_dict()


@pytest.mark.slow
@pytest.mark.parametrize(("type_", "floor"), sorted(FLOORS.items()))
def test_per_type_f1_floor(metrics, type_, floor):
    assert metrics["per_type"][type_]["f1"] >= floor, metrics["per_type"][type_]


@pytest.mark.slow
def test_binary_detection_and_numeric_errors(metrics):
    assert metrics["binary_f1"] >= 0.75
    assert metrics["detected_by_dev_type"]["number"] >= 0.7
    assert metrics["detected_by_dev_type"]["date"] >= 0.7
    assert metrics["fix_accuracy"] >= 0.35  # the suggested replacement equals the corpus value
