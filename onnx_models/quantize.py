"""int8 dynamic quantisation of exported graphs, and int8 copies of fp32 export directories.
Needs onnxruntime only (no torch).

Dynamic int8 multiplies uint8 activations by int8 weights. On x86 CPUs without VNNI (AVX2,
AVX-512F/BW) onnxruntime's default kernel adds each two neighbouring products in a saturating
int16 (255 x 127 x 2 overflows it), so the same graph gave other logits there than on a VNNI
CPU (issue 47: 0.505 first-token agreement of a tiny T5, which the test double in
tests/support/saturating_kernel.py reproduces). The weights stay 8-bit: on those CPUs the
runtime asks onnxruntime for exact products (``middleware.runtime.cpu``), which gives every x86
CPU the VNNI results. 7-bit weights (``reduce_range``), exact on any kernel without that switch,
cost the shipped verifier 1.5 points of LFQA balanced accuracy (84.3 -> 82.8, re-quantised from
its weight-only copy; 83.6 at 8 bits the same way), so they are not used (its model card).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from onnx_models.manifest import Manifest, checksum_files, is_export_dir, read_manifest
from onnx_models.weights import WEIGHTS_INT8, quantize_weights_int8

QUANTIZED_ROLES = ("model", "decoder")
"""Graphs that int8 quantises. A T5 encoder's activation outliers survive per-tensor dynamic
quantisation badly (first-token argmax kept on ~70% of inputs in our tests, against ~98% for
the decoder alone), and the decoder is where generation spends its time, so the encoder stays
fp32."""


def quantize_int8(graph: Path) -> None:
    """Replace ``graph`` by its dynamically int8-quantised version (weights int8 per channel,
    activations quantised per batch at run time). Shape inference first, as onnxruntime
    recommends."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = graph.with_suffix(".pre.onnx")
    quantized = graph.with_suffix(".int8.onnx")
    try:
        quant_pre_process(str(graph), str(prepared), skip_symbolic_shape=True)
        quantize_dynamic(
            str(prepared),
            str(quantized),
            weight_type=QuantType.QInt8,
            per_channel=True,  # per-tensor weights cost MiniLM ~0.05 of cosine to its fp32 self
            extra_options={"DefaultTensorType": 1},  # FLOAT, for outputs of fused contrib ops
        )
        os.replace(quantized, graph)
    finally:
        prepared.unlink(missing_ok=True)
        quantized.unlink(missing_ok=True)


def apply_int8(directory: Path, manifest: Manifest) -> None:
    """Quantise the graphs of an fp32 export being built in ``directory``; update ``manifest``
    (its checksums are left to the caller). Each quantised graph also gets a weight-only int8
    copy (``weights-int8`` variant): dynamic int8 runs on the CPU only, and that copy, about
    as small, is what a GPU loads (``onnx_models.weights``)."""
    manifest.quantized_graphs = [role for role in manifest.graphs if role in QUANTIZED_ROLES]
    for role in manifest.quantized_graphs:
        graph = Path(directory) / manifest.graphs[role]
        gpu_copy = graph.with_name(f"{graph.stem}.{WEIGHTS_INT8}.onnx")
        quantize_weights_int8(graph, gpu_copy)
        manifest.variants.setdefault(WEIGHTS_INT8, {})[role] = gpu_copy.name
        quantize_int8(graph)
    manifest.quantization = "int8"


def quantize_export(source: Path, out: Path) -> Path:
    """Write an int8 copy of the fp32 export ``source`` into ``out``: no re-export needed."""
    manifest = read_manifest(source)
    if manifest.quantization != "none":
        raise ValueError(f"{source} is already quantised ({manifest.quantization})")
    with building(out) as work:
        for name in manifest.files:
            shutil.copy2(Path(source) / name, work / name)
        apply_int8(work, manifest)
        manifest.files = checksum_files(work)
        manifest.write(work)
    return out


@contextlib.contextmanager
def building(out: Path) -> Iterator[Path]:
    """A scratch directory beside ``out`` that replaces ``out`` when the block succeeds, so an
    export directory appears whole or not at all; removed on failure."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield work
        if out.exists():
            if out.is_dir() and (is_export_dir(out) or not any(out.iterdir())):
                shutil.rmtree(out)
            else:
                raise FileExistsError(f"{out} exists and is not an exported model directory; not overwriting")
        work.chmod(0o755)  # mkdtemp makes it private
        os.replace(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
