"""The served pair scorer (``runtime.scorer``) on tiny random exports: fp32 parity with PyTorch
(atol 1e-4), a pair's scores independent of its batch, batched and sync paths agreeing, and
tokenisation in the batcher's thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.runtime import OnnxPairScorer  # noqa: E402
from middleware.settings import RuntimeSettings  # noqa: E402
from tests.support.tiny_exports import HEAD_LABELS, _torch_inputs, random_pairs  # noqa: E402


@pytest.mark.parametrize("task", ["nli", "rerank"])
def test_classifier_fp32_matches_pytorch(task: str, checkpoints: dict[str, Path], exports: dict[str, Path]) -> None:
    pairs = random_pairs(24, seed=2)
    model = transformers.BertForSequenceClassification.from_pretrained(str(checkpoints[task])).eval()
    with torch.no_grad():
        logits = model(**_torch_inputs(checkpoints[task], pairs, pairs=True)).logits
    expected = torch.softmax(logits, -1) if task == "nli" else torch.sigmoid(logits)
    scorer = OnnxPairScorer(exports[f"{task}-fp32"], RuntimeSettings(provider="cpu"), task)
    np.testing.assert_allclose(scorer.score_sync(pairs, batch_size=5), expected.numpy(), atol=1e-4)
    assert scorer.labels == (HEAD_LABELS if task == "nli" else ["relevance"])


@pytest.mark.parametrize("precision", ["int8", "fp32"])
async def test_a_pair_scores_the_same_alone_and_in_any_batch(exports: dict[str, Path], precision: str) -> None:
    """Dynamic int8 scales activations per input tensor: batched with other users' pairs (of
    other lengths, so with padding) a pair must still get the probabilities it gets alone."""
    scorer = OnnxPairScorer(exports[f"nli-{precision}"], RuntimeSettings(provider="cpu"), "nli")
    pairs = random_pairs(40, seed=11)
    alone = np.stack([scorer.score_sync([pair], 1)[0] for pair in pairs[:8]])
    in_batches = scorer.score_sync(pairs[:8] + pairs[8:], 16)[:8]
    through_batcher = (await asyncio.gather(*(scorer.score([p]) for p in pairs)))[:8]
    assert np.abs(alone - in_batches).max() <= 1e-4
    assert np.abs(alone - np.concatenate(through_batcher)).max() <= 1e-4
    assert scorer.per_sequence == (precision == "int8")
    await scorer.aclose()


async def test_batched_and_sync_paths_agree(exports: dict[str, Path]) -> None:
    import asyncio

    scorer = OnnxPairScorer(exports["rerank-fp32"], RuntimeSettings(provider="cpu", max_batch=4), "rerank")
    pairs = random_pairs(20, seed=10)
    together = await asyncio.gather(*(scorer.score([p]) for p in pairs))
    np.testing.assert_allclose(np.concatenate(together), scorer.score_sync(pairs), atol=1e-5)
    await scorer.aclose()


async def test_served_models_tokenise_in_the_batcher_thread(exports: dict[str, Path]) -> None:
    import threading

    scorer = OnnxPairScorer(exports["nli-fp32"], RuntimeSettings(provider="cpu"), "nli")
    threads: list[int] = []
    encode_pairs = scorer.tokenizer.encode_pairs

    def recording(pairs: list[tuple[str, str]]) -> list[object]:
        threads.append(threading.get_ident())
        return encode_pairs(pairs)

    scorer.tokenizer.encode_pairs = recording  # type: ignore[method-assign]
    await scorer.score(random_pairs(3, seed=5))
    assert threads and threading.get_ident() not in threads
    await scorer.aclose()
