"""Settings that cannot break the server (issue 47): every numeric setting is bounded, a
value out of bounds is an error at start-up naming the setting (from overrides, the
environment or the file, and on the command line as one line, no traceback), and
``load_settings(config=...)`` leaves the process's environment alone. The workers' ``auto``
defaults: tests/middleware/test_machine.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from middleware.chat.checked_stream import whole_answer_budget
from middleware.settings import Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = [name for name, field in Settings.model_fields.items()
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)]


def numeric_fields() -> list[tuple[str, dict[str, Any]]]:
    """Every int or float setting (dotted name, its JSON schema), the values of a mapping of
    numbers and the number of an optional one included."""
    found = []
    for section in SECTIONS:
        schema = Settings.model_fields[section].annotation.model_json_schema()  # type: ignore[union-attr]
        for name, prop in schema["properties"].items():
            for branch in [prop, *prop.get("anyOf", []), prop.get("additionalProperties") or {}]:
                if branch.get("type") in ("integer", "number"):
                    found.append((f"{section}.{name}", {**branch, "description": prop.get("description")}))
    return found


def test_every_numeric_setting_has_both_bounds_and_says_them() -> None:
    """Before: 44 of 64 numeric settings had no bounds (``check.max_checks_per_stream: 0``
    divided by zero)."""
    fields = numeric_fields()
    assert len(fields) >= 64
    unbounded = [name for name, schema in fields
                 if not ({"minimum", "exclusiveMinimum"} & schema.keys() and {"maximum", "exclusiveMaximum"} & schema.keys())]
    assert unbounded == []
    assert [name for name, schema in fields if not schema["description"]] == []


@pytest.mark.parametrize(("setting", "value"), [
    ("check.max_checks_per_stream", 0), ("check.max_checks_global", 0), ("check.sentence_budget_s", 0),
    ("server.port", 70_000), ("server.max_json_depth", 100_000), ("upstream.read_timeout_s", 0),
    ("evidence.relevance_dense_weight", 2), ("evidence.passage_stride", 0), ("pipeline.cqgen_temperature", 5),
    ("runtime.max_batch", 0), ("server.workers", 0), ("check.workers", -1),
])
def test_a_value_out_of_bounds_is_an_error_naming_the_setting(setting: str, value: float) -> None:
    with pytest.raises(SettingsError, match=rf"^invalid settings: {setting.replace('.', '[.]')}: "):
        load_settings(**{setting: value})


def test_the_environment_and_the_file_are_checked_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTCHECK_EVIDENCE__SEARCH_RETRIES", "99")
    with pytest.raises(SettingsError, match="evidence.search_retries"):
        load_settings()
    monkeypatch.delenv("FACTCHECK_EVIDENCE__SEARCH_RETRIES")
    config = tmp_path / "factcheck.yaml"
    config.write_text("server:\n  max_concurrent_streams: 0\n")
    with pytest.raises(SettingsError, match="server.max_concurrent_streams") as refused:
        load_settings(config)
    assert "(got 0)" in str(refused.value)


def test_no_check_slot_per_stream_is_refused_not_divided_by() -> None:
    """``check.max_checks_per_stream: 0`` made a non-stream answer's budget a division by
    zero (``whole_answer_budget``); now it cannot be set, and 1 works."""
    with pytest.raises(SettingsError):
        load_settings(**{"check.max_checks_per_stream": 0})
    one = load_settings(**{"check.max_checks_per_stream": 1, "check.sentence_budget_s": 2.0}).check
    assert whole_answer_budget(one, "Paris is in France. It is big. Lyon is too.") == 6.0


def test_serve_refuses_a_bad_setting_in_one_line_naming_it(tmp_path: Path) -> None:
    """Before: ``factcheck serve`` started with ``check.max_checks_per_stream: 0``."""
    env = {**os.environ, "FACTCHECK_CHECK__MAX_CHECKS_PER_STREAM": "0", "FACTCHECK_CHECK__CHECKER": "none",
           "FACTCHECK_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "middleware.cli", "serve", "--port", "0", "--upstream-url",
                           "http://127.0.0.1:9/v1"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "factcheck: invalid settings: check.max_checks_per_stream: Input should be greater than or equal to 1 (got '0')"]


def test_a_config_file_is_read_without_touching_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``load_settings(config=...)`` set ``FACTCHECK_CONFIG``, so every later
    ``load_settings()`` in the process read that file too."""
    monkeypatch.delenv("FACTCHECK_CONFIG", raising=False)
    config = tmp_path / "factcheck.yaml"
    config.write_text("check:\n  sentence_budget_s: 2.5\n")
    before = dict(os.environ)
    assert load_settings(config).check.sentence_budget_s == 2.5
    assert dict(os.environ) == before
    assert load_settings().check.sentence_budget_s == 1.5
    monkeypatch.setenv("FACTCHECK_CONFIG", str(config))  # the variable still names a file
    assert load_settings().check.sentence_budget_s == 2.5


def test_a_secret_out_of_place_is_not_shown_in_the_error() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(**{"upstream.api_key": ["sk-not-a-string-but-a-secret"]})
    assert "upstream.api_key" in str(refused.value) and "sk-not-a-string" not in str(refused.value)
