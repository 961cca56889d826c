"""The CPU's instruction sets that onnxruntime's int8 kernels depend on, and whether this CPU
needs onnxruntime's exact-products switch to compute what every other CPU computes (issue 47).

Dynamic int8 graphs multiply uint8 activations by int8 weights. With VNNI (``avx512_vnni``,
``avx_vnni``) or AMX the kernels add the products exactly in int32; without them (AVX2,
AVX-512F/BW) they add each two neighbouring products in a saturating int16 first, so the same
graph gives other logits and other verdicts (the shipped verifier's battery moved by up to 0.8
points on an AMD EPYC with AVX2 only; a tiny T5's first token kept 0.505 of its argmaxes).
``session.x64quantprecision`` makes onnxruntime move such weights to uint8 at load and use the
uint8 x uint8 kernels, which cannot saturate: the VNNI results, at about half the speed (the
shipped verifier on one thread of a VNNI CPU with the switch forced: 1.86 times slower). So
the switch is set only where it is needed.
"""

from __future__ import annotations

import functools
import logging
import platform
from pathlib import Path

EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
"""``/proc/cpuinfo`` flags under which onnxruntime's uint8 x int8 kernels add products exactly."""

INT8_FLAG_PREFIXES = ("avx2", "avx512", "avx_vnni", "amx")
"""The flags worth printing beside int8 results (``int8_flags``)."""

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


def needs_exact_int8_switch(machine: str, flags: frozenset[str] | None) -> bool:
    """Does a CPU of this ``machine`` type with these ``flags`` need ``session.x64quantprecision``
    for exact int8 products? True on x86 without VNNI or AMX, and on x86 whose flags are not
    known (exact first, speed second); False elsewhere (the switch does nothing off x86)."""
    if machine.lower() not in _X86:
        return False
    return flags is None or not (flags & EXACT_INT8_FLAGS)


@functools.cache
def exact_int8_switch_needed() -> bool:
    """``needs_exact_int8_switch`` for the CPU this process runs on (logged once where it is)."""
    needed = needs_exact_int8_switch(platform.machine(), cpu_flags())
    if needed:
        flags = cpu_flags()
        log.info("no VNNI or AMX on this CPU (int8 flags: %s): int8 graphs run on onnxruntime's exact uint8 "
                 "kernels (session.x64quantprecision), slower than its default ones, with the results of any "
                 "other x86 CPU", " ".join(int8_flags(flags)) if flags is not None else "unknown")
    return needed


def describe() -> str:
    """One line for logs and CI: the CPU, its int8 flags, and whether the switch is on."""
    flags = cpu_flags()
    listed = " ".join(int8_flags(flags)) or "none of avx2/avx512/vnni/amx"
    switch = "on (uint8 x uint8 kernels)" if exact_int8_switch_needed() else "off (exact kernels)"
    return (f"CPU: {cpuinfo_field('model name') or platform.machine()}; int8 flags: "
            f"{listed if flags is not None else 'unknown'}; exact int8 products switch: {switch}")


if __name__ == "__main__":
    print(describe())
