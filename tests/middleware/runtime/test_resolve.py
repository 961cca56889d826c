"""From a model spec to an export directory (``runtime.resolve``): checkpoints exported once into
the cache, int8 made from a cached fp32 export, hub ids, the cache key, the bundled spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.runtime import cache_dir, resolve_model  # noqa: E402
from onnx_models.manifest import read_manifest, sha256_file  # noqa: E402
from tests.support.tiny_exports import settings_for  # noqa: E402


def test_resolver_exports_a_checkpoint_once_and_reuses_it(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    first = resolve_model(str(checkpoints["rerank"]), "rerank", settings)
    assert first == cache_dir(str(checkpoints["rerank"]), "rerank", "int8", settings)
    assert read_manifest(first).quantization == "int8"  # pair_quantize default
    stamp = (first / "model.onnx").stat().st_mtime_ns
    assert resolve_model(str(checkpoints["rerank"]), "rerank", settings) == first
    assert (first / "model.onnx").stat().st_mtime_ns == stamp
    # an export dir is used in place; a damaged cache entry is exported again
    assert resolve_model(str(first), "rerank", settings) == first
    (first / "model.onnx").write_bytes(b"broken")
    again = resolve_model(str(checkpoints["rerank"]), "rerank", settings)
    assert again == first and read_manifest(again).files["model.onnx"] == sha256_file(again / "model.onnx")


def test_resolver_quantises_a_cached_fp32_export_without_torch(
    checkpoints: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx_models.export

    settings = settings_for(tmp_path).model_copy(update={"pair_quantize": "none"})
    plain = resolve_model(str(checkpoints["nli"]), "nli", settings)

    def no_export(*args: object, **kwargs: object) -> None:
        raise AssertionError("the int8 model should come from the cached fp32 export")

    monkeypatch.setattr(onnx_models.export, "export_model", no_export)
    int8 = resolve_model(str(checkpoints["nli"]), "nli", settings, quantize="int8")
    assert int8 != plain and read_manifest(int8).quantization == "int8"


def test_a_hub_id_is_exported_into_the_cache(
    exports: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network here: the exporter is replaced by a copy of a tiny export, to see what the
    resolver asks of it for a hub id."""
    import shutil

    import onnx_models.export

    calls = []

    def fake_export(source: str, task: str, out: Path, quantize: str, max_length: int) -> Path:
        calls.append((source, task, quantize, max_length))
        shutil.copytree(exports["nli-int8"], out)
        return out

    monkeypatch.setattr(onnx_models.export, "export_model", fake_export)
    settings = settings_for(tmp_path)
    first = resolve_model("some-org/some-nli-model", "nli", settings)
    assert first == cache_dir("some-org/some-nli-model", "nli", "int8", settings)
    assert first.name.startswith("some-nli-model-nli-int8-")
    assert resolve_model("some-org/some-nli-model", "nli", settings) == first
    assert calls == [("some-org/some-nli-model", "nli", "int8", 256)]


def test_cache_key_separates_task_quantisation_and_retrained_checkpoints(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    settings = settings_for(tmp_path)
    spec = str(checkpoints["nli"])
    keys = {cache_dir(spec, "nli", q, settings) for q in ("none", "int8")} | {cache_dir(spec, "rerank", "none", settings)}
    assert len(keys) == 3
    before = cache_dir(spec, "nli", "none", settings)
    config = checkpoints["nli"] / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text())), encoding="utf-8")  # a new mtime
    assert cache_dir(spec, "nli", "none", settings) != before


def test_bundled_spec_points_into_the_package(tmp_path: Path) -> None:
    from onnx_models.sources import BUNDLED_DIRS

    if (BUNDLED_DIRS["nli"] / "manifest.json").is_file():
        assert resolve_model("bundled", "nli", settings_for(tmp_path)) == BUNDLED_DIRS["nli"]
    else:
        with pytest.raises(FileNotFoundError, match="not shipped"):
            resolve_model("bundled", "nli", settings_for(tmp_path))
    with pytest.raises(ValueError, match="no bundled model"):
        resolve_model("bundled", "seq2seq", settings_for(tmp_path))
