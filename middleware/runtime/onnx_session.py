"""onnxruntime sessions: provider choice, thread settings, and one session per model file.

``load_graph`` picks the file of an export for the device and ``runtime.precision``
(``middleware.runtime.precision``) and logs which file and precision it loaded. Sessions are
shared process-wide (``get_session``), keyed by file, precision, provider and thread
settings; ``InferenceSession.run`` is thread-safe, so the batchers' worker threads and offline
jobs use the same session. On CUDA inputs and outputs go through IO binding, and inputs that
are reused across calls (a decoder's encoder states) can be placed on the device once.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from middleware.runtime.cpu import EXACT_INT8_PRODUCTS, exact_int8_switch_needed
from middleware.runtime.precision import Device, GraphChoice, Int8OnCuda, choose_graph
from middleware.settings import RuntimeSettings
from middleware.telemetry import disable_onnxruntime_events
from onnx_models.manifest import Manifest
from onnx_models.weights import prepared_graph

log = logging.getLogger(__name__)
disable_onnxruntime_events()  # ORT_DISABLE_TELEMETRY was set before the import (middleware/__init__.py)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


class ProviderUnavailable(RuntimeError):
    """The configured execution provider cannot run here."""


def _cuda_help(detail: str) -> str:
    return (
        f"runtime.provider is 'cuda' but {detail}. CUDA needs the onnxruntime-gpu package "
        "(pip uninstall onnxruntime && pip install onnxruntime-gpu==1.31.1, or the [gpu] extra) and an "
        "NVIDIA GPU with its driver, CUDA 13 and cuDNN 9 visible (onnxruntime-gpu 1.31.1 is built for "
        "CUDA 13, not 12; check with nvidia-smi). "
        "Set FACTCHECK_RUNTIME__PROVIDER=cpu or auto to run on the CPU."
    )


def choose_providers(provider: str) -> list[str]:
    """Execution providers for the ``runtime.provider`` setting: cpu, cuda (must exist), or
    auto (CUDA when onnxruntime offers it, else CPU)."""
    available = ort.get_available_providers()
    if provider == "cpu":
        return [CPU]
    if provider == "cuda":
        if CUDA not in available:
            raise ProviderUnavailable(_cuda_help(f"this onnxruntime offers only {available}"))
        _preload_cuda_libraries()
        return [CUDA, CPU]
    if provider == "auto":
        if CUDA not in available:
            return [CPU]
        _preload_cuda_libraries()
        return [CUDA, CPU]
    raise ValueError(f"unknown runtime.provider {provider!r}; expected auto, cpu or cuda")


@functools.cache
def _preload_cuda_libraries() -> None:
    """Load CUDA and cuDNN from the ``nvidia-*`` pip packages (as PyTorch installs them) when
    they are there, so onnxruntime-gpu finds them without LD_LIBRARY_PATH; a system CUDA is
    found by the loader anyway."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # noqa: BLE001 - missing pip CUDA packages: the system's may do
        log.info("onnxruntime.preload_dlls found no CUDA pip packages (%s)", exc)


def session_options(settings: RuntimeSettings) -> ort.SessionOptions:
    """Options for every session; with onnxruntime's exact int8 products where this CPU's default
    int8 kernel saturates (``middleware.runtime.cpu``): the same int8 graph then gives every x86
    CPU the same logits (issue 47)."""
    options = ort.SessionOptions()
    if exact_int8_switch_needed():
        options.add_session_config_entry(*EXACT_INT8_PRODUCTS)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = settings.intra_op_threads
    options.inter_op_num_threads = settings.inter_op_threads
    spin = "1" if settings.thread_spinning else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spin)
    options.add_session_config_entry("session.inter_op.allow_spinning", spin)
    options.log_severity_level = 3  # errors only: shape-inference chatter is not news
    return options


