"""The model runtime: exported ONNX models served through onnxruntime, one session per model,
one micro-batcher per model shared by every stream. Importing it loads no torch.

The names below are imported when first used (PEP 562), not with the package: a process that
imports one of its modules without the models (``runtime.resolve``, say, for the command
line) does not load onnxruntime and the tokenizers with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from middleware.runtime.batcher import BatcherClosed, MicroBatcher
    from middleware.runtime.embedder import OnnxEmbedder
    from middleware.runtime.loading import clear_models, load_embedder, load_pair_scorer, load_seq2seq
    from middleware.runtime.onnx_session import OnnxSession, ProviderUnavailable, choose_providers, get_session
    from middleware.runtime.resolve import cache_dir, resolve_model
    from middleware.runtime.scorer import OnnxPairScorer
    from middleware.runtime.seq2seq import OnnxSeq2Seq, fuse

_HOMES = {
    "BatcherClosed": "batcher",
    "MicroBatcher": "batcher",
    "OnnxEmbedder": "embedder",
    "OnnxPairScorer": "scorer",
    "OnnxSeq2Seq": "seq2seq",
    "OnnxSession": "onnx_session",
    "ProviderUnavailable": "onnx_session",
    "cache_dir": "resolve",
    "choose_providers": "onnx_session",
    "clear_models": "loading",
    "fuse": "seq2seq",
    "get_session": "onnx_session",
    "load_embedder": "loading",
    "load_pair_scorer": "loading",
    "load_seq2seq": "loading",
    "resolve_model": "resolve",
}

__all__ = [
    "BatcherClosed",
    "MicroBatcher",
    "OnnxEmbedder",
    "OnnxPairScorer",
    "OnnxSeq2Seq",
    "OnnxSession",
    "ProviderUnavailable",
    "cache_dir",
    "choose_providers",
    "clear_models",
    "fuse",
    "get_session",
    "load_embedder",
    "load_pair_scorer",
    "load_seq2seq",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
