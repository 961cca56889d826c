"""Weight-only int8: graphs that store their weights as int8 and compute in floating point.

A dynamically quantised graph (``onnx_models.quantize``) computes its matrix products in int8,
which the CPU does fast and CUDA cannot do at all: onnxruntime runs those operators on the CPU
with copies between devices, slower than the CPU alone. A weight-only graph keeps the fp32
graph and replaces each large weight by ``DequantizeLinear(int8, scale)`` (symmetric, one scale
per output channel). It is as small as the int8 file, so the repository ships one file for GPUs
beside the CPU one instead of a 90 MB fp32 copy, and it loses less than dynamic int8 because
activations stay in floating point.

On a GPU the runtime folds the weights back into floating-point initializers once, at load
(``dequantized``), and optionally converts the graph to fp16 (``to_fp16``): the session then
computes exactly as an fp32 (or fp16) export whose weights were rounded to int8 steps.
Needs the ``onnx`` package (a dependency of onnxruntime's tooling), never torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

WEIGHTS_INT8 = "weights-int8"
"""The manifest's name for a weight-only int8 copy (``Manifest.variants``)."""

MIN_ELEMENTS = 1024
"""Weights smaller than this (biases, token-type embeddings) stay fp32: they cost nothing."""

_WEIGHT_SLOTS: dict[str, dict[int, int]] = {
    # op type -> {input index of a weight: the axis that indexes output channels (or rows)}
    "MatMul": {1: 1},
    "Attention": {1: 1},
    "EmbedLayerNormalization": {2: 0, 3: 0, 4: 0},
    "Gather": {0: 0},
}
SCALE_SUFFIX = "_w8_scale"
ZERO_SUFFIX = "_w8_zero"
QUANT_SUFFIX = "_w8"


def _weight_axis(node: Any, index: int) -> int | None:
    """The per-channel axis of ``node``'s input ``index`` if that input is a weight, else None."""
    if node.op_type == "Gemm" and index == 1:
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return _WEIGHT_SLOTS.get(node.op_type, {}).get(index)


def _weight_uses(graph: Any) -> Iterator[tuple[str, int | None]]:
    for node in graph.node:
        for index, name in enumerate(node.input):
            yield name, _weight_axis(node, index)


def quantize_weights_int8(source: Path, target: Path, min_elements: int = MIN_ELEMENTS) -> list[str]:
    """Write ``source``'s graph to ``target`` with every large 2-D float weight stored as int8
    plus per-channel scales behind a ``DequantizeLinear``; returns the names quantised. A
    weight used where no per-channel axis is known (or with two different axes) stays fp32."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    axes: dict[str, set[int | None]] = {}
    for name, axis in _weight_uses(graph):
        axes.setdefault(name, set()).add(axis)
    done: list[str] = []
    kept = []
    for init in graph.initializer:
        wanted = axes.get(init.name, set())
        if (init.data_type != TensorProto.FLOAT or len(init.dims) != 2 or len(wanted) != 1
                or None in wanted or int(np.prod(init.dims)) < min_elements):
            kept.append(init)
            continue
        axis = next(iter(wanted))
        assert axis is not None
        weight = numpy_helper.to_array(init).astype(np.float32)
        quantized, scale = _symmetric_int8(weight, axis)
        kept += [
            numpy_helper.from_array(quantized, init.name + QUANT_SUFFIX),
            numpy_helper.from_array(scale, init.name + SCALE_SUFFIX),
            numpy_helper.from_array(np.zeros_like(scale, dtype=np.int8), init.name + ZERO_SUFFIX),
        ]
        graph.node.insert(0, helper.make_node(
            "DequantizeLinear",
            [init.name + QUANT_SUFFIX, init.name + SCALE_SUFFIX, init.name + ZERO_SUFFIX],
            [init.name], name=f"dequantize_{init.name}", axis=axis,
        ))
        done.append(init.name)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return done


def _symmetric_int8(weight: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """int8 values and one fp32 scale per index of ``axis``: w ~ q * scale, q in [-127, 127]."""
    reduce = 1 - axis
    peak = np.abs(weight).max(axis=reduce)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    shaped = scale.reshape((-1, 1) if axis == 0 else (1, -1))
    quantized = np.clip(np.rint(weight / shaped), -127, 127).astype(np.int8)
    return quantized, scale


def is_weight_only(model: Any) -> bool:
    """Does this graph hold weights behind ``DequantizeLinear`` of initializers?"""
    initializers = {init.name for init in model.graph.initializer}
    return any(n.op_type == "DequantizeLinear" and n.input[0] in initializers for n in model.graph.node)


def dequantized(model: Any) -> Any:
    """``model`` with each ``DequantizeLinear`` of an initializer replaced by the fp32 weight it
    computes (in place; returned for chaining)."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    folded: set[str] = set()
    remaining = []
    for node in graph.node:
        if node.op_type != "DequantizeLinear" or not all(name in inits for name in node.input):
            remaining.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        values = numpy_helper.to_array(inits[node.input[0]]).astype(np.float32)
        scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        zero = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32) if len(node.input) > 2 else 0.0
        if scale.ndim == 1 and values.ndim == 2:
            shape = (-1, 1) if axis == 0 else (1, -1)
            scale = scale.reshape(shape)
            zero = np.reshape(zero, shape) if np.ndim(zero) else zero
        graph.initializer.append(numpy_helper.from_array((values - zero) * scale, node.output[0]))
        folded.update(node.input)
    del graph.node[:]
    graph.node.extend(remaining)
    used = {name for node in graph.node for name in node.input}
    keep = [init for init in graph.initializer if init.name not in folded or init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return model


def to_fp16(model: Any) -> Any:
    """``model`` computing in fp16 with fp32 inputs and outputs (onnxruntime's converter, which
    keeps the operators that need fp32, such as the softmax of a classifier head, right)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(model, keep_io_types=True)


def prepared_graph(path: Path, precision: str) -> bytes:
    """The serialized graph a session computing in ``precision`` ('fp32' or 'fp16') loads from
    ``path``: weight-only int8 weights folded to fp32, then converted to fp16 if asked."""
    import onnx

    model = onnx.load(str(path))
    if is_weight_only(model):
        dequantized(model)
    if precision == "fp16":
        model = to_fp16(model)
    return bytes(model.SerializeToString())