class OnnxSession:
    """One model file loaded on one provider. ``run`` takes numpy feeds (or device values from
    ``to_device``) and returns numpy outputs in ``output_names`` order. ``choice`` (from
    ``load_graph``) says how the file stores its weights and the precision to compute in;
    without it the file is loaded as it is."""

    def __init__(
        self,
        path: Path,
        settings: RuntimeSettings,
        io_binding: bool | None = None,
        choice: GraphChoice | None = None,
        providers: list[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.precision = choice.compute if choice else "as stored"
        wanted = providers or choose_providers(settings.provider)
        source: str | bytes = str(self.path)
        if choice is not None and choice.converted:
            source = prepared_graph(self.path, choice.compute)
        self.session = ort.InferenceSession(source, session_options(settings), providers=wanted)
        active = self.session.get_providers()
        if settings.provider == "cuda" and CUDA not in active:
            raise ProviderUnavailable(_cuda_help("the CUDA provider failed to start (no GPU visible?)"))
        self.provider = active[0]
        self.device: Device = "cuda" if self.provider == CUDA else "cpu"
        self.io_binding = self.provider == CUDA if io_binding is None else io_binding
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        what = choice.describe() if choice else self.path.name
        log.info("loaded %s from %s on %s", what, self.path.parent, self.provider)

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        if self.io_binding:
            return self._run_bound(feeds)
        return self.session.run(self.output_names, dict(feeds))

    def to_device(self, array: np.ndarray) -> Any:
        """``array`` where the session computes: an OrtValue on the GPU under IO binding, else
        the array itself. Use it for inputs fed unchanged to many runs."""
        if not self.io_binding:
            return array
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, 0)

    def _run_bound(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        binding = self.session.io_binding()
        for name, value in feeds.items():
            if isinstance(value, ort.OrtValue):
                binding.bind_ortvalue_input(name, value)
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name in self.output_names:
            binding.bind_output(name, self.device)
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


@dataclass(frozen=True)
class _Key:
    path: str
    mtime_ns: int  # a re-exported file gets a new session
    compute: str | None
    providers: tuple[str, ...]
    intra: int
    inter: int
    spinning: bool


_SESSIONS: dict[_Key, OnnxSession] = {}
_LOCK = threading.Lock()


def load_graph(directory: Path, manifest: Manifest, role: str, settings: RuntimeSettings) -> OnnxSession:
    """The shared session for graph ``role`` of the export in ``directory``: the file and
    precision ``runtime.precision`` asks for on this device. With ``provider: auto`` a model
    that CUDA cannot run (only a dynamically quantised int8 graph) runs on the CPU, with a
    warning; with ``provider: cuda`` that is an error."""
    choice, providers = graph_choice(directory, manifest, role, settings)
    return get_session(choice.path, settings, choice, providers)


def graph_choice(
    directory: Path, manifest: Manifest, role: str, settings: RuntimeSettings, warn: bool = True
) -> tuple[GraphChoice, list[str]]:
    """The file and precision of graph ``role`` that ``load_graph`` loads, and the providers it
    runs on (see ``load_graph``); ``warn``: log the fallback to the CPU."""
    providers = choose_providers(settings.provider)
    device: Device = "cuda" if providers[0] == CUDA else "cpu"
    try:
        return choose_graph(directory, manifest, role, device, settings.precision), providers
    except Int8OnCuda as exc:
        if settings.provider == "cuda":
            raise ProviderUnavailable(str(exc)) from None
        if warn:
            log.warning("%s; running it on the CPU", exc)
        return choose_graph(directory, manifest, role, "cpu", settings.precision), [CPU]


def get_session(
    path: Path, settings: RuntimeSettings, choice: GraphChoice | None = None, providers: list[str] | None = None
) -> OnnxSession:
    """The process-wide session for ``path`` under these settings (created on first use)."""
    resolved = Path(path).resolve()
    wanted = providers or choose_providers(settings.provider)
    key = _Key(
        str(resolved),
        resolved.stat().st_mtime_ns,
        choice.compute if choice else None,  # the session's precision is part of what it is
        tuple(wanted),
        settings.intra_op_threads,
        settings.inter_op_threads,
        settings.thread_spinning,
    )
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = OnnxSession(Path(key.path), settings, choice=choice, providers=wanted)
        return session


def clear_sessions() -> None:
    """Forget every shared session (their memory is freed once no model holds them)."""
    with _LOCK:
        _SESSIONS.clear()
