"""Factories: from settings to a served model, one shared instance per model and settings, so
every stream of the process feeds the same micro-batcher."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from middleware.runtime.embedder import OnnxEmbedder
from middleware.runtime.ray_client import remote_model
from middleware.runtime.resolve import resolve_model
from middleware.runtime.scorer import OnnxPairScorer
from middleware.runtime.seq2seq import OnnxSeq2Seq
from middleware.settings import RuntimeSettings

_MODELS: dict[tuple[Any, ...], Any] = {}
_LOCK = threading.Lock()


def _shared(kind: str, directory: Path, settings: RuntimeSettings, build: Any) -> Any:
    key = (kind, str(directory.resolve()), settings.model_dump_json())
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = build()
        return model


def load_embedder(settings: RuntimeSettings) -> OnnxEmbedder:
    """The embedder ``settings.embed_model`` names (default: the packaged all-MiniLM-L6-v2,
    exported to ONNX on first use, int8 per ``settings.embed_quantize``). With
    ``settings.backend == "ray"``: the same model on the Ray Serve tier (``ray_client``)."""
    if settings.backend == "ray":
        return remote_model("embed", settings.embed_model, settings)
    directory = resolve_model(settings.embed_model, "embed", settings)
    return _shared("embed", directory, settings, lambda: OnnxEmbedder(directory, settings))


def load_pair_scorer(spec: str, task: str, settings: RuntimeSettings) -> OnnxPairScorer:
    """A cross-encoder for ``task`` ('nli' or 'rerank'); e.g. ``load_pair_scorer(
    settings.nli_model, 'nli', settings)``."""
    if settings.backend == "ray":
        return remote_model(task, spec, settings)
    directory = resolve_model(spec, task, settings)
    return _shared(task, directory, settings, lambda: OnnxPairScorer(directory, settings, task))


def load_seq2seq(spec: str, settings: RuntimeSettings) -> OnnxSeq2Seq:
    if settings.backend == "ray":
        return remote_model("seq2seq", spec, settings)
    directory = resolve_model(spec, "seq2seq", settings)
    return _shared("seq2seq", directory, settings, lambda: OnnxSeq2Seq(directory, settings))


def clear_models() -> None:
    """Forget the shared model instances (tests, reloads). Their batchers are not closed."""
    with _LOCK:
        _MODELS.clear()
