"""Which graph a model loads by device and ``runtime.precision``, and the batch limits by
device: pure selection logic, testable without a GPU; then the weight-only int8 copy a GPU
loads, computing on the CPU at fp32 and fp16 (a tiny random export, and the bundled verifier)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from middleware.runtime import OnnxPairScorer
from middleware.runtime.encoder import batch_limits
from middleware.runtime.precision import GPU_DEFAULT, Int8OnCuda, choose_graph, stored_graphs
from middleware.runtime.resolve import default_quantization
from middleware.settings import RuntimeSettings
from onnx_models.manifest import Manifest, read_manifest
from tests.support.tiny_exports import random_pairs


ROOT = Path("/models/verifier")


def manifest(quantization: str = "int8", variants: dict[str, dict[str, str]] | None = None) -> Manifest:
    return Manifest(
        task="nli", source="test", quantization=quantization,
        quantized_graphs=["model"] if quantization == "int8" else [], opset=17, max_length=64,
        labels=["entailment", "neutral", "contradiction"], graphs={"model": "model.onnx"},
        inputs={"model": ["input_ids"]}, outputs={"model": ["logits"]}, variants=variants or {},
    )


SHIPPED = manifest(variants={"weights-int8": {"model": "model.weights-int8.onnx"}})


def test_stored_graphs_lists_every_copy() -> None:
    assert stored_graphs(SHIPPED, "model") == {"int8": "model.onnx", "weights-int8": "model.weights-int8.onnx"}
    assert stored_graphs(manifest("none"), "model") == {"fp32": "model.onnx"}


def test_cpu_auto_takes_the_int8_graph_as_it_is() -> None:
    choice = choose_graph(ROOT, SHIPPED, "model", "cpu", "auto")
    assert (choice.path.name, choice.stored, choice.compute, choice.converted) == ("model.onnx", "int8", "int8", False)


def test_cuda_auto_never_loads_dynamic_int8() -> None:
    choice = choose_graph(ROOT, SHIPPED, "model", "cuda", "auto")
    assert choice.path.name == "model.weights-int8.onnx"
    assert (choice.stored, choice.compute, choice.converted) == ("weights-int8", GPU_DEFAULT, True)
    assert "weights-int8 weights" in choice.describe() and GPU_DEFAULT in choice.describe()


def test_an_fp32_or_fp16_file_is_preferred_to_converting() -> None:
    shipped = manifest(variants={"weights-int8": {"model": "w8.onnx"}, "fp32": {"model": "fp32.onnx"},
                                 "fp16": {"model": "fp16.onnx"}})
    assert choose_graph(ROOT, shipped, "model", "cuda", "fp32").path.name == "fp32.onnx"
    fp16 = choose_graph(ROOT, shipped, "model", "cuda", "fp16")
    assert (fp16.path.name, fp16.converted) == ("fp16.onnx", False)
    from_fp32 = choose_graph(ROOT, manifest("none"), "model", "cuda", "fp16")
    assert (from_fp32.stored, from_fp32.compute) == ("fp32", "fp16")


def test_int8_on_cuda_is_refused_with_the_way_out() -> None:
    with pytest.raises(Int8OnCuda, match="runtime.precision"):
        choose_graph(ROOT, SHIPPED, "model", "cuda", "int8")
    with pytest.raises(Int8OnCuda, match="fp16"):
        choose_graph(ROOT, manifest(), "model", "cuda", "auto")  # an int8-only export


def test_missing_precisions_are_named() -> None:
    with pytest.raises(ValueError, match="no int8 graph"):
        choose_graph(ROOT, manifest("none"), "model", "cpu", "int8")
    with pytest.raises(ValueError, match=r"\['int8'\]"):
        choose_graph(ROOT, manifest(), "model", "cpu", "fp32")


def test_cpu_fp32_folds_the_weight_only_copy() -> None:
    choice = choose_graph(ROOT, SHIPPED, "model", "cpu", "fp32")
    assert (choice.path.name, choice.stored, choice.compute) == ("model.weights-int8.onnx", "weights-int8", "fp32")


def test_batch_limits_follow_the_device() -> None:
    settings = RuntimeSettings(max_batch=16, max_wait_ms=1.0, cuda_max_batch=512, cuda_max_wait_ms=6.0,
                               cuda_batches_in_flight=3)
    cpu, cuda = batch_limits(settings, "cpu"), batch_limits(settings, "cuda")
    assert (cpu.max_batch, cpu.max_wait_ms, cpu.in_flight) == (16, 1.0, 1)
    assert (cuda.max_batch, cuda.max_wait_ms, cuda.in_flight) == (512, 6.0, 3)
    assert cuda.pad_slack > 100 * cpu.pad_slack  # a GPU batch is not cut for padding


def test_exports_for_floating_point_precisions_are_not_quantised() -> None:
    cpu = RuntimeSettings(provider="cpu", pair_quantize="int8", embed_quantize="int8")
    assert default_quantization("nli", cpu) == "int8"
    assert default_quantization("embed", cpu.model_copy(update={"precision": "fp32"})) == "none"
    assert default_quantization("nli", cpu.model_copy(update={"precision": "fp16"})) == "none"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
async def test_the_weight_only_copy_computes_like_the_fp32_export(exports: dict[str, Path], precision: str) -> None:
    """What a GPU would load (weights folded from int8, fp16 if asked) scores as the fp32 export
    does, closer than dynamic int8 does, and a pair's scores do not depend on its batch."""
    pairs = random_pairs(40, seed=21)
    reference = OnnxPairScorer(exports["nli-fp32"], RuntimeSettings(provider="cpu"), "nli").score_sync(pairs)
    settings = RuntimeSettings(provider="cpu", precision=precision)
    scorer = OnnxPairScorer(exports["nli-int8"], settings, "nli")
    assert scorer.session.path.name == "model.weights-int8.onnx" and scorer.session.precision == precision
    assert not scorer.per_sequence
    folded = scorer.score_sync(pairs)
    dynamic = OnnxPairScorer(exports["nli-int8"], RuntimeSettings(provider="cpu"), "nli").score_sync(pairs)
    assert np.abs(folded - reference).max() < 0.02
    assert np.abs(folded - reference).mean() <= np.abs(dynamic - reference).mean()
    alone = np.stack([scorer.score_sync([pair], 1)[0] for pair in pairs[:6]])
    assert np.abs(alone - folded[:6]).max() < (1e-4 if precision == "fp32" else 2e-3)
    await scorer.aclose()


