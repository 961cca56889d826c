"""The edit gate's ablations (``load_tests.quality.ablate --gate``): one variant per gate rule,
refusals counted by the rule the report names. No model runs here and nothing under ../shared
is read."""

from __future__ import annotations

import pytest

from load_tests.quality.ablate import gate_variants, refused_by
from load_tests.quality.planted import to_result
from middleware.evaluation.planted import Result
from middleware.revise.gate_rules import GATE_RULES
from middleware.settings import Settings
from middleware.types import Revision, SentenceReport, Verdict

pytestmark = pytest.mark.timeout(60)


def test_one_variant_per_rule_keeps_what_is_off_already() -> None:
    settings = Settings()
    settings.pipeline.rules.gate_disabled = ["about_the_claim"]
    variants = gate_variants(settings)
    assert list(variants) == [f"without {rule}" for rule in GATE_RULES if rule != "about_the_claim"]
    off = variants["without same_era"].pipeline.rules.gate_disabled
    assert off == ["about_the_claim", "same_era"]
    assert settings.pipeline.rules.gate_disabled == ["about_the_claim"]  # the configured settings are left alone


def _report(revision: Revision) -> SentenceReport:
    return SentenceReport(index=0, start=0, end=10, text="He won in 1915.", verdict=Verdict(label="contradictory"),
                          revision=revision)  # fmt: skip


def test_refusals_are_counted_by_the_rule_the_report_names() -> None:
    row = {"id": "r1", "sentence": "He won in 1915."}
    refused = Revision(status="flagged", reason="the evidence names 'X' too", rule="name_in_another_role")
    applied = Revision(status="applied", reason="supported")
    results = [to_result(row, _report(refused), 0.1), to_result(row, _report(applied), 0.1)]
    assert "edit flagged by name_in_another_role: the evidence names 'X' too" in (results[0].reason or "")
    assert refused_by(results, "name_in_another_role") == 1
    assert refused_by(results, "name_twice") == 0


def test_results_without_a_refusal_count_for_no_rule() -> None:
    assert refused_by([Result(id="r", verdict="attributable")], "about_the_claim") == 0
