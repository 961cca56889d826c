"""Which CPUs need onnxruntime's exact int8 products switch (issue 47), read from /proc/cpuinfo."""

from __future__ import annotations

from pathlib import Path

from middleware.runtime.cpu import cpuinfo_field, describe, int8_flags, needs_exact_int8_switch

AVX2_ONLY = frozenset({"sse4_2", "avx", "avx2", "fma"})  # an AMD EPYC of the Zen 2/3 kind


def test_x86_without_vnni_or_amx_needs_the_switch() -> None:
    assert needs_exact_int8_switch("x86_64", AVX2_ONLY)
    assert needs_exact_int8_switch("x86_64", AVX2_ONLY | {"avx512f", "avx512bw"})  # AVX-512 without VNNI saturates too
    assert needs_exact_int8_switch("AMD64", None)  # flags unknown: exact first
    for exact in ("avx512_vnni", "avx_vnni", "amx_int8"):
        assert not needs_exact_int8_switch("x86_64", AVX2_ONLY | {exact})
    assert not needs_exact_int8_switch("aarch64", None)


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
