"""Whether onnxruntime's int8 kernels on this CPU need its exact-products switch to compute what
every other CPU computes (issue 47), and the CPU's instruction sets for logs and CI.

Dynamic int8 graphs multiply uint8 activations by int8 weights. With VNNI (``avx512_vnni``,
``avx_vnni``) or AMX the kernels add the products exactly in int32; without them (AVX2,
AVX-512F/BW) they add each two neighbouring products in a saturating int16 first, so the same
graph gives other logits and other verdicts (the shipped verifier's battery moved by up to 0.8
points on an AMD EPYC with AVX2 only; a tiny T5's first token kept 0.505 of its argmaxes).
``session.x64quantprecision`` makes onnxruntime move such weights to uint8 at load and use the
uint8 x uint8 kernels, which cannot saturate: the VNNI results, at about half the speed (the
shipped verifier on one thread of a VNNI CPU with the switch forced: 1.86 times slower). So
the switch is set only where it is needed.

Where it is needed is asked of onnxruntime itself (``int8_kernel_saturates``: one tiny product
that overflows int16), not read from ``/proc/cpuinfo``: onnxruntime picks its kernel from the
CPUID instruction, which an emulator answers for the CPU it emulates while ``/proc/cpuinfo``
stays the host's (``qemu-x86_64 -cpu Haswell`` on a VNNI host: the flags said VNNI, the kernel
saturated, the verifier's probabilities moved by up to 0.24), and which Windows and macOS answer
without any ``/proc/cpuinfo``. The flags are printed beside the answer (``describe``).
"""

from __future__ import annotations

import functools
import logging
import platform
from pathlib import Path
from typing import Any

INT8_FLAG_PREFIXES = ("avx2", "avx512", "avx_vnni", "amx")
"""The flags worth printing beside int8 results (``int8_flags``)."""

PROBE_DEPTH = 64
"""Inner dimension of ``int8_kernel_saturates``'s product: 64 products of 255 x 127."""
EXACT_PROBE = 255 * 127 * PROBE_DEPTH
"""The probe's exact sum (2,072,640); a kernel that clips each two neighbouring products to int16
gets 32 x 32,767 = 1,048,544."""
EXACT_INT8_PRODUCTS = ("session.x64quantprecision", "1")
"""onnxruntime's switch for exact uint8 x int8 products on x86 CPUs without VNNI."""

log = logging.getLogger(__name__)

_X86 = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})
CPUINFO = Path("/proc/cpuinfo")


def cpuinfo_field(name: str, cpuinfo: Path = CPUINFO) -> str | None:
    """The first processor's ``name`` line in ``cpuinfo``; None where it cannot be read (not Linux)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


@functools.cache
def cpu_flags() -> frozenset[str] | None:
    """This CPU's flags (``/proc/cpuinfo``); None where they cannot be read."""
    flags = cpuinfo_field("flags")
    return None if flags is None else frozenset(flags.split())


def int8_flags(flags: frozenset[str] | None) -> list[str]:
    """The flags among ``flags`` that onnxruntime's int8 kernels dispatch on, sorted."""
    return sorted(f for f in flags or () if f.startswith(INT8_FLAG_PREFIXES))


def probe_graph() -> Any:
    """An ONNX ``MatMulInteger`` of a [1, 64] uint8 input by constant int8 weights of 127 (zero
    points 0, as dynamic quantisation makes them): fed 255s, each two neighbouring products add
    up to 64,770, past int16."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"])], "int8_probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, PROBE_DEPTH])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 8])],
        [numpy_helper.from_array(np.full((PROBE_DEPTH, 8), 127, np.int8), "b"),
         numpy_helper.from_array(np.array(0, np.uint8), "a_zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def probe_sum(model: Any, exact_switch: bool) -> int:
    """The sum ``model`` (``probe_graph``'s shape) computes for 255s on onnxruntime's CPU kernels
    of this process, with or without ``session.x64quantprecision``."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if exact_switch:
        options.add_session_config_entry(*EXACT_INT8_PRODUCTS)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return int(session.run(None, {"a": np.full((1, PROBE_DEPTH), 255, np.uint8)})[0][0, 0])


def int8_kernel_saturates() -> bool:
    """Does onnxruntime's default uint8 x int8 kernel on this CPU (as its CPUID says: an emulated
    one's) clip products, i.e. miss ``EXACT_PROBE``?"""
    return probe_sum(probe_graph(), exact_switch=False) != EXACT_PROBE


@functools.cache
def exact_int8_switch_needed() -> bool:
    """Does this process need ``session.x64quantprecision`` for exact int8 products? Where its
    default kernel saturates, on x86 (the switch does nothing elsewhere); logged once where it does."""
    if platform.machine().lower() not in _X86 or not int8_kernel_saturates():
        return False
    flags = cpu_flags()
    log.info("onnxruntime's default int8 kernel on this CPU saturates (no VNNI or AMX; /proc/cpuinfo int8 flags: %s): "
             "int8 graphs run on its exact uint8 kernels (session.x64quantprecision), slower than the default ones, "
             "with the results of any other x86 CPU", " ".join(int8_flags(flags)) if flags is not None else "unknown")
    return True


def describe() -> str:
    """One line for logs and CI: the CPU, its int8 flags, and whether the switch is on."""
    flags = cpu_flags()
    listed = " ".join(int8_flags(flags)) or "none of avx2/avx512/vnni/amx"
    switch = ("on (the default int8 kernel saturates; uint8 x uint8 kernels)" if exact_int8_switch_needed()
              else "off (the default int8 kernel is exact)")
    return (f"CPU: {cpuinfo_field('model name') or platform.machine()}; /proc/cpuinfo int8 flags: "
            f"{listed if flags is not None else 'unknown'}; exact int8 products switch: {switch}")


if __name__ == "__main__":
    print(describe())
