"""The model runtime: exported ONNX models served through onnxruntime, one session per model,
one micro-batcher per model shared by every stream. Importing it loads no torch."""

from middleware.runtime.batcher import BatcherClosed, MicroBatcher
from middleware.runtime.embedder import OnnxEmbedder
from middleware.runtime.loading import clear_models, load_embedder, load_pair_scorer, load_seq2seq
from middleware.runtime.resolve import cache_dir, resolve_model
from middleware.runtime.scorer import OnnxPairScorer
from middleware.runtime.seq2seq import OnnxSeq2Seq, fuse
from middleware.runtime.onnx_session import OnnxSession, ProviderUnavailable, choose_providers, get_session

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
