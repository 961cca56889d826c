"""Whether onnxruntime's int8 kernel on this CPU needs its exact-products switch (issue 47): asked
of the kernel itself, with /proc/cpuinfo's flags printed beside the answer."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import middleware.runtime.cpu as cpu
from middleware.runtime.cpu import EXACT_PROBE, cpuinfo_field, describe, int8_flags, probe_graph, probe_sum
from tests.support.saturating_kernel import saturating

ROOT = Path(__file__).resolve().parents[3]
SATURATED_PROBE = 32 * 32_767  # each two neighbouring products clipped to int16, as an AVX2 kernel adds them


@pytest.fixture
def fresh_answer() -> Iterator[None]:
    cpu.exact_int8_switch_needed.cache_clear()
    yield
    cpu.exact_int8_switch_needed.cache_clear()


def test_the_probe_tells_a_saturating_kernel_from_an_exact_one() -> None:
    """The probe's product overflows int16 pairs: a kernel that clips them (the AVX2 kernel's test
    double) misses the exact sum, and the exact-products switch gets it on this CPU."""
    assert probe_sum(saturating(probe_graph()), exact_switch=False) == SATURATED_PROBE
    assert probe_sum(probe_graph(), exact_switch=True) == EXACT_PROBE


@pytest.mark.parametrize(("machine", "saturates", "needed"), [
    ("x86_64", True, True), ("x86_64", False, False), ("AMD64", True, True), ("aarch64", True, False),
])
def test_the_switch_follows_the_kernel_on_x86(
    machine: str, saturates: bool, needed: bool, fresh_answer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpu.platform, "machine", lambda: machine)
    monkeypatch.setattr(cpu, "int8_kernel_saturates", lambda: saturates)
    assert cpu.exact_int8_switch_needed() is needed


EMULATED_AVX2 = """
import numpy as np, onnxruntime as ort
from middleware.runtime.cpu import EXACT_PROBE, exact_int8_switch_needed, probe_graph
from middleware.runtime.onnx_session import session_options
from middleware.settings import RuntimeSettings
session = ort.InferenceSession(probe_graph().SerializeToString(), session_options(RuntimeSettings(provider="cpu")),
                               providers=["CPUExecutionProvider"])
total = int(session.run(None, {"a": np.full((1, 64), 255, np.uint8)})[0][0, 0])
print(exact_int8_switch_needed(), total == EXACT_PROBE)
"""


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None or platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="needs qemu-user (apt-get install qemu-user) on an x86 host")
@pytest.mark.timeout(600)
def test_an_emulated_avx2_cpu_gets_exact_products() -> None:
    """Under ``qemu-x86_64 -cpu Haswell-v4`` (AVX2, no AVX-512 or VNNI; /proc/cpuinfo stays the
    host's) the runtime's sessions compute the probe exactly. Failed before the switch was
    chosen by the kernel: on a VNNI host the host's flags left it off and the kernel saturated."""
    done = subprocess.run(["qemu-x86_64", "-cpu", "Haswell-v4", sys.executable, "-c", EMULATED_AVX2], cwd=ROOT,
                          capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"], done.stdout


def test_flags_and_model_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n"
                       "flags\t\t: fpu sse4_2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: other\n")
    assert cpuinfo_field("model name", cpuinfo) == "AMD EPYC 7763 64-Core Processor"
    flags = frozenset((cpuinfo_field("flags", cpuinfo) or "").split())
    assert flags == {"fpu", "sse4_2", "avx", "avx2", "fma"}
    assert int8_flags(flags) == ["avx2"] and int8_flags(None) == []
    assert cpuinfo_field("flags", tmp_path / "absent") is None


def test_describe_names_the_flags_and_the_switch() -> None:
    line = describe()
    assert line.startswith("CPU: ") and "int8 flags: " in line and "exact int8 products switch: " in line
