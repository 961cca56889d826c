"""Defaults that fit the machine (issue 47): ``server.workers`` and ``check.workers`` default to
``auto``, sized from the CPUs the process may use and its memory (``middleware.machine``): the
issue's measured rows (2 cores: 1 relay, 2 check workers; 5: 1 and 4; 8: 2 and 3 each), the
in-process path on one CPU, fewer processes where memory is short."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware import machine
from middleware.machine import CHECK_WORKER_BYTES, RELAY_BYTES, Machine, Sizing, size_for
from middleware.settings import CheckSettings, ServerSettings, load_settings

PLENTY = 64 * 1024**3


@pytest.mark.parametrize(("cpus", "expected"), [
    (1, Sizing(1, 0)), (2, Sizing(1, 2)), (3, Sizing(1, 2)), (4, Sizing(1, 3)), (5, Sizing(1, 4)),
    (8, Sizing(2, 3)), (16, Sizing(4, 3)),
])
def test_the_measured_rows_and_one_relay_per_four_cpus(cpus: int, expected: Sizing) -> None:
    assert size_for(Machine(cpus, PLENTY)) == expected


def test_memory_short_means_fewer_check_workers_then_fewer_relays_then_none() -> None:
    assert size_for(Machine(8, 2 * (RELAY_BYTES + 2 * CHECK_WORKER_BYTES))) == Sizing(2, 2)
    assert size_for(Machine(8, 2 * RELAY_BYTES + 2 * CHECK_WORKER_BYTES)) == Sizing(2, 1)
    assert size_for(Machine(8, RELAY_BYTES + 2 * CHECK_WORKER_BYTES)) == Sizing(1, 2)
    assert size_for(Machine(8, RELAY_BYTES)) == Sizing(1, 0)  # no room for a worker: the in-process path


def test_a_fixed_relay_count_gets_the_check_workers_that_fit_beside_it() -> None:
    assert size_for(Machine(8, PLENTY), relays=1) == Sizing(1, 7)
    assert size_for(Machine(8, PLENTY), relays=4) == Sizing(4, 2)
    assert size_for(Machine(1, PLENTY), relays=3) == Sizing(3, 0)


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch):
    """Settings read as on a machine of ``cpus`` CPUs and plenty of memory, the suite's pinned
    worker counts (tests/conftest.py) removed."""
    monkeypatch.delenv("FACTCHECK_SERVER__WORKERS", raising=False)
    monkeypatch.delenv("FACTCHECK_CHECK__WORKERS", raising=False)

    def machine_of(cpus: int) -> None:
        monkeypatch.setattr(Machine, "current", classmethod(lambda cls: Machine(cpus, PLENTY)))
    return machine_of


def test_the_defaults_are_auto_and_fit_the_machine(on) -> None:
    """Before: one relay process and the checks on its event loop, whatever the machine."""
    on(8)
    settings = load_settings()
    assert (settings.server.workers, settings.check.workers) == (2, 3)
    assert ServerSettings.model_fields["workers"].default == CheckSettings.model_fields["workers"].default == "auto"
    on(1)
    settings = load_settings()
    assert (settings.server.workers, settings.check.workers) == (1, 0)  # one CPU: the in-process path


def test_explicit_counts_win_and_auto_check_workers_follow_an_explicit_relay_count(on, monkeypatch) -> None:
    on(8)
    assert load_settings(**{"server.workers": 1}).check.workers == 7
    monkeypatch.setenv("FACTCHECK_SERVER__WORKERS", "4")
    assert load_settings().check.workers == 2
    assert load_settings(**{"check.workers": 0}).check.workers == 0
    assert load_settings(**{"server.workers": "auto", "check.workers": "auto"}).server.workers == 2


def test_the_machine_is_read_from_affinity_cgroup_and_meminfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(machine, "_CGROUP", tmp_path)
    assert machine.usable_cpus() == 4  # no cgroup v2 files: the affinity
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert machine.usable_cpus() == 1  # a quota of 1.5 CPUs
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert machine.usable_cpus() == 4
    (tmp_path / "memory.max").write_text(f"{3 * 1024**3}\n")
    (tmp_path / "memory.current").write_text(f"{1024**3}\n")
    assert machine.usable_memory_bytes() == min(2 * 1024**3, machine._meminfo_available() or 1 << 60)
    assert 0 < (machine._meminfo_available() or 0) < 1 << 50  # this Linux machine's MemAvailable
