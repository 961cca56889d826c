"""Verifier evaluation (``middleware.evaluation.verifier``, ``factcheck eval-verifier``): the command
on a backend that needs no model. No torch, never reads ../shared."""

from __future__ import annotations

import json

from typer import Typer
from typer.testing import CliRunner


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
