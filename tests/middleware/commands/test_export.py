"""``factcheck export`` (``middleware.commands.export``) on a tiny random checkpoint built offline."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from onnx_models.manifest import read_manifest  # noqa: E402


def test_export_command_writes_an_export(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from middleware.commands.export import register

    app = typer.Typer()
    app.callback()(lambda: None)  # keep subcommands as subcommands
    register(app)
    out = tmp_path / "cli-export"
    result = CliRunner().invoke(app, ["export", "--model", str(checkpoints["nli"]), "--task", "nli",
                                      "--quantize", "int8", "--out", str(out), "--max-length", "32",
                                      "--labels", "attributable,extrapolatory,contradictory"])
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest.quantization == "int8" and manifest.max_length == 32
    assert manifest.labels == ["attributable", "extrapolatory", "contradictory"]
    bad = CliRunner().invoke(app, ["export", "--model", "x", "--task", "classify"])
    assert bad.exit_code != 0 and "expected one of" in bad.output
