"""Exports of tiny random checkpoints built offline (``onnx_models.export``): what their manifests
say, int8 made from an fp32 export, the label names, and the weight-only int8 copy for GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from onnx_models.export import export_model  # noqa: E402
from onnx_models.manifest import read_manifest, sha256_file  # noqa: E402
from tests.support.tiny_exports import HEAD_LABELS  # noqa: E402


def test_manifest_describes_the_export(exports: dict[str, Path]) -> None:
    nli = read_manifest(exports["nli-int8"])
    assert nli.task == "nli" and nli.quantization == "int8" and nli.labels == HEAD_LABELS
    assert nli.max_length == 64 and nli.opset >= 14
    assert set(nli.files) >= {"model.onnx", "tokenizer.json"}
    for name, digest in nli.files.items():
        assert sha256_file(exports["nli-int8"] / name) == digest
    s2s = read_manifest(exports["seq2seq-fp32"])
    assert s2s.graphs == {"encoder": "encoder.onnx", "decoder": "decoder.onnx"}
    assert s2s.special_tokens == {"pad": 0, "eos": 1, "decoder_start": 0}
    assert read_manifest(exports["embed-fp32"]).pooling == "mean"
    assert read_manifest(exports["embed-fp32"]).fused  # BERT: onnxruntime's attention fusions apply
    assert nli.quantized_graphs == ["model"]
    assert read_manifest(exports["rerank-fp32"]).labels == ["LABEL_0"]


def test_int8_from_an_fp32_export(checkpoints: dict[str, Path], exports: dict[str, Path], tmp_path: Path) -> None:
    derived = read_manifest(exports["rerank-int8"])
    assert derived.quantization == "int8" and derived.source == str(checkpoints["rerank"])
    assert derived.files["tokenizer.json"] == read_manifest(exports["rerank-fp32"]).files["tokenizer.json"]
    with pytest.raises(ValueError, match="already quantised"):
        export_model(exports["rerank-int8"], "rerank", tmp_path / "again", quantize="int8")
    with pytest.raises(ValueError, match="only --quantize int8"):
        export_model(exports["rerank-fp32"], "rerank", tmp_path / "again")


def test_labels_override_and_count_check(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    out = export_model(checkpoints["nli"], "nli", tmp_path / "x", labels=["attributable", "extrapolatory", "c"])
    assert read_manifest(out).labels == ["attributable", "extrapolatory", "c"]
    with pytest.raises(ValueError, match="2 labels"):
        export_model(checkpoints["nli"], "nli", tmp_path / "y", labels=["a", "b"])


def test_an_int8_export_ships_a_weight_only_copy_for_gpus(exports: dict[str, Path]) -> None:
    import onnx

    from onnx_models.weights import is_weight_only

    for task in ("nli", "embed", "seq2seq"):
        manifest = read_manifest(exports[f"{task}-int8"])
        copies = manifest.variants["weights-int8"]
        assert set(copies) == set(manifest.quantized_graphs)
        for role, name in copies.items():
            assert name in manifest.files and name != manifest.graphs[role]
            model = onnx.load(str(exports[f"{task}-int8"] / name))
            assert is_weight_only(model)
            assert not any(n.op_type in ("MatMulInteger", "DynamicQuantizeLinear") for n in model.graph.node)
