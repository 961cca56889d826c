"""Manifests (``onnx_models.manifest``): a file of an export that no longer matches its sha256
fails verification."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from onnx_models.manifest import ManifestError, read_manifest  # noqa: E402


def test_damaged_file_fails_verification(exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(exports["rerank-int8"], copy)
    with open(copy / "tokenizer.json", "a", encoding="utf-8") as fh:
        fh.write(" ")
    with pytest.raises(ManifestError, match="tokenizer.json"):
        read_manifest(copy)
