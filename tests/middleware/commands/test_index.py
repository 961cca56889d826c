"""``factcheck index`` and ``factcheck search`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import middleware.commands.index as commands
from middleware.evidence.index import LocalIndex
from middleware.evidence.portrait import DataPortrait
from tests.support.evidence_doubles import HashEmbedder, write_corpus


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    embedder = HashEmbedder()
    monkeypatch.setattr(commands, "_load_embedder", lambda settings: embedder)
    app = typer.Typer()
    commands.register(app)
    return app


def test_index_then_search(app: typer.Typer, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    directory = tmp_path / "index"
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(corpus), "--index", str(directory)])
    assert result.exit_code == 0, result.output
    assert "4 added" in result.output and "0 skipped" in result.output
    assert DataPortrait.load(directory) is not None

    again = runner.invoke(app, ["index", str(corpus), "--index", str(directory)])
    assert "4 unchanged" in again.output and "0 embedded" in again.output and "passages/s" in again.output

    found = runner.invoke(app, ["search", "How high is Mount Fuji?", "--index", str(directory), "-k", "2"])
    assert found.exit_code == 0, found.output
    assert "Mount Fuji" in found.output and "3,776" in found.output
    assert "2 of" in found.output


def test_index_reports_skipped_files_and_custom_jsonl_fields(app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    (tmp_path / "docs" / "a.jsonl").write_text(json.dumps({"body": "Onyx is a banded stone.", "name": "Onyx"}))
    directory = tmp_path / "index"
    result = CliRunner().invoke(
        app, ["index", str(tmp_path / "docs"), "--index", str(directory), "--text-field", "body",
              "--title-field", "name", "--no-dense"],
    )
    assert result.exit_code == 0, result.output
    assert "1 skipped" in result.output and "bad.txt" in result.output
    with LocalIndex(directory) as local:
        assert local.embedded_with == ""
        assert local.search("onyx stone", 1)[0].title == "Onyx"
    found = CliRunner().invoke(app, ["search", "onyx", "--index", str(directory)])
    assert found.exit_code == 0 and "Onyx" in found.output


def test_search_without_an_index_fails_clearly(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["search", "anything", "--index", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert "factcheck index" in result.output
    assert not (tmp_path / "none").exists()
