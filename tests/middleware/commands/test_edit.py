"""``factcheck edit``: its JSON lines output (text, edits, FAVA markup) is stable, and a bad record fails."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from middleware.cli import app
from middleware.pipeline.fava import parse


def test_edit_command_output_is_stable(tmp_path) -> None:
    lines = [
        {"text": "The Great Fire of London began in September 1606. It destroyed much of the city.",
         "evidence": ["The Great Fire of London burned from 2 to 6 September 1666.", "Tea is a drink."]},
        {"text": "Paris is the capital of France.", "evidence": ["Paris is the capital of France."], "context": "Q?"},
    ]  # fmt: skip
    runner = CliRunner()
    result = runner.invoke(app, ["edit", "-"], input="\n".join(json.dumps(x) for x in lines) + "\n")
    assert result.exit_code == 0, result.output
    first, second = [json.loads(line) for line in result.stdout.splitlines()]
    assert set(first) == {"text", "edits", "fava"}
    assert first["text"] == lines[0]["text"].replace("1606", "1666")
    [edit] = first["edits"]
    assert set(edit) == {"start", "end", "original", "replacement", "tag", "evidence_index"}
    assert (edit["original"], edit["replacement"], edit["tag"], edit["evidence_index"]) == ("1606", "1666", "entity", 0)
    assert lines[0]["text"][edit["start"] : edit["end"]] == "1606"
    fava = parse(first["fava"])
    assert fava.original == lines[0]["text"] and fava.edited == first["text"]
    assert "<unverifiable>It destroyed much of the city.</unverifiable>" in first["fava"]
    assert second == {"text": lines[1]["text"], "edits": [], "fava": lines[1]["text"]}
    bad = runner.invoke(app, ["edit", "-"], input='{"evidence": []}\n')
    assert bad.exit_code != 0
