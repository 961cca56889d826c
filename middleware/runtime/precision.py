"""Which graph file a model loads, and at which precision, on the chosen device.

An export directory stores each graph once per precision it ships: the manifest's ``graphs``
(fp32, or dynamically quantised int8 when the manifest says so) and its ``variants`` (other
copies of the same weights: ``weights-int8`` (weight-only int8, ``onnx_models.weights``),
``fp32`` or ``fp16``). ``runtime.precision`` asks for a compute precision; ``auto`` means
int8 on the CPU where an int8 graph exists (fastest there) and fp16 on CUDA.

Dynamically quantised int8 never runs on CUDA: onnxruntime has no CUDA kernels for its
operators and runs them on the CPU with copies between devices, slower than the CPU alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from onnx_models.manifest import Manifest
from onnx_models.weights import WEIGHTS_INT8

Precision = Literal["auto", "int8", "fp32", "fp16"]
Device = Literal["cpu", "cuda"]

INT8 = "int8"
FP32 = "fp32"
FP16 = "fp16"

GPU_DEFAULT = FP16
"""What ``auto`` computes in on CUDA (see the model card for parity with fp32 and the CPU)."""

_SOURCES: dict[str, tuple[str, ...]] = {
    # compute precision -> stored precisions it can be made from, best first
    FP32: (FP32, WEIGHTS_INT8),
    FP16: (FP16, FP32, WEIGHTS_INT8),
}


class Int8OnCuda(ValueError):
    """Only a dynamically quantised int8 graph would do, and CUDA cannot run it."""


@dataclass(frozen=True)
class GraphChoice:
    """The file to load and how: ``stored`` is how the file holds its weights, ``compute`` the
    precision the session computes in (they differ when the runtime converts at load)."""

    path: Path
    stored: str
    compute: str

    @property
    def converted(self) -> bool:
        return self.stored != self.compute

    def describe(self) -> str:
        how = f"{self.stored} weights" + (f", computing in {self.compute}" if self.converted else "")
        return f"{self.path.name} ({how})"


def stored_graphs(manifest: Manifest, role: str) -> dict[str, str]:
    """Stored precision -> file of graph ``role``, every copy the export ships."""
    main = INT8 if manifest.quantization == INT8 and role in manifest.quantized_graphs else FP32
    files = {main: manifest.graphs[role]}
    for precision, graphs in manifest.variants.items():
        if role in graphs:
            files.setdefault(precision, graphs[role])
    return files


def choose_graph(directory: Path, manifest: Manifest, role: str, device: Device, precision: Precision) -> GraphChoice:
    """The graph of ``role`` to load on ``device`` for ``precision`` (see the module doc)."""
    stored = stored_graphs(manifest, role)
    compute = precision if precision != "auto" else _auto(device, stored)
    if compute == INT8:
        if device == "cuda":
            raise Int8OnCuda(
                f"{directory}: CUDA cannot run a dynamically quantised int8 graph; "
                "set runtime.precision to fp32 or fp16 (an export needs an fp32 or weights-int8 copy)"
            )
        if INT8 not in stored:
            raise ValueError(f"{directory} ships no int8 graph for {role} (it has {sorted(stored)})")
        return GraphChoice(Path(directory) / stored[INT8], INT8, INT8)
    for source in _SOURCES[compute]:
        if source in stored:
            return GraphChoice(Path(directory) / stored[source], source, compute)
    message = f"{directory} ships no graph for {role} that can compute in {compute} (it has {sorted(stored)})"
    raise Int8OnCuda(message) if device == "cuda" else ValueError(message)


def _auto(device: Device, stored: dict[str, str]) -> str:
    if device == "cuda":
        return GPU_DEFAULT
    return INT8 if INT8 in stored else FP32
