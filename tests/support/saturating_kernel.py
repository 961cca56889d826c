"""A test double of onnxruntime's uint8 x int8 kernel on x86 CPUs without VNNI (AVX2, AVX-512F/BW),
so that tests on any CPU can see what such a CPU computes (issue 47).

Those kernels multiply with ``vpmaddubsw``: each two neighbouring products along the inner
dimension (k = 2j, 2j + 1) are added in a *saturating* int16, then the int16 sums are added
exactly in int32. VNNI kernels (``vpdpbusd``) add the products exactly. ``saturating`` rewrites
every ``MatMulInteger`` of a graph (uint8 activations, constant int8 weights with zero points 0,
as dynamic quantisation makes them) into standard operators computing the saturating sum, so
an onnxruntime session on this machine computes what a CPU without VNNI would. The sums run in
float32, exact while (inner dimension / 2) x 32,767 stays under 2**24: tiny test graphs.
It reproduces issue 47's figure: the tiny T5 of tests/conftest.py keeps 0.505 of its int8
first-token argmaxes under it, as it did on an AMD EPYC with AVX2 only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

INT16 = (-32768.0, 32767.0)


def saturating(model: Any) -> Any:
    """``model`` with each ``MatMulInteger`` computed as the AVX2 kernel does (in place)."""
    graph = model.graph
    constants = {init.name: init for init in graph.initializer}
    nodes = []
    for node in graph.node:
        if node.op_type == "MatMulInteger":
            nodes += _saturating_matmul(node, constants, graph.initializer)
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _saturating_matmul(node: Any, constants: dict[str, Any], initializers: Any) -> list[Any]:
    from onnx import TensorProto, helper, numpy_helper

    a, b, a_zero = node.input[:3]
    weight = numpy_helper.to_array(constants[b]).astype(np.float32)
    if len(node.input) > 3 and np.any(numpy_helper.to_array(constants[node.input[3]])):
        raise ValueError(f"{node.name}: the double handles symmetric weights (zero point 0) only")
    k = weight.shape[0]
    evens, odds = np.arange(0, k, 2), np.arange(1, k, 2)
    odd_weight = weight[odds]
    if len(odds) < len(evens):  # an odd k: the last product has no neighbour
        odds = np.append(odds, 0)
        odd_weight = np.vstack([odd_weight, np.zeros((1, weight.shape[1]), np.float32)])
    p = f"{node.name or node.output[0]}_sat"
    initializers.extend([
        numpy_helper.from_array(weight[evens], f"{p}_w_even"), numpy_helper.from_array(odd_weight, f"{p}_w_odd"),
        numpy_helper.from_array(evens.astype(np.int64), f"{p}_evens"),
        numpy_helper.from_array(odds.astype(np.int64), f"{p}_odds"),
        numpy_helper.from_array(np.array([-1], np.int64), f"{p}_last"),
        numpy_helper.from_array(np.array([-2], np.int64), f"{p}_pairs"),
        numpy_helper.from_array(np.array(INT16[0], np.float32), f"{p}_lo"),
        numpy_helper.from_array(np.array(INT16[1], np.float32), f"{p}_hi"),
        numpy_helper.from_array(weight.sum(0), f"{p}_colsum"),
    ])

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> Any:
        return helper.make_node(kind, inputs, [out], **attrs)

    # products of raw uint8 activations, neighbours summed and clipped to int16, then summed;
    # the zero point's share (a_zero x column sums) is subtracted exactly, as the kernels do
    return [
        op("Cast", [a], f"{p}_a", to=TensorProto.FLOAT),
        op("Gather", [f"{p}_a", f"{p}_evens"], f"{p}_a_even", axis=-1),
        op("Gather", [f"{p}_a", f"{p}_odds"], f"{p}_a_odd", axis=-1),
        op("Unsqueeze", [f"{p}_a_even", f"{p}_last"], f"{p}_a_even3"),
        op("Unsqueeze", [f"{p}_a_odd", f"{p}_last"], f"{p}_a_odd3"),
        op("Mul", [f"{p}_a_even3", f"{p}_w_even"], f"{p}_even"),
        op("Mul", [f"{p}_a_odd3", f"{p}_w_odd"], f"{p}_odd"),
        op("Add", [f"{p}_even", f"{p}_odd"], f"{p}_pair"),
        op("Clip", [f"{p}_pair", f"{p}_lo", f"{p}_hi"], f"{p}_int16"),
        op("ReduceSum", [f"{p}_int16", f"{p}_pairs"], f"{p}_sum", keepdims=0),
        op("Cast", [a_zero], f"{p}_a_zero", to=TensorProto.FLOAT),
        op("Mul", [f"{p}_a_zero", f"{p}_colsum"], f"{p}_zero_share"),
        op("Sub", [f"{p}_sum", f"{p}_zero_share"], f"{p}_y"),
        op("Cast", [f"{p}_y"], node.output[0], to=TensorProto.INT32),
    ]
