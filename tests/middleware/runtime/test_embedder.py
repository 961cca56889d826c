"""The served embedder (``runtime.embedder``) on tiny random exports: fp32 parity with PyTorch
(atol 1e-4), int8 staying close, and the served wrappers satisfying the interfaces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.interfaces import Embedder, PairScorer  # noqa: E402
from middleware.runtime import OnnxEmbedder, OnnxPairScorer  # noqa: E402
from middleware.settings import RuntimeSettings  # noqa: E402
from tests.support.tiny_exports import _torch_inputs, random_texts  # noqa: E402


def test_embed_fp32_matches_pytorch(checkpoints: dict[str, Path], exports: dict[str, Path]) -> None:
    texts = random_texts(24, seed=1)
    model = transformers.BertModel.from_pretrained(str(checkpoints["embed"])).eval()
    inputs = _torch_inputs(checkpoints["embed"], texts)
    with torch.no_grad():
        hidden = model(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    embedder = OnnxEmbedder(exports["embed-fp32"], RuntimeSettings(provider="cpu"))
    got = embedder.embed_sync(texts, batch_size=7)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_int8_embeddings_stay_close(exports: dict[str, Path]) -> None:
    texts = random_texts(100, seed=4)
    fp32 = OnnxEmbedder(exports["embed-fp32"], RuntimeSettings(provider="cpu")).embed_sync(texts)
    int8 = OnnxEmbedder(exports["embed-int8"], RuntimeSettings(provider="cpu")).embed_sync(texts)
    cosine = (fp32 * int8).sum(1)
    assert cosine.min() > 0.95, cosine.min()
    # nearest neighbours (argmax of similarity to the other texts) mostly survive quantisation
    sim32, sim8 = fp32 @ fp32.T - 2 * np.eye(100), int8 @ int8.T - 2 * np.eye(100)
    assert (sim32.argmax(1) == sim8.argmax(1)).mean() >= 0.95


async def test_wrappers_satisfy_the_interfaces(exports: dict[str, Path]) -> None:
    embedder = OnnxEmbedder(exports["embed-int8"], RuntimeSettings(provider="cpu"))
    scorer = OnnxPairScorer(exports["nli-int8"], RuntimeSettings(provider="cpu"), "nli")
    assert isinstance(embedder, Embedder) and isinstance(scorer, PairScorer)
    assert embedder.dim == 32
    rows = await embedder.embed(["the tower", "a river flows into the sea"])
    assert rows.shape == (2, 32) and rows.dtype == np.float32
    assert (await embedder.embed([])).shape == (0, 32)
    probs = await scorer.score([("the tower is in paris", "the tower is in london")])
    assert probs.shape == (1, 3) and abs(float(probs.sum()) - 1.0) < 1e-5
    await embedder.aclose()
    await scorer.aclose()
