"""The machine the process may use, and the process counts that fit it: what
``server.workers: auto`` and ``check.workers: auto`` resolve to.

CPUs: those the process may run on (``os.sched_getaffinity``: a ``taskset`` or a container's
cpuset), fewer when a cgroup CPU quota (``cpu.max``) allows less. Memory: what is available
(``MemAvailable``), less when a cgroup memory limit leaves less.

The sizing (measured on 16 cores with the proxy held to 2, 5 and 8 of them, 200 streams at 100
tokens/s, the pipeline checker; the README's scaling section has the table): one relay process
nears a core of its own in off mode alone at that load, and the checks want every other core.
So one relay process per four CPUs, and the CPUs left shared between check workers (at least
two a relay: they run at a lower priority, so they take only what the relays leave). One CPU
keeps everything in one process (the in-process path). Each process must fit in memory
(``RELAY_BYTES``, ``CHECK_WORKER_BYTES``, measured RSS rounded up): where they do not, the most
relays that fit with a check worker each, each with the check workers that fit beside it; where
not even one relay and one worker fit, the in-process path.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

CPUS_PER_RELAY = 4
"""One relay process per this many CPUs (at 200 streams, 100 tokens/s one relay is at 93 % of a core)."""
MIN_CHECK_WORKERS = 2
"""Check workers per relay at the least, on two CPUs or more (measured best on two cores)."""
RELAY_BYTES = 128 * 1024**2
"""A relay process without models (82 MB RSS measured, docs/scaling.md)."""
CHECK_WORKER_BYTES = 512 * 1024**2
"""A check worker with its own models (458-481 MB RSS measured; also the in-process relay's 486 MB)."""

_CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class Machine:
    """What the process may use: CPUs and bytes of memory."""

    cpus: int
    memory_bytes: int

    @classmethod
    def current(cls) -> Machine:
        return cls(usable_cpus(), usable_memory_bytes())


@dataclass(frozen=True, slots=True)
class Sizing:
    """Relay processes (``server.workers``) and check workers per relay (``check.workers``)."""

    relays: int
    check_workers: int


def usable_cpus() -> int:
    """CPUs this process may run on, capped by a cgroup v2 CPU quota (at least one)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(cpus, math.floor(quota)) if quota is not None else cpus)


def usable_memory_bytes() -> int:
    """Memory available to this process: ``MemAvailable``, or a cgroup v2 limit's headroom if
    less (a large default where neither can be read: the sizing then follows the CPUs)."""
    available = _meminfo_available()
    limit = _cgroup_memory_headroom()
    known = [v for v in (available, limit) if v is not None]
    return min(known) if known else 1 << 50


def size_for(machine: Machine, relays: int | None = None) -> Sizing:
    """The process counts for ``machine``; ``relays`` when the relay count is fixed (an
    explicit ``server.workers``), else sized too (see the module's docstring)."""
    if machine.cpus <= 1:
        return Sizing(relays or 1, 0)
    choices = [relays] if relays is not None else range(max(1, machine.cpus // CPUS_PER_RELAY), 0, -1)
    for count in choices:  # the most relays whose processes, each with a check worker at least, fit
        wanted = max(MIN_CHECK_WORKERS, (machine.cpus - count) // count)
        fitting = (machine.memory_bytes // count - RELAY_BYTES) // CHECK_WORKER_BYTES
        if fitting >= 1:
            return Sizing(count, min(wanted, fitting))
    return Sizing(relays or 1, 0)


def _cgroup_cpu_quota() -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` allows (quota / period), or None (no limit, no cgroup v2)."""
    try:
        quota, period = (_CGROUP / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _cgroup_memory_headroom() -> int | None:
    """A cgroup v2 ``memory.max`` less ``memory.current``, or None (no limit, no cgroup v2)."""
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        current = int((_CGROUP / "memory.current").read_text())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - current)


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