def test_the_bundled_verifier_loads_at_each_precision() -> None:
    """The shipped export: int8 on the CPU by default; the weight-only copy a GPU loads gives
    the same decisions at fp32 and fp16 (checked here on the CPU)."""
    from middleware.runtime.precision import choose_graph
    from onnx_models.sources import bundled_export

    directory = bundled_export("bundled", "nli")
    assert directory is not None
    manifest = read_manifest(directory)
    assert choose_graph(directory, manifest, "model", "cpu", "auto").path.name == "model.onnx"
    assert choose_graph(directory, manifest, "model", "cuda", "auto").path.name == "model.weights-int8.onnx"
    pairs = [("The tower was completed in 1889 for the World's Fair.", "The tower was completed in 1889."),
             ("The tower was completed in 1889 for the World's Fair.", "The tower was completed in 1901."),
             ("Marie Curie was born in Warsaw.", "Marie Curie was born in Paris.")]
    fp32 = OnnxPairScorer(directory, RuntimeSettings(provider="cpu", precision="fp32"), "nli").score_sync(pairs)
    fp16 = OnnxPairScorer(directory, RuntimeSettings(provider="cpu", precision="fp16"), "nli").score_sync(pairs)
    assert np.abs(fp32 - fp16).max() < 0.01
    assert list(fp32.argmax(1)) == [0, 2, 2]
